package importer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Paths that are not models get errors that name the path as given and
// never echo the file's bytes; nothing blocks (a FIFO is not opened).
func TestOpenNotAModel(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "shadow")
	os.WriteFile(secret, []byte("root:$6$secret:19000:0:99999:7:::\n"), 0o600)
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("ro"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	bare := filepath.Join(dir, "bare")
	os.Mkdir(bare, 0o755)
	for _, p := range []string{secret, short, empty, bare} {
		_, err := Open(context.Background(), p)
		if !errors.Is(err, ErrNotModel) {
			t.Errorf("Open(%s) = %v, want ErrNotModel", p, err)
			continue
		}
		want := "importer: " + p + ": not a model file (expected GGUF, CMF, safetensors or an HF directory)"
		if err.Error() != want {
			t.Errorf("Open(%s) = %q, want %q", p, err, want)
		}
	}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "missing", "model.gguf"), "no such file or directory"},
		{filepath.Join(secret, "model.gguf"), "no such file or directory"}, // not "not a directory"
	} {
		_, err := Open(context.Background(), c.path)
		if err == nil || err.Error() != "importer: "+c.path+": "+c.want {
			t.Errorf("Open(%s) = %v, want %q", c.path, err, c.want)
		}
	}
}

func TestOpenPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: permissions are not enforced")
	}
	p := filepath.Join(t.TempDir(), "locked.gguf")
	os.WriteFile(p, []byte("GGUF"), 0o000)
	_, err := Open(context.Background(), p)
	if err == nil || err.Error() != "importer: "+p+": permission denied" {
		t.Fatalf("Open(unreadable) = %v", err)
	}
}

// A Hugging Face directory's config.json or .safetensors file stands for
// the directory.
func TestOpenHFFile(t *testing.T) {
	root := filepath.Join(hfSharedDir(t), "fixtures", "tiny", "llama")
	for _, f := range []string{"config.json", "model.safetensors"} {
		m, err := Open(context.Background(), filepath.Join(root, f))
		if err != nil {
			t.Fatalf("Open(%s): %v", f, err)
		}
		if m.Arch.Family != "llama" {
			t.Errorf("Open(%s): family %q", f, m.Arch.Family)
		}
		m.Close()
	}
	// A lone .safetensors file (no config.json beside it) cannot be read.
	lone := filepath.Join(t.TempDir(), "model.safetensors")
	raw, _ := os.ReadFile(filepath.Join(root, "model.safetensors"))
	os.WriteFile(lone, raw, 0o644)
	if _, err := Open(context.Background(), lone); err == nil || !strings.Contains(err.Error(), lone+": no config.json beside this safetensors file") {
		t.Errorf("Open(lone safetensors) = %v", err)
	}
}
