package cmf

import "fmt"

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
	if err := f.blob.ReadRange(dst, start); err != nil {
		return f.readError(name, start, int64(len(dst)), err)
	}
	return nil
}
