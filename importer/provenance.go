package importer

import (
	"context"
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
		sum, n, err := fileSHA256(context.Background(), filepath.Join(p.Dir, f.Name))
		if err != nil {
			return p, err
		}
		p.Files[i].SHA256, p.Files[i].Size = sum, n
	}
	return p, nil
}

// fileSHA256 digests the file at path, stopping with ctx's error when ctx
// is done.
func fileSHA256(ctx context.Context, path string) (string, int64, error) {
	f, err := mapfile.OpenRegular(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, f})
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// ctxReader is r failing with ctx's error once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
