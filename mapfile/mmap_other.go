//go:build !linux && !darwin

package mapfile

import "os"

// No mapping here: the file is read on demand.
func mmap(fd *os.File, size int64) ([]byte, func() error, error) { return nil, nil, nil }
