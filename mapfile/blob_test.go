package mapfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// onlyReaderAt hides every method but ReadAt, as an HTTP or OPFS reader
// would have.
type onlyReaderAt struct{ r *bytes.Reader }

func (o onlyReaderAt) ReadAt(p []byte, off int64) (int, error) { return o.r.ReadAt(p, off) }

// TestBlob: the held, mapped and ranged forms give the same bytes, refuse
// ranges outside the blob, and read as closed after Close.
func TestBlob(t *testing.T) {
	data := []byte("0123456789abcdef")
	path := filepath.Join(t.TempDir(), "b")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	opened, err := OpenBlob(path)
	if err != nil {
		t.Fatal(err)
	}
	blobs := map[string]*Blob{
		"bytes":  BytesBlob(data),
		"ranged": NewBlob(onlyReaderAt{bytes.NewReader(data)}, int64(len(data))),
		"opened": opened,
	}
	if !blobs["bytes"].Mapped() || blobs["ranged"].Mapped() {
		t.Error("Mapped: bytes must be held, a bare ReaderAt must not")
	}
	for name, b := range blobs {
		got, err := b.Range(3, 5)
		if err != nil || string(got) != "34567" {
			t.Errorf("%s: Range(3, 5) = %q, %v", name, got, err)
		}
		dst := make([]byte, 4)
		if err := b.ReadRange(dst, 12); err != nil || string(dst) != "cdef" {
			t.Errorf("%s: ReadRange at 12 = %q, %v", name, dst, err)
		}
		if _, err := b.Range(12, 5); err == nil {
			t.Errorf("%s: a range past the end was read", name)
		}
		if _, err := b.Range(-1, 1); err == nil {
			t.Errorf("%s: a negative offset was read", name)
		}
		if err := b.Close(); err != nil {
			t.Errorf("%s: Close: %v", name, err)
		}
		if _, err := b.Range(0, 1); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: Range after Close: %v, want ErrClosed", name, err)
		}
		if b.Mapped() {
			t.Errorf("%s: Mapped after Close", name)
		}
	}
	var nilBlob *Blob
	if _, err := nilBlob.Range(0, 0); !errors.Is(err, ErrClosed) || nilBlob.Close() != nil {
		t.Error("a nil Blob must read as closed")
	}
}
