package gguf

import (
	"fmt"
	"io"
)

// ReadRange reads len(dst) bytes of the named tensor's encoded data,
// starting off bytes into it. On a mapped file it copies from the mapping.
func (f *File) ReadRange(name string, off int64, dst []byte) error {
	ti, ok := f.Info(name)
	if !ok {
		return fmt.Errorf("gguf: %s: no tensor %q", f.Name, name)
	}
	n := ti.ByteLen()
	if off < 0 || off > n || int64(len(dst)) > n-off {
		return fmt.Errorf("gguf: %s: tensor %q: range [%d, %d) outside its %d bytes", f.Name, name, off, off+int64(len(dst)), n)
	}
	start := f.DataOffset + int64(ti.Offset) + off
	if f.mapped != nil {
		copy(dst, f.mapped[start:start+int64(len(dst))])
		return nil
	}
	if f.r == nil {
		return fmt.Errorf("gguf: %s: file is closed", f.Name)
	}
	if _, err := f.r.ReadAt(dst, start); err != nil && !(err == io.EOF && len(dst) == 0) {
		return fmt.Errorf("gguf: %s: tensor %q: reading [%d, %d): %w", f.Name, name, start, start+int64(len(dst)), err)
	}
	return nil
}
