//go:build unix

package storage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hack-pad/hackpadfs"
	"github.com/hack-pad/hackpadfs/fstest"
	"golang.org/x/sys/unix"
)

func TestDirConformance(t *testing.T) {
	// The suite expects modes before umask, like hackpadfs/os's own test.
	old := unix.Umask(0)
	t.Cleanup(func() { unix.Umask(old) })
	// Go 1.26's os.ReadDir on a file fails in "open", not "readdirent"; the
	// error still matches ErrNotDir.
	skips := map[string]bool{
		"TestDirConformance/storage.Dir_FS/fs.ReadDir/file_is_not_a_dir": true,
	}
	options := fstest.FSOptions{
		ShouldSkip: func(f fstest.Facets) bool { return skips[f.Name] },
		Name:       "storage.Dir",
		TestFS: func(tb testing.TB) fstest.SetupFS {
			fsys, err := Dir(tb.TempDir())
			if err != nil {
				tb.Fatal(err)
			}
			return fsys.(fstest.SetupFS)
		},
	}
	fstest.FS(t, options)
	fstest.File(t, options)
}

func TestCacheDir(t *testing.T) {
	dir := t.TempDir()
	got, err := CacheDir(dir)
	if err != nil || got != dir {
		t.Fatalf("CacheDir(%q) = %q, %v; want %q", dir, got, err, dir)
	}
	if base, err := os.UserCacheDir(); err == nil {
		want := filepath.Join(base, "cortiq")
		if got, err := CacheDir(""); err != nil || got != want {
			t.Fatalf("CacheDir(\"\") = %q, %v; want %q", got, err, want)
		}
		if got, err := DefaultDir(); err != nil || got != want {
			t.Fatalf("DefaultDir() = %q, %v; want %q", got, err, want)
		}
	}
	fsys, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := hackpadfs.WriteFullFile(fsys, "x", []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := hackpadfs.ReadFile(fsys, "x")
	if err != nil || string(b) != "y" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
}

func TestFreeSpace(t *testing.T) {
	n, err := FreeSpace(t.TempDir())
	if err != nil {
		t.Skip(err)
	}
	if n <= 0 {
		t.Fatalf("FreeSpace = %d", n)
	}
}
