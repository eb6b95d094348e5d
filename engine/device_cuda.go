//go:build !js

package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cuda"
	"github.com/cortiq/cortiq/model"
)

func init() { newCUDABackend = openCUDA }

// openCUDA opens the native CUDA backend (--backend cuda, CORTIQ_GPU=cuda):
// chosen only explicitly, never swapped for another device behind the
// user's back; a refusal or a missing driver runs the CPU, with the reason
// in Result.DeviceError.
func openCUDA(m *model.Model, opts Options, _ backend.Backend) (backend.Backend, error) {
	if opts.GPULayers != "" && !strings.Contains(opts.GPULayers, ":") {
		return nil, fmt.Errorf("cuda: layer ranges %q: --backend cuda takes device:first-last ranges (0:0-13,1:14-27)", opts.GPULayers)
	}
	ctx := opts.MaxContext
	if ctx == 0 {
		ctx = min(m.Arch.Context, 4096)
	}
	return cuda.OpenDevices(context.Background(), m, cuda.Options{VRAMBudget: opts.VRAMBudget, KVF16: opts.KV == "f16"},
		opts.Devices, opts.GPULayers, ctx)
}
