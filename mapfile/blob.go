package mapfile

import (
	"errors"
	"fmt"
	"io"
)

// ErrClosed is what a Blob's reads return after Close.
var ErrClosed = errors.New("file is closed")

// Blob is the byte source under a weight container (GGUF, CMF,
// safetensors): either bytes it holds whole, a memory mapping or a file
// read into memory, whose ranges alias them, or an io.ReaderAt read range
// by range on demand (a file where nothing is mapped, the browser's OPFS or
// HTTP range requests). The containers parse their headers through ReadAt
// and hand out tensor data through Range, so that "mapped or ranged" is
// decided here once. A nil *Blob reads as a closed one.
type Blob struct {
	r      io.ReaderAt
	size   int64
	whole  []byte // every byte, when held (mapped or in memory), else nil
	closer func() error
	closed bool
}

// OpenBlob opens path as a Blob, memory-mapped where the platform allows
// (see Open).
func OpenBlob(path string) (*Blob, error) {
	m, err := Open(path)
	if err != nil {
		return nil, err
	}
	return &Blob{r: m, size: m.Size(), whole: m.Bytes(), closer: m.Close}, nil
}

// NewBlob returns a Blob reading r, whose length is size. If r holds its
// bytes (it has a Bytes() []byte method returning all size of them, as a
// mapped *File does), ranges alias them; otherwise they are read. Close does
// not close r.
func NewBlob(r io.ReaderAt, size int64) *Blob {
	b := &Blob{r: r, size: size}
	if h, ok := r.(interface{ Bytes() []byte }); ok && int64(len(h.Bytes())) == size {
		b.whole = h.Bytes()
	}
	return b
}

// BytesBlob returns a Blob holding data; ranges alias it.
func BytesBlob(data []byte) *Blob {
	return &Blob{r: bytesReaderAt(data), size: int64(len(data)), whole: data}
}

// Size is the blob's length in bytes.
func (b *Blob) Size() int64 { return b.size }

// Mapped reports whether the blob holds its bytes, so that Range aliases
// them instead of reading.
func (b *Blob) Mapped() bool { return b != nil && b.whole != nil }

// ReadAt reads from the held bytes or the reader.
func (b *Blob) ReadAt(p []byte, off int64) (int, error) {
	if b == nil || b.closed {
		return 0, ErrClosed
	}
	if b.whole != nil {
		return bytesReaderAt(b.whole).ReadAt(p, off)
	}
	return b.r.ReadAt(p, off)
}

// Range returns bytes [off, off+n): a slice of the held bytes (capacity
// capped, valid until Close) or a new buffer read from the reader. The range
// must lie inside the blob; a short read is an error.
func (b *Blob) Range(off, n int64) ([]byte, error) {
	if err := b.check(off, n); err != nil {
		return nil, err
	}
	if b.whole != nil {
		return b.whole[off : off+n : off+n], nil
	}
	buf := make([]byte, n)
	if err := b.ReadRange(buf, off); err != nil {
		return nil, err
	}
	return buf, nil
}

// ReadRange fills dst with the bytes at off, copying from the held bytes or
// reading.
func (b *Blob) ReadRange(dst []byte, off int64) error {
	n := int64(len(dst))
	if err := b.check(off, n); err != nil {
		return err
	}
	if b.whole != nil {
		copy(dst, b.whole[off:off+n])
		return nil
	}
	if _, err := b.r.ReadAt(dst, off); err != nil && !(err == io.EOF && n == 0) {
		return err
	}
	return nil
}

func (b *Blob) check(off, n int64) error {
	if b == nil || b.closed {
		return ErrClosed
	}
	if off < 0 || n < 0 || off > b.size || n > b.size-off {
		return fmt.Errorf("range [%d, %d) outside the %d bytes", off, off+n, b.size)
	}
	return nil
}

// Close releases the mapping or file OpenBlob opened; ranges that alias it
// are invalid afterwards, and later reads return ErrClosed.
func (b *Blob) Close() error {
	if b == nil || b.closed {
		return nil
	}
	b.closed = true
	b.whole = nil
	if c := b.closer; c != nil {
		b.closer = nil
		return c()
	}
	return nil
}

// bytesReaderAt reads a byte slice.
type bytesReaderAt []byte

func (p bytesReaderAt) ReadAt(dst []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(p)) {
		return 0, io.EOF
	}
	n := copy(dst, p[off:])
	if n < len(dst) {
		return n, io.EOF
	}
	return n, nil
}
