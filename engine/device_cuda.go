//go:build !js

package engine

import (
	"context"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cuda"
	"github.com/cortiq/cortiq/model"
)

func init() { newCUDABackend = openCUDA }

// openCUDA opens the native CUDA backend (--backend cuda, CORTIQ_GPU=cuda):
// chosen only explicitly, never swapped for another device behind the
// user's back; a refusal or a missing driver runs the CPU, with the reason
// in Result.DeviceError. (With the backend registry this is
// backend.Open(ctx, "cuda", ...): cuda/register.go.)
func openCUDA(m *model.Model, opts Options, _ backend.Backend) (backend.Backend, error) {
	return cuda.OpenWith(context.Background(), m, opts.GPULayers, opts.VRAMBudget, opts.MaxContext, opts.KV == "f16",
		cuda.Tuning{Devices: opts.Devices})
}
