package importer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

// OpenCached is Open with the conversion of Hugging Face directories cached
// as CMF under cacheDir/converted: the first open imports and writes the
// CMF (checksummed, aligned, provenance with sha256), later opens map it.
// The cache key covers the directory's absolute path and the names, sizes
// and modification times of its files, so an edited checkpoint is
// re-imported. GGUF and CMF files are used as they are (no conversion).
// An empty cacheDir disables the cache.
//
// A cancelled ctx stops the import, the conversion between two tensors and
// the check of a cache entry: OpenCached returns ctx's error with every
// file it opened closed and no partial cache entry left behind (the CMF is
// written to a temporary file renamed into place only when complete).
func OpenCached(ctx context.Context, path, cacheDir string) (*model.Model, error) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() || cacheDir == "" {
		return Open(ctx, path)
	}
	key, err := hfCacheKey(path)
	if err != nil {
		return Open(ctx, path)
	}
	cached := filepath.Join(cacheDir, "converted", key+".cmf")
	if _, err := os.Stat(cached); err == nil {
		// A damaged cache entry is rebuilt, never trusted: its tensors are
		// all checked now (as their first use would) so that the damage is
		// found while the source is at hand.
		if m, err := FromCMF(cached); err == nil {
			err := m.Weights.(interface {
				verifyAll(context.Context) error
			}).verifyAll(ctx)
			if err == nil {
				return m, nil
			}
			m.Close()
			if ctx.Err() != nil {
				return nil, ctx.Err() // not damaged: only not checked
			}
		}
		os.Remove(cached)
	}
	m, err := Open(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		return m, nil
	}
	conv := *m
	conv.Weights = ctxWeights{ctx, m.Weights}
	if err := writer.SaveCMF(&conv, cached, writer.SaveOptions{Keep: true}); err != nil {
		if ctx.Err() != nil {
			if m.Close != nil {
				m.Close()
			}
			return nil, ctx.Err()
		}
		// The model itself is fine; only the cache failed.
		fmt.Fprintf(os.Stderr, "importer: could not cache %s as CMF: %v\n", path, err)
		return m, nil
	}
	if m.Close != nil {
		m.Close()
	}
	return FromCMF(cached)
}

// ctxWeights are weights whose lookups fail, with ctx's error, once ctx is
// done: a conversion walking them stops at the next tensor.
type ctxWeights struct {
	ctx context.Context
	model.Weights
}

func (w ctxWeights) Tensor(name string) (*tensor.Tensor, bool) {
	if w.ctx.Err() != nil {
		return nil, false
	}
	return w.Weights.Tensor(name)
}

// Err is ctx's error once ctx is done, else the weights' own.
func (w ctxWeights) Err() error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	return model.WeightsErr(w.Weights)
}

func hfCacheKey(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "cortiq-hf-cache-v1\x00%s\x00", abs)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		info, err := os.Stat(filepath.Join(abs, n))
		if err != nil || info.IsDir() {
			continue
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", n, info.Size(), info.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}
