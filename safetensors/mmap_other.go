//go:build !unix

package safetensors

import (
	"errors"
	"os"
)

// mmapFile is unavailable here; Open reads through ReadAt instead.
func mmapFile(f *os.File, size int64) ([]byte, func() error, error) {
	return nil, nil, errors.New("mmap unsupported")
}
