package importer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"

	"github.com/cortiq/cortiq/mapfile"
)

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
