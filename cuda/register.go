package cuda

import (
	"context"
	"fmt"
	"strings"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/model"
)

// Registration with the backend registry (issue 18, item 1). When
// backend.Register and backend.Options land on main, this file's init
// becomes
//
//	func init() { backend.Register("cuda", open) }
//
//	func open(ctx context.Context, m *model.Model, o backend.Options) (backend.Backend, error) {
//		t, _ := o.Tuning.(Tuning)
//		return OpenWith(ctx, m, o.Layers, o.MemBudget, o.ReserveContext, o.KVF16, t)
//	}
//
// and engine/device_cuda.go goes (the scheduler opens "cuda" by name).

// Tuning is what a front end may set beyond the common options.
type Tuning struct {
	// Devices are the CUDA device ordinals (nil = device 0); several
	// split the layers (Split).
	Devices []int
	// Exact keeps f32 activations in the quantized matvecs and f32 K/V in
	// prefill attention (see Options.Exact).
	Exact bool
}

// OpenWith opens the backend from the registry's common options: layers
// are per-device ranges ("0:0-13,1:14-27", or "" for all on Tuning's
// devices, split by free memory); budget bounds each device's bytes;
// reserve is the context a split plans for; kvF16 halves the KV cache.
func OpenWith(ctx context.Context, m *model.Model, layers string, budget int64, reserve int, kvF16 bool, t Tuning) (backend.Backend, error) {
	if layers != "" && !strings.Contains(layers, ":") {
		return nil, fmt.Errorf("cuda: layer ranges %q: the cuda backend takes device:first-last ranges (0:0-13,1:14-27); a CPU/GPU split is not supported", layers)
	}
	if reserve <= 0 {
		reserve = min(max(m.Arch.Context, 1), 4096)
	}
	return OpenDevices(ctx, m, Options{VRAMBudget: budget, KVF16: kvF16, Exact: t.Exact}, t.Devices, layers, reserve)
}
