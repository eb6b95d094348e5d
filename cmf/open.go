package cmf

import (
	"fmt"

	"github.com/cortiq/cortiq/mapfile"
)

// Open opens a CMF file. Where the platform maps files (Linux, macOS)
// tensor data aliases the mapping until Close; elsewhere it is read from
// the file on demand.
func Open(path string) (*File, error) {
	m, err := mapfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cmf: %w", err)
	}
	f, err := Read(m, m.Size(), path)
	if err != nil {
		m.Close()
		return nil, err
	}
	f.mapped = m.Bytes()
	f.closer = m.Close
	return f, nil
}
