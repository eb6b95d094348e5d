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

func TestRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("mkfifo %s: %v", fifo, err)
	}
	for _, p := range []string{fifo, dir} {
		// Opening the FIFO for reading would block forever without the check.
		if _, err := Open(p); err == nil {
			t.Fatalf("Open(%s) succeeded", p)
		} else if _, ok := err.(*NotRegularError); !ok {
			t.Fatalf("Open(%s): %v, want a NotRegularError", p, err)
		}
		if _, err := ReadFile(p); err == nil {
			t.Fatalf("ReadFile(%s) succeeded", p)
		}
	}
	_, err := Open(fifo)
	if want := fifo + ": a named pipe (FIFO), not a regular file"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}
