package importer

import (
	"errors"
	"os"
	"path/filepath"
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
		_, err := Open(p)
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
		_, err := Open(c.path)
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
	_, err := Open(p)
	if err == nil || err.Error() != "importer: "+p+": permission denied" {
		t.Fatalf("Open(unreadable) = %v", err)
	}
}
