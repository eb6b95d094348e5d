//go:build linux || darwin

package mapfile

import (
	"os"

	"golang.org/x/sys/unix"
)

func mmap(fd *os.File, size int64) ([]byte, func() error, error) {
	data, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
