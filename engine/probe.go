package engine

import (
	"context"
	"fmt"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/probe"
)

// probeVersion keys the cached verdicts: a verdict measured by another
// engine version (other kernels, other graph) is measured again.
const probeVersion = "cortiq-decode-2"

// probeSteps bounds the single-token steps one measurement takes (the
// probe's rules decide earlier on a clear 2x gap).
const probeSteps = 14

// keepDeviceByProbe decides, for --backend auto, whether the device decodes
// this model faster than the CPU engine. It alternates single-token steps
// between a device and a CPU session under package probe's rules (the
// first device step and cold steps are discarded, best samples compared,
// an early verdict at a 2x gap) and remembers the verdict per engine
// version, adapter and model shape, so only the first load measures. A
// hardware adapter is not always faster: a weak integrated GPU, a driver
// with slow submits, or a model too small to amortize them.
//
// Options.NoProbe skips it (the device is kept). An error from the device
// while measuring counts against it. A done ctx stops the measurement
// (nothing is remembered) and returns ctx's error.
func keepDeviceByProbe(ctx context.Context, m *model.Model, dev, cpu backend.Backend, path string) (keep bool, why error) {
	tbl := probe.NewTable(probeVersion, dev.Name(), path)
	cls := tbl.Class("decode " + shapeKey(m))
	switch cls.Verdict() {
	case probe.DeviceWins:
		return true, nil
	case probe.HostWins:
		return false, hostWinsError(dev, path, true)
	}
	ds, err := dev.NewSession(probeSteps + 2)
	if err != nil {
		return false, fmt.Errorf("device session for the speed probe: %w", err)
	}
	defer ds.Close()
	cs, err := cpu.NewSession(probeSteps + 2)
	if err != nil {
		return true, nil // the CPU cannot be measured: keep the device
	}
	defer cs.Close()
	tok := m.Arch.BOS
	if tok < 0 || tok >= m.Arch.Vocab {
		tok = 0
	}
	step := func(s backend.Session) error {
		_, err := s.Forward([]int{tok}, false)
		return err
	}
	for i := 0; i < probeSteps && cls.Verdict() == probe.Undecided; i++ {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		err := cls.Run(ctx,
			func(context.Context) (bool, error) { return false, step(ds) },
			func(context.Context) error { return step(cs) })
		if err != nil {
			return false, fmt.Errorf("device failed while timed against the CPU: %w", err)
		}
	}
	// A close race left undecided after probeSteps keeps the device.
	if cls.Verdict() == probe.HostWins {
		return false, hostWinsError(dev, path, false)
	}
	return true, nil
}

func hostWinsError(dev backend.Backend, path string, cached bool) error {
	how := "measured just now"
	if cached {
		how = "measured on an earlier load"
	}
	if path != "" {
		how += "; delete " + path + " to measure again"
	}
	return &CPUFasterError{fmt.Sprintf("the CPU engine decodes this model faster than %s (%s; --backend webgpu forces the device)", dev.Name(), how)}
}

// CPUFasterError is the auto choice's normal verdict that the CPU decodes
// a model faster than the device: no fault of the device, so it is
// reported as a backend reason (Engine.BackendReason,
// Result.BackendReason), never as a device error.
type CPUFasterError struct{ msg string }

func (e *CPUFasterError) Error() string { return e.msg }

// shapeKey names what decides a model's decode speed: family, sizes and
// the weights' codec.
func shapeKey(m *model.Model) string {
	a := &m.Arch
	codec := "?"
	for _, n := range []string{"blk.0.ffn_down.weight", "blk.0.attn_q.weight", "output.weight", "token_embd.weight"} {
		// Shape and codec only: a model read lazily is not read for this.
		if rr, ok := m.Weights.(model.RangeReader); ok {
			if c, _, ok := rr.TensorInfo(n); ok {
				codec = c.String()
				break
			}
			continue
		}
		if t, ok := m.Weights.Tensor(n); ok {
			codec = t.Codec.String()
			break
		}
	}
	return fmt.Sprintf("%s h%d l%d v%d %s", a.Family, a.Hidden, len(a.Layers), a.Vocab, codec)
}
