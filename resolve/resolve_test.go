package resolve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/gguf"
)

// tinyGGUF is a valid GGUF with no tensors or metadata.
func tinyGGUF(t *testing.T) []byte {
	var b bytes.Buffer
	if err := gguf.NewWriter(&b).Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestResolveOrder(t *testing.T) {
	cache, extra := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(extra, "mymodel.gguf"), tinyGGUF(t), 0o644)
	r := &Resolver{CacheDir: cache, Path: []string{extra}}
	p, err := r.Resolve(context.Background(), "mymodel")
	if err != nil || p != filepath.Join(extra, "mymodel.gguf") {
		t.Fatalf("got %q, %v", p, err)
	}
	os.MkdirAll(filepath.Join(cache, "models"), 0o755)
	os.WriteFile(filepath.Join(cache, "models", "mymodel.gguf"), tinyGGUF(t), 0o644)
	if p, _ := r.Resolve(context.Background(), "mymodel"); p != filepath.Join(cache, "models", "mymodel.gguf") {
		t.Fatalf("cache should win, got %q", p)
	}
}

// A damaged copy in the download cache (left by an older version that
// trusted a lying server) is moved aside and fetched again, never used.
func TestResolveDamagedCacheRefetched(t *testing.T) {
	cache := t.TempDir()
	dst := filepath.Join(cache, "models", "stories260K.gguf")
	os.MkdirAll(filepath.Dir(dst), 0o755)
	garbage := bytes.Repeat([]byte{0xAB}, int(Known["stories260K"].Size))
	os.WriteFile(dst, garbage, 0o644)
	downloads := 0
	r := &Resolver{CacheDir: cache, Download: func(ctx context.Context, f HubFile, dst string) error {
		downloads++
		if f.SHA256 == "" || f.Size == 0 {
			t.Errorf("known name without a pinned digest: %+v", f)
		}
		return os.WriteFile(dst, tinyGGUF(t), 0o644)
	}}
	p, err := r.Resolve(context.Background(), "stories260K")
	if err != nil || p != dst || downloads != 1 {
		t.Fatalf("Resolve = %q, %v after %d downloads", p, err, downloads)
	}
	if b, _ := os.ReadFile(dst + ".corrupt"); !bytes.Equal(b, garbage) {
		t.Error("the damaged copy was not kept aside")
	}
}

func TestCheck(t *testing.T) {
	good := tinyGGUF(t)
	c := Check("org/repo/x.gguf")
	if err := c(bytes.NewReader(good), int64(len(good))); err != nil {
		t.Fatalf("valid GGUF: %v", err)
	}
	bad := bytes.Repeat([]byte("x"), 100)
	if err := c(bytes.NewReader(bad), 100); err == nil {
		t.Error("garbage accepted as GGUF")
	}
	for _, name := range []string{"m.safetensors", "m.cmf", "config.json"} {
		if err := Check(name)(bytes.NewReader(bad), 100); err == nil {
			t.Errorf("garbage accepted as %s", name)
		}
	}
	if Check("README.md") != nil {
		t.Error("a check for an unknown format")
	}
}

func TestResolveHFDir(t *testing.T) {
	extra := t.TempDir()
	os.MkdirAll(filepath.Join(extra, "tiny"), 0o755)
	os.WriteFile(filepath.Join(extra, "tiny", "config.json"), []byte("{}"), 0o644)
	r := &Resolver{CacheDir: t.TempDir(), Path: []string{extra}}
	if p, err := r.Resolve(context.Background(), "tiny"); err != nil || p != filepath.Join(extra, "tiny") {
		t.Fatalf("got %q, %v", p, err)
	}
}

func TestResolveNoNetworkSaysSo(t *testing.T) {
	r := &Resolver{CacheDir: t.TempDir()}
	_, err := r.Resolve(context.Background(), "stories260K")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no downloader") {
		t.Fatalf("err = %v", err)
	}
	r.Download = func(ctx context.Context, f HubFile, dst string) error { return errors.New("dial tcp: no route") }
	_, err = r.Resolve(context.Background(), "stories260K")
	if err == nil || !strings.Contains(err.Error(), "no local copy") || !strings.Contains(err.Error(), "no route") {
		t.Fatalf("err = %v", err)
	}
}

func TestResolveDownloads(t *testing.T) {
	r := &Resolver{CacheDir: t.TempDir()}
	r.Download = func(ctx context.Context, f HubFile, dst string) error {
		if f.Repo != "ggml-org/models" || f.File != "tinyllamas/stories260K.gguf" {
			t.Errorf("hub file %+v", f)
		}
		return os.WriteFile(dst, []byte("gguf"), 0o644)
	}
	p, err := r.Resolve(context.Background(), "stories260K")
	if err != nil || !strings.HasSuffix(p, filepath.Join("models", "stories260K.gguf")) {
		t.Fatalf("got %q, %v", p, err)
	}
}

