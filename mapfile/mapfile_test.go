package mapfile

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestOpenReadAt(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	want := []byte("hello, mapped world")
	os.WriteFile(p, want, 0o644)
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if f.Size() != int64(len(want)) {
		t.Fatalf("size %d", f.Size())
	}
	buf := make([]byte, 6)
	if n, err := f.ReadAt(buf, 7); n != 6 || err != nil || string(buf) != "mapped" {
		t.Fatalf("ReadAt = %d %v %q", n, err, buf)
	}
	if n, err := f.ReadAt(buf, int64(len(want))-2); n != 2 || err != io.EOF {
		t.Fatalf("short ReadAt = %d %v", n, err)
	}
	if b := f.Bytes(); b != nil && string(b) != string(want) {
		t.Fatalf("Bytes = %q", b)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(buf, 0); err == nil {
		t.Fatal("ReadAt after Close succeeded")
	}
}

func TestEmptyFileIsNotMapped(t *testing.T) {
	p := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(p, nil, 0o644)
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Bytes() != nil || f.Size() != 0 {
		t.Fatal("empty file mapped")
	}
}
