package cmf

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cortiq/cortiq/tensor"
)

// Writer streams a CMF file: NewWriter writes the header and metadata, each
// WriteTensor appends one tensor, Close appends the directory and footer.
type Writer struct {
	w      *bufio.Writer
	closer io.Closer
	name   string
	off    int64 // bytes written so far
	dir    directory
	names  map[string]bool
	err    error
	closed bool
}

// NewWriter writes the header and meta to w and returns a Writer for the
// tensors. Close does not close w.
func NewWriter(w io.Writer, meta *Metadata) (*Writer, error) {
	return newWriter(w, meta, "writer")
}

// Create creates (truncating) the file at path and writes the header and
// meta; Close finishes and closes the file.
func Create(path string, meta *Metadata) (*Writer, error) {
	fd, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cmf: %w", err)
	}
	w, err := newWriter(fd, meta, path)
	if err != nil {
		fd.Close()
		os.Remove(path)
		return nil, err
	}
	w.closer = fd
	return w, nil
}

func newWriter(w io.Writer, meta *Metadata, name string) (*Writer, error) {
	mb, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("cmf: %s: encoding metadata: %w", name, err)
	}
	cw := &Writer{w: bufio.NewWriterSize(w, 1<<20), name: name, names: map[string]bool{}, dir: directory{Tensors: []entryJSON{}}}
	payOff := alignUp(headerSize+int64(len(mb)), Alignment)
	le := binary.LittleEndian
	var h [headerSize]byte
	copy(h[:], Magic)
	le.PutUint32(h[4:], Version)
	le.PutUint32(h[12:], Alignment)
	le.PutUint64(h[16:], headerSize)
	le.PutUint64(h[24:], uint64(len(mb)))
	le.PutUint32(h[32:], Checksum(mb))
	le.PutUint64(h[40:], uint64(payOff))
	le.PutUint32(h[60:], Checksum(h[:60]))
	cw.write(h[:])
	cw.write(mb)
	cw.pad()
	if cw.err != nil {
		return nil, cw.err
	}
	return cw, nil
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

var zeros [Alignment]byte

func (w *Writer) write(p []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.w.Write(p); err != nil {
		w.err = fmt.Errorf("cmf: %s: %w", w.name, err)
		return
	}
	w.off += int64(len(p))
}

// pad writes zeros up to the next multiple of Alignment.
func (w *Writer) pad() { w.write(zeros[:alignUp(w.off, Alignment)-w.off]) }

// WriteTensor appends t. Its data must be exactly the size its codec and
// shape imply, and its name new.
func (w *Writer) WriteTensor(t *tensor.Tensor) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return fmt.Errorf("cmf: %s: tensor %q written after Close", w.name, t.Name)
	}
	if w.names[t.Name] {
		return fmt.Errorf("cmf: %s: duplicate tensor %q", w.name, t.Name)
	}
	n, err := byteLen(t.Codec, t.Shape)
	if err != nil {
		return fmt.Errorf("cmf: %s: tensor %q: %w", w.name, t.Name, err)
	}
	if n != int64(len(t.Data)) {
		return fmt.Errorf("cmf: %s: tensor %q: %d bytes of data, %s %v needs %d", w.name, t.Name, len(t.Data), t.Codec, t.Shape, n)
	}
	if err := t.CheckSide(); err != nil {
		return fmt.Errorf("cmf: %s: %w", w.name, err)
	}
	w.names[t.Name] = true
	w.dir.Tensors = append(w.dir.Tensors, entryJSON{
		Name: t.Name, Codec: t.Codec.String(), Shape: t.Shape,
		Offset: w.off, Length: n + int64(len(t.Side)), CRC32C: UpdateChecksum(Checksum(t.Data), t.Side),
	})
	w.write(t.Data)
	w.write(t.Side)
	w.pad()
	return w.err
}

// Close writes the directory and footer, flushes, and closes the file Create
// opened. A Writer whose writes failed still closes the file and reports the
// first error.
func (w *Writer) Close() error {
	if w.closed {
		return errors.New("cmf: writer already closed")
	}
	w.closed = true
	if w.err == nil {
		db, err := json.Marshal(&w.dir)
		if err != nil {
			w.err = fmt.Errorf("cmf: %s: encoding directory: %w", w.name, err)
		} else {
			dirOff := w.off
			w.write(db)
			var ft [footerSize]byte
			le := binary.LittleEndian
			le.PutUint64(ft[0:], uint64(dirOff))
			le.PutUint64(ft[8:], uint64(len(db)))
			le.PutUint32(ft[16:], Checksum(db))
			le.PutUint32(ft[24:], Checksum(ft[:24]))
			copy(ft[28:], Magic)
			w.write(ft[:])
		}
	}
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = fmt.Errorf("cmf: %s: %w", w.name, err)
		}
	}
	if w.closer != nil {
		if err := w.closer.Close(); err != nil && w.err == nil {
			w.err = fmt.Errorf("cmf: %w", err)
		}
	}
	return w.err
}
