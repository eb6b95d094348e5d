package cpu

import (
	"context"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/model"
)

// The backend registers itself as "cpu": a program links it by importing
// this package.
func init() {
	backend.Register("cpu", func(ctx context.Context, m *model.Model, o backend.Options) (backend.Backend, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return New(m, Options{RewindDepth: o.RewindDepth, KVF16: o.KVF16})
	})
}

var _ backend.LayerRunner = (*Session)(nil)