// Hub-style names that would leave the cache are refused before any path is
// built from them, whatever front end (CLI -m, websocket load) passes them.
func TestResolveRejectsTraversal(t *testing.T) {
	base := t.TempDir()
	cache := filepath.Join(base, "cache")
	called := 0
	r := &Resolver{CacheDir: cache, Download: func(ctx context.Context, f HubFile, dst string) error {
		called++
		return os.WriteFile(dst, []byte("gguf"), 0o644)
	}}
	for _, name := range []string{
		"a/b/../../../../tmp/x.gguf",
		"a/b/../../../x.gguf",
		"a/b/c/../../../../x.gguf",
		"a/../b/c.gguf",
		"a/b/./c.gguf",
		"a/b//c.gguf",
		`a/b/..\..\x.gguf`,
		"a/b/c:d.gguf",
		"a/b/c\x00.gguf",
		"a--b/c/d.gguf",
		"a..b/c/d.gguf",
		"-a/b/c.gguf",
		"a/b./c.gguf",
		"...",
		"a..b",
		"bad name",
	} {
		_, err := r.Resolve(context.Background(), name)
		if !errors.Is(err, ErrInvalidName) {
			t.Errorf("Resolve(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	if called != 0 {
		t.Errorf("the downloader ran %d times for invalid names", called)
	}
	if _, err := os.Stat(filepath.Join(base, "tmp")); err == nil {
		t.Error("a file was written outside the cache")
	}
	// A valid reference is downloaded inside the cache.
	p, err := r.Resolve(context.Background(), "org_1/my-model.v2/sub dir/x.gguf")
	if err != nil || !strings.HasPrefix(p, filepath.Join(cache, "models")+string(filepath.Separator)) {
		t.Fatalf("valid hub ref: %q, %v", p, err)
	}
}

// A symbolic link inside the cache that points elsewhere is not followed to
// create directories or files outside.
func TestResolveSymlinkOutsideCache(t *testing.T) {
	base := t.TempDir()
	cache, outside := filepath.Join(base, "cache"), filepath.Join(base, "outside")
	os.MkdirAll(filepath.Join(cache, "models"), 0o755)
	os.MkdirAll(outside, 0o755)
	if err := os.Symlink(outside, filepath.Join(cache, "models", "evil")); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
	r := &Resolver{CacheDir: cache, Download: func(ctx context.Context, f HubFile, dst string) error {
		t.Errorf("download into %s", dst)
		return nil
	}}
	_, err := r.Resolve(context.Background(), "evil/repo/x.gguf")
	if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), "outside the cache") {
		t.Fatalf("err = %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("created %v outside the cache", ents)
	}
}

func TestParseHubRef(t *testing.T) {
	f, err := ParseHubRef("ggml-org/models/tinyllamas/stories260K.gguf")
	if err != nil || f.Repo != "ggml-org/models" || f.File != "tinyllamas/stories260K.gguf" {
		t.Fatalf("ParseHubRef = %+v, %v", f, err)
	}
}

func FuzzParseHubRef(f *testing.F) {
	for _, s := range []string{"a/b/c.gguf", "a/b/../../x.gguf", "a/b/c/./d.gguf", `a/b/c\d.gguf`, "a/b/", "a//b/c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hf, err := ParseHubRef(s)
		if err != nil {
			return
		}
		root := filepath.FromSlash("/cache/models")
		p := filepath.Join(root, hf.Repo, filepath.FromSlash(hf.File))
		if err := inside(root, p); err != nil || filepath.Join(root, s) != p {
			t.Fatalf("ParseHubRef(%q) accepted a name leading to %s", s, p)
		}
	})
}

// The pinned digest is that of the fixture, which is the hub's file.
func TestPinnedDigest(t *testing.T) {
	p := filepath.Join("..", "..", "shared", "fixtures", "models", "stories260K.gguf")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Skipf("%s absent: %v", p, err)
	}
	k := Known["stories260K"]
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != k.SHA256 || int64(len(b)) != k.Size {
		t.Fatalf("%s: sha256 %x, %d bytes; pinned %s, %d", p, sum, len(b), k.SHA256, k.Size)
	}
}

// A failed download leaves no empty directories in the cache.
func TestResolveFailedDownloadLeavesNoDirs(t *testing.T) {
	cache := t.TempDir()
	r := &Resolver{CacheDir: cache, Download: func(ctx context.Context, f HubFile, dst string) error {
		return errors.New("HTTP 404")
	}}
	if _, err := r.Resolve(context.Background(), "org/repo/sub/x.gguf"); err == nil {
		t.Fatal("no error")
	}
	if _, err := os.Stat(filepath.Join(cache, "models", "org")); !os.IsNotExist(err) {
		t.Errorf("models/org after a failed download: %v", err)
	}
}

// TestFailedLookupLeavesNoFolder: a name that is neither local nor
// downloadable leaves no empty folder in the cache, and the error is
// ErrNotFound.
func TestFailedLookupLeavesNoFolder(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cache")
	r := &Resolver{CacheDir: cache}
	r.Download = func(ctx context.Context, f HubFile, dst string) error { return errors.New("offline") }
	_, err := r.Resolve(context.Background(), "stories260K")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "offline") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Errorf("the failed lookup left %s behind", cache)
	}
	// A partial download keeps its folder (it is resumed next time).
	r.Download = func(ctx context.Context, f HubFile, dst string) error {
		os.WriteFile(dst+".part", []byte("x"), 0o644)
		return errors.New("cut off")
	}
	r.Resolve(context.Background(), "stories260K")
	if _, err := os.Stat(filepath.Join(cache, "models", "stories260K.gguf.part")); err != nil {
		t.Errorf("the partial download was removed: %v", err)
	}
}
