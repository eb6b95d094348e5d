package writer

import (
	"path/filepath"
	"slices"

	"github.com/cortiq/cortiq/mapfile"
	"github.com/cortiq/cortiq/model"
)

// digestProvenance returns p with the SHA-256 of every file that has none,
// read from p.Dir. Files already digested (a CMF's own provenance) and
// sources without a directory are left as they are.
func digestProvenance(p model.Provenance) (model.Provenance, error) {
	if p.Dir == "" {
		return p, nil
	}
	p.Files = slices.Clone(p.Files)
	for i, f := range p.Files {
		if f.SHA256 != "" {
			continue
		}
		sum, n, err := mapfile.SHA256(filepath.Join(p.Dir, f.Name))
		if err != nil {
			return p, err
		}
		p.Files[i].SHA256, p.Files[i].Size = sum, n
	}
	return p, nil
}
