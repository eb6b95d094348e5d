//go:build unix

package safetensors

import (
	"os"

	"golang.org/x/sys/unix"
)

// mmapFile maps the whole file read-only. A nil mapping with a nil error
// means "not mapped" (empty file): the caller falls back to ReadAt.
func mmapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, nil, nil
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return unix.Munmap(b) }, nil
}
