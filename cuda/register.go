package cuda

import (
	"context"
	"fmt"
	"strings"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/model"
)

// The backend registers itself as "cuda": a program links it by importing
// this package (package engine does, in backends.go). It needs only the
// NVIDIA driver at run time; without it Open says so and the scheduler
// runs the next backend or the CPU.
func init() {
	backend.Register("cuda", open)
	backend.RegisterIdentifier("cuda", identify)
}

// DeviceInfo describes a device without opening it (identify's driver
// call; tests replace it together with OpenDevice).
var DeviceInfo = driver.DeviceInfo

// identify is the registered backend.Identifier: the name open's backend
// would have, from the driver's device name alone (no context, no
// upload). It refuses what open refuses before the device (the
// architecture) and fails without a driver as open does; several devices
// or layer ranges are named only by opening (the split is planned from
// each device's free memory).
func identify(ctx context.Context, m *model.Model, o backend.Options) (string, error) {
	t, _ := o.Tuning.(Tuning)
	if o.Layers != "" || len(t.Devices) > 1 {
		return "", fmt.Errorf("%w (cuda: layer ranges or several devices)", backend.ErrUnidentified)
	}
	if err := Check(&m.Arch); err != nil {
		return "", err
	}
	ordinal := 0
	if len(t.Devices) == 1 {
		ordinal = t.Devices[0]
	}
	info, err := DeviceInfo(ordinal)
	if err != nil {
		return "", err
	}
	return deviceName(info), nil
}

// Tuning is what a front end may set beyond the common options
// (backend.Options.Tuning).
type Tuning struct {
	// Devices are the CUDA device ordinals (nil = device 0); several
	// split the layers (Split).
	Devices []int
	// Exact keeps f32 activations in the quantized matvecs and f32 K/V in
	// prefill attention (see Options.Exact).
	Exact bool
	// PlainLaunches turns programmatic dependent launches off (see
	// Options.PlainLaunches): for A/B runs.
	PlainLaunches bool
}

// open is the registered backend.Opener. Options.Layers are per-device
// ranges ("0:0-13,1:14-27"); a Tuning of another backend's type is
// ignored (the CLI builds one Tuning for whichever device backend runs).
func open(ctx context.Context, m *model.Model, o backend.Options) (backend.Backend, error) {
	t, _ := o.Tuning.(Tuning)
	return OpenWith(ctx, m, o.Layers, o.MemBudget, o.ReserveContext, o.KVF16, t)
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
	return OpenDevices(ctx, m, Options{VRAMBudget: budget, KVF16: kvF16, Exact: t.Exact, PlainLaunches: t.PlainLaunches}, t.Devices, layers, reserve)
}

// The session is a backend.GreedyStepper: greedy batches as CUDA graphs,
// the next submitted before the host reads the one before.

func (s *Session) SubmitGreedy(first, k int) (backend.Pending, error) {
	g, err := s.SubmitGreedyBatch(first, k)
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (s *Session) CollectGreedy(p backend.Pending) ([]int, error) {
	g, ok := p.(*GreedyBatch)
	if !ok {
		return nil, fmt.Errorf("cuda: collecting a %T", p)
	}
	return s.CollectGreedyBatch(g)
}

func (s *Session) DropGreedy(p backend.Pending) error {
	g, ok := p.(*GreedyBatch)
	if !ok {
		return fmt.Errorf("cuda: dropping a %T", p)
	}
	return s.DropGreedyBatch(g)
}

var _ backend.GreedyStepper = (*Session)(nil)
