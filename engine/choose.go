package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cortiq/cortiq/backend"
)

// autoDevices is the order in which Backend "auto" tries the device
// backends this build links (see backends.go); a name not registered is
// skipped.
//
// The CUDA backend is not among them: as in the seed's facade, it runs
// only when asked for by name (--backend cuda, CORTIQ_GPU=cuda) and is
// never swapped for another behind the user's back.
var autoDevices = []string{"webgpu"}

// choice is what the scheduler's policy (choose) decided to try.
type choice struct {
	devices []string // device backends to open, first that opens wins
	forced  bool     // asked for by name: no software decline, no probe
}

// choose is the one backend policy of every front end (CLI, server, the
// browser tab):
//
//   - "cpu": the CPU backend only.
//   - the name of a registered device backend ("webgpu", "cuda"): that
//     backend, forced: a software adapter is accepted and no measurement
//     declines it. If it refuses the model, the CPU runs it and
//     DeviceError says why.
//   - "auto" (or ""): the registered device backends in autoDevices
//     order, the first that opens. A software adapter is declined unless
//     Options.AllowSoftware; unless Options.NoProbe the device is then
//     timed against the CPU and kept only if it decodes faster
//     (BackendReason says why not).
func choose(want string) (choice, error) {
	names := backend.Names()
	switch want {
	case "", "auto":
		var c choice
		for _, n := range autoDevices {
			if slices.Contains(names, n) {
				c.devices = append(c.devices, n)
			}
		}
		return c, nil
	case "cpu":
		return choice{}, nil
	}
	if !slices.Contains(names, want) {
		return choice{}, fmt.Errorf("engine: backend %q: want auto or one of %s", want, strings.Join(names, ", "))
	}
	return choice{devices: []string{want}, forced: true}, nil
}

// Backends lists what Options.Backend accepts in this build: "auto",
// "cpu" and the registered device backends.
func Backends() []string {
	out := []string{"auto"}
	for _, n := range backend.Names() {
		if n != "cpu" {
			out = append(out, n)
		}
	}
	return slices.Insert(out, 1, "cpu")
}

// deviceOptions are what a device backend is opened with.
func (o Options) deviceOptions(forced bool) backend.Options {
	return backend.Options{
		RewindDepth: o.RewindDepth,
		KVF16:       o.KV == "f16",
		Layers:      o.GPULayers,
		MemBudget:   o.VRAMBudget,
		// An explicit context is set aside in the budget (refused, with
		// what it needs, when it cannot fit).
		ReserveContext: o.MaxContext,
		AllowSoftware:  forced || o.AllowSoftware,
		Tuning:         o.Tuning,
	}
}

// openDevice carries out the choice: it opens the device backend to use,
// or records why there is none (devErr: a fault or a refusal; devReason:
// the measurement preferred the CPU). cpu is the CPU backend, nil when it
// is built on demand (no measurement then).
func (e *Engine) openDevice(ctx context.Context, c choice, cpu backend.Backend) {
	m, opts := e.Model, e.opts
	var errs []error
	for _, name := range c.devices {
		if opts.Progress != nil {
			opts.Progress("opening the device, uploading the weights and building the kernels")
		}
		dev, err := backend.Open(ctx, name, m, opts.deviceOptions(c.forced))
		if ctx.Err() != nil {
			// A cancelled load keeps nothing and falls back to nothing.
			if dev != nil {
				dev.Close()
			}
			return
		}
		if err != nil {
			if errors.Is(err, backend.ErrSoftware) {
				err = fmt.Errorf("%w (--backend %s forces it)", err, name)
			}
			errs = append(errs, err)
			continue
		}
		if !c.forced && !opts.NoProbe && cpu != nil {
			if opts.Progress != nil {
				opts.Progress("timing the device against the CPU")
			}
			keep, why := keepDeviceByProbe(ctx, m, dev, cpu, opts.ProbeCache)
			if ctx.Err() != nil {
				dev.Close()
				return
			}
			if !keep {
				dev.Close()
				var faster *CPUFasterError
				if errors.As(why, &faster) {
					e.devReason = why.Error()
					return
				}
				errs = append(errs, why)
				continue
			}
			if r, ok := cpu.(interface{ ReleasePacked() }); ok {
				r.ReleasePacked() // the probe's CPU steps packed int8 tiles
			}
		}
		e.dev = dev
		return
	}
	switch len(errs) {
	case 0:
	case 1:
		// Even an explicit request runs, honestly, on the CPU; the
		// reason is reported in Result.DeviceError.
		e.devErr = errs[0]
	default:
		e.devErr = errors.Join(errs...)
	}
}
