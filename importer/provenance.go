package importer

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
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
		sum, n, err := fileSHA256(filepath.Join(p.Dir, f.Name))
		if err != nil {
			return p, err
		}
		p.Files[i].SHA256, p.Files[i].Size = sum, n
	}
	return p, nil
}

func fileSHA256(path string) (string, int64, error) {
	f, err := mapfile.OpenRegular(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
