//go:build !unix

package storage

import (
	"errors"
	"fmt"
)

// FreeSpace reports the bytes available on the file system holding dir; on
// this platform it is not implemented.
func FreeSpace(dir string) (int64, error) {
	return 0, fmt.Errorf("storage: free space of %s: %w", dir, errors.ErrUnsupported)
}
