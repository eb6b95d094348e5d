//go:build !js

package engine

import (
	"fmt"
	"os"
	"strings"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/webgpu"
)

func init() { newDeviceBackend = openWebGPU }

// openWebGPU opens the first adapter and uploads the model. With
// --backend auto it declines software adapters (lavapipe, SwiftShader):
// they run the kernels correctly but slower than the CPU engine.
func openWebGPU(m *model.Model, opts Options, host backend.Backend) (backend.Backend, error) {
	dev, err := gpu.Open(opts.GPU)
	if err != nil {
		return nil, err
	}
	if onDeviceOpen != nil {
		onDeviceOpen(dev)
	}
	info := dev.Info()
	forced := opts.Backend == "webgpu" || os.Getenv("CORTIQ_GPU") == "1"
	if !forced && !autoKeepsSoftware && strings.EqualFold(info.Type, "cpu") {
		dev.Close()
		return nil, fmt.Errorf("adapter %q is a software rasterizer, slower than the CPU engine (--backend webgpu forces it)", info.Name)
	}
	b, err := webgpu.New(m, webgpu.Options{
		Device:     dev,
		VRAMBudget: opts.VRAMBudget,
		// An explicit context is set aside in the budget (refused, with
		// what it needs, when it cannot fit).
		ReserveContext: opts.MaxContext,
		KVF16:          opts.KV == "f16",
		Layers:         opts.GPULayers,
		// Speculative decoding rewinds up to its draft length.
		RewindDepth: opts.RewindDepth,
		// The caller already declined software adapters unless forced.
		AllowSoftware: true,
		Host: func(maxLen int) (webgpu.HostLayers, error) {
			s, err := host.NewSession(maxLen)
			if err != nil {
				return nil, err
			}
			hl, ok := s.(webgpu.HostLayers)
			if !ok {
				s.Close()
				return nil, fmt.Errorf("engine: the %s backend cannot run a layer range", host.Name())
			}
			return hl, nil
		},
	})
	if err != nil {
		dev.Close()
		return nil, err
	}
	return &deviceBackend{Backend: b, dev: dev}, nil
}

// autoKeepsSoftware lets tests run --backend auto's speed probe on a
// software adapter.
var autoKeepsSoftware bool

// onDeviceOpen lets tests inject faults into a freshly opened device.
var onDeviceOpen func(*webgpu.Device)

// deviceBackend closes the device it opened after the backend.
type deviceBackend struct {
	*webgpu.Backend
	dev *webgpu.Device
}

func (d *deviceBackend) Close() error {
	err := d.Backend.Close()
	d.dev.Close()
	return err
}
