package cmf

import (
	"fmt"
	"io"
)

// ReadRange reads len(dst) bytes of the named tensor's data, starting off
// bytes into it. On a mapped file it copies from the mapping. The bytes are
// not verified (see VerifyTensor).
func (f *File) ReadRange(name string, off int64, dst []byte) error {
	e, ok := f.Entry(name)
	if !ok {
		return fmt.Errorf("cmf: %s: no tensor %q", f.Name, name)
	}
	if off < 0 || off > e.Length || int64(len(dst)) > e.Length-off {
		return fmt.Errorf("cmf: %s: tensor %q: range [%d, %d) outside its %d bytes", f.Name, name, off, off+int64(len(dst)), e.Length)
	}
	start := e.Offset + off
	if f.mapped != nil {
		copy(dst, f.mapped[start:start+int64(len(dst))])
		return nil
	}
	if f.r == nil {
		return fmt.Errorf("cmf: %s: file is closed", f.Name)
	}
	if _, err := f.r.ReadAt(dst, start); err != nil && !(err == io.EOF && len(dst) == 0) {
		return fmt.Errorf("cmf: %s: tensor %q: reading [%d, %d): %w", f.Name, name, start, start+int64(len(dst)), err)
	}
	return nil
}
