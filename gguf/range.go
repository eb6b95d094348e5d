package gguf

import "fmt"

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
	if err := f.blob.ReadRange(dst, start); err != nil {
		return f.readError(name, start, int64(len(dst)), err)
	}
	return nil
}
