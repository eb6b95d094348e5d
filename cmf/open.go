package cmf

import (
	"io"
	"os"
)

func openReaderAt(fd *os.File, size int64, path string) (*File, error) {
	f, err := Read(fd, size, path)
	if err != nil {
		fd.Close()
		return nil, err
	}
	f.closer = fd.Close
	return f, nil
}

// readerAtBytes serves ReadAt from a byte slice (a mapping).
type readerAtBytes []byte

func (b readerAtBytes) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
