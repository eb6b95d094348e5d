//go:build !linux && !darwin

package cmf

import (
	"fmt"
	"os"
)

// Open opens a CMF file; tensor data is read from it on demand until Close.
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
	return openReaderAt(fd, st.Size(), path)
}
