// Package mapfile opens a file for reading as an io.ReaderAt that is
// memory-mapped where the platform allows it (Linux, macOS) and read with
// ReadAt elsewhere (Windows, the browser). Weight containers (GGUF, CMF,
// safetensors) share it so tensor data can alias the mapping natively and
// still be read on demand where there is no mmap.
package mapfile

import (
	"io"
	"os"
)

// File is an open, read-only file.
type File struct {
	fd    *os.File // nil once mapped (the mapping outlives the descriptor)
	data  []byte   // the whole file when mapped, else nil
	size  int64
	unmap func() error
}

// Open opens path, mapping it when possible. An empty file, or one too
// large for this address space, is not mapped. Only regular files are
// opened (see OpenRegular): a FIFO or device is refused, never waited on.
func Open(path string) (*File, error) {
	fd, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, err
	}
	f := &File{fd: fd, size: st.Size()}
	if f.size > 0 && int64(int(f.size)) == f.size {
		if data, unmap, err := mmap(fd, f.size); err == nil && data != nil {
			fd.Close()
			f.fd, f.data, f.unmap = nil, data, unmap
		}
	}
	return f, nil
}

// Size is the file's length in bytes.
func (f *File) Size() int64 { return f.size }

// Bytes is the whole file when it is mapped, else nil. The slice is valid
// until Close.
func (f *File) Bytes() []byte { return f.data }

// ReadAt reads from the mapping or the file.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if f.data == nil {
		if f.fd == nil {
			return 0, os.ErrClosed
		}
		return f.fd.ReadAt(p, off)
	}
	if off < 0 || off > int64(len(f.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Close unmaps or closes the file. Slices from Bytes are invalid after it.
func (f *File) Close() error {
	switch {
	case f.unmap != nil:
		u := f.unmap
		f.unmap, f.data = nil, nil
		return u()
	case f.fd != nil:
		fd := f.fd
		f.fd = nil
		return fd.Close()
	}
	return nil
}
