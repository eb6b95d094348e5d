package webgpu

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/model"
)

// The backend registers itself as "webgpu" (natively wgpu-native, in the
// browser navigator.gpu): a program links it by importing this package.
func init() {
	backend.Register("webgpu", open)
	backend.RegisterIdentifier("webgpu", identify)
}

// identify is the registered backend.Identifier: the name open's backend
// would have, from the adapter's info (gpu.Adapter: no device created,
// nothing uploaded). It declines a software adapter and fails without one
// as open does; in the browser, where the adapter comes with its device,
// it cannot tell (backend.ErrUnidentified).
func identify(ctx context.Context, m *model.Model, o backend.Options) (string, error) {
	if _, ok := o.Tuning.(Tuning); !ok && o.Tuning != nil {
		return "", fmt.Errorf("webgpu: Options.Tuning is a %T, want a webgpu.Tuning", o.Tuning)
	}
	info, err := gpu.Adapter()
	if errors.Is(err, gpu.ErrNoInfo) {
		return "", fmt.Errorf("%w (%v)", backend.ErrUnidentified, err)
	}
	if err != nil {
		return "", err
	}
	if !o.AllowSoftware && strings.EqualFold(info.Type, "cpu") {
		return "", softwareError(info.Name)
	}
	return deviceName(info), nil
}

// deviceName is the backend's Name on an adapter (identify's too).
func deviceName(info gpu.AdapterInfo) string { return "webgpu:" + info.Name }

// OnOpen, when set (tests), sees each device open opens, before the
// weights are uploaded: fault injection.
var OnOpen func(*gpu.Device)

// open is the registered backend.Opener: it opens the platform's adapter,
// declines a software one unless the options allow it (the scheduler's
// policy: New itself takes any adapter), and uploads the model. The
// backend owns the device it opened.
func open(ctx context.Context, m *model.Model, o backend.Options) (backend.Backend, error) {
	tune, ok := o.Tuning.(Tuning)
	if !ok && o.Tuning != nil {
		return nil, fmt.Errorf("webgpu: Options.Tuning is a %T, want a webgpu.Tuning", o.Tuning)
	}
	dev, err := gpu.Open(tune.GPU)
	if err != nil {
		return nil, err
	}
	if OnOpen != nil {
		OnOpen(dev)
	}
	if info := dev.Info(); !o.AllowSoftware && strings.EqualFold(info.Type, "cpu") {
		dev.Close()
		return nil, softwareError(info.Name)
	}
	if err := ctx.Err(); err != nil {
		dev.Close()
		return nil, err
	}
	b, err := NewContext(ctx, m, Options{
		Device:         dev,
		VRAMBudget:     o.MemBudget,
		ReserveContext: o.ReserveContext,
		KVF16:          o.KVF16,
		Layers:         o.Layers,
		RewindDepth:    o.RewindDepth,
		Tuning:         tune,
	})
	if err != nil {
		dev.Close()
		return nil, err
	}
	b.ownsDev = true
	return b, nil
}

// softwareError declines a software adapter (lavapipe, SwiftShader, WARP):
// it runs the kernels correctly but slower than the CPU backend. It is
// backend.ErrSoftware and ErrNoAdapter.
type softwareError string

func (e softwareError) Error() string {
	return fmt.Sprintf("adapter %q is a software rasterizer, slower than the CPU engine", string(e))
}

func (e softwareError) Is(target error) bool {
	return target == backend.ErrSoftware || target == gpu.ErrNoAdapter
}
