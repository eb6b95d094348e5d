package cmf

import (
	"fmt"

	"github.com/cortiq/cortiq/mapfile"
)

// Open opens a CMF file. Where the platform maps files (Linux, macOS)
// tensor data aliases the mapping until Close; elsewhere it is read from
// the file on demand.
func Open(path string) (*File, error) {
	b, err := mapfile.OpenBlob(path)
	if err != nil {
		return nil, fmt.Errorf("cmf: %w", err)
	}
	f, err := parse(b, b.Size(), path)
	if err != nil {
		b.Close()
		return nil, err
	}
	f.blob = b
	return f, nil
}
