package resolve

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveOrder(t *testing.T) {
	cache, extra := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(extra, "stories260K.gguf"), []byte("x"), 0o644)
	r := &Resolver{CacheDir: cache, Path: []string{extra}}
	p, err := r.Resolve(context.Background(), "stories260K")
	if err != nil || p != filepath.Join(extra, "stories260K.gguf") {
		t.Fatalf("got %q, %v", p, err)
	}
	os.MkdirAll(filepath.Join(cache, "models"), 0o755)
	os.WriteFile(filepath.Join(cache, "models", "stories260K.gguf"), []byte("x"), 0o644)
	if p, _ := r.Resolve(context.Background(), "stories260K"); p != filepath.Join(cache, "models", "stories260K.gguf") {
		t.Fatalf("cache should win, got %q", p)
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
