//go:build linux || darwin

package cmf

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Open opens and memory-maps a CMF file; tensor data aliases the mapping
// until Close.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cmf: %w", err)
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("cmf: %w", err)
	}
	size := st.Size()
	if size == 0 || int64(int(size)) != size {
		return openReaderAt(fd, size, path)
	}
	data, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return openReaderAt(fd, size, path)
	}
	// The mapping stays valid after the descriptor is closed.
	fd.Close()
	f, err := parse(readerAtBytes(data), size, path)
	if err != nil {
		unix.Munmap(data)
		return nil, err
	}
	f.mapped = data
	f.closer = func() error { return unix.Munmap(data) }
	return f, nil
}
