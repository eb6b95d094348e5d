package engine

import (
	"context"
	"fmt"

	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/resolve"
)

// Load resolves nameOrPath (a path, or a model name: see package resolve),
// imports it (HF directory, GGUF or CMF) and builds an engine. A nil
// resolver takes paths only and caches no conversion.
func Load(ctx context.Context, r *resolve.Resolver, nameOrPath string, opts Options) (*Engine, error) {
	if r == nil {
		r = &resolve.Resolver{}
	}
	path, err := r.Resolve(ctx, nameOrPath)
	if err != nil {
		return nil, err
	}
	if opts.Progress != nil {
		opts.Progress("reading " + path)
	}
	m, err := importer.OpenCached(path, r.CacheDir)
	if err != nil {
		return nil, err
	}
	e, err := NewFromModel(m, opts)
	if err != nil {
		if m.Close != nil {
			m.Close()
		}
		return nil, fmt.Errorf("engine: %s: %w", path, err)
	}
	return e, nil
}
