package engine

import (
	"context"
	"fmt"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/tokenizer"
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
	m, err := importer.OpenCached(ctx, path, r.CacheDir)
	if err != nil {
		return nil, err
	}
	e, err := newFromModel(ctx, m, opts)
	if err != nil {
		if m.Close != nil {
			m.Close()
		}
		return nil, fmt.Errorf("engine: %s: %w", path, err)
	}
	return e, nil
}

// Check applies to m the validation NewFromModel does, without building an
// engine: the tokenizer material it carries must load, and the CPU backend
// (which every engine builds) must accept the model, which checks every
// weight's presence, shape and size, and a CMF tensor's checksum. Commands
// that only describe a model (info) call it so they accept exactly what
// run accepts.
func Check(m *model.Model) error {
	if m.Tokenizer != nil {
		if _, err := tokenizer.Load(m.Tokenizer); err != nil {
			return fmt.Errorf("engine: tokenizer: %w", err)
		}
	}
	c, err := backend.Open(context.Background(), "cpu", m, backend.Options{})
	if err != nil {
		return err
	}
	return c.Close()
}
