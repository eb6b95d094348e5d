package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cortiq/cortiq/backend"
)

// autoDevices is the order in which Backend "auto" considers the device
// backends this build links (see backends.go; the CLI links cuda too); a
// name not registered is skipped. Every one that opens is raced against
// the CPU (raceBackends) and the fastest decoder kept; without a race
// (Options.NoProbe) the first that opens is kept.
//
// Auto may choose CUDA (when the driver is there) by measurement; a
// backend asked for by name (--backend cuda, --backend webgpu) is never
// measured against another nor swapped for one behind the user's back.
var autoDevices = []string{"cuda", "webgpu"}

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
//     order. A software adapter is declined unless Options.AllowSoftware;
//     unless Options.NoProbe every one that opens is raced against the
//     CPU per op class and the fastest decoder kept (the CPU when it wins:
//     BackendReason says why); with NoProbe the first that opens.
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
//
// Under a race the candidates are first named without opening them
// (backend.Identify: the driver's device name, the adapter's info): one
// that cannot be there (no driver, no adapter, a software adapter) is
// never opened, and a saved verdict for those devices opens its winner
// only (nothing when the CPU won). Without one, every candidate is opened
// (each uploads the model) and raced; raceBackends closes each as soon as
// it loses the decode race, so the uploads held at once are the raced
// devices' during the decode race and one device's after it.
func (e *Engine) openDevice(ctx context.Context, c choice, cpu backend.Backend) {
	m, opts := e.Model, e.opts
	race := !c.forced && !opts.NoProbe && cpu != nil
	dopts := opts.deviceOptions(c.forced)
	var errs []error
	failed := func(name string, err error) {
		if errors.Is(err, backend.ErrSoftware) {
			err = fmt.Errorf("%w (--backend %s forces it)", err, name)
		}
		errs = append(errs, err)
	}
	progress := func(msg string) {
		if opts.Progress != nil {
			opts.Progress(msg)
		}
	}
	candidates := c.devices
	if race {
		candidates = nil
		var ids []string
		named := true
		for _, name := range c.devices {
			id, err := backend.Identify(ctx, name, m, dopts)
			if ctx.Err() != nil {
				return
			}
			switch {
			case errors.Is(err, backend.ErrUnidentified):
				named = false // opened to learn its name
			case err != nil:
				failed(name, err)
				continue
			}
			candidates = append(candidates, name)
			ids = append(ids, id)
		}
		if !named {
			ids = nil // no saved verdict can be looked up
		}
		if r, ok := cachedRace(m, ids, opts.ProbeCache); ok {
			if r.cpuWon {
				e.probe = r.verdicts
				e.devReason = cpuFasterError(ids, opts.ProbeCache, true).Error()
				return
			}
			progress("opening the device, uploading the weights and building the kernels")
			dev, err := backend.Open(ctx, candidates[r.keep], m, dopts)
			if ctx.Err() != nil {
				if dev != nil {
					dev.Close()
				}
				return
			}
			if err == nil {
				e.probe = r.verdicts
				e.dev = dev
				if r, ok := cpu.(interface{ ReleasePacked() }); ok {
					r.ReleasePacked()
				}
				return
			}
			// The saved winner does not open now: the others race
			// without it.
			failed(candidates[r.keep], err)
			candidates = slices.Delete(candidates, r.keep, r.keep+1)
		}
	}
	var devs []backend.Backend
	var closed []bool // set by the race: the devices it closed
	closeAll := func(keep int) {
		for i, d := range devs {
			if i != keep && (i >= len(closed) || !closed[i]) {
				d.Close()
			}
		}
	}
	for _, name := range candidates {
		progress("opening the device, uploading the weights and building the kernels")
		dev, err := backend.Open(ctx, name, m, dopts)
		if ctx.Err() != nil {
			// A cancelled load keeps nothing and falls back to nothing.
			if dev != nil {
				dev.Close()
			}
			closeAll(-1)
			return
		}
		if err != nil {
			failed(name, err)
			continue
		}
		devs = append(devs, dev)
		if !race {
			break // the first that opens
		}
	}
	if race && len(devs) > 0 {
		if len(devs) == 1 {
			progress("timing the device against the CPU")
		} else {
			progress("timing the devices against the CPU")
		}
		r, err := raceBackends(ctx, m, devs, cpu, opts.ProbeCache)
		e.probe = r.verdicts
		closed = r.closed
		switch {
		case ctx.Err() != nil:
			closeAll(-1)
			return
		case err != nil:
			// The CPU could not be measured: keep the first device
			// the race left open.
			r.keep = -1
			for i := range devs {
				if r.keep < 0 && (i >= len(closed) || !closed[i]) {
					r.keep = i
				}
			}
			if r.keep < 0 {
				devs = nil
				errs = append(errs, err)
			}
		case r.keep < 0:
			closeAll(-1)
			if r.cpuWon {
				names := make([]string, len(devs))
				for i, d := range devs {
					names[i] = d.Name()
				}
				e.devReason = cpuFasterError(names, opts.ProbeCache, r.cached).Error()
				return
			}
			devs = nil
			errs = append(errs, r.failed...)
		}
		if r.keep >= 0 {
			closeAll(r.keep)
			devs = []backend.Backend{devs[r.keep]}
			if r, ok := cpu.(interface{ ReleasePacked() }); ok {
				r.ReleasePacked() // the probe's CPU steps packed int8 tiles
			}
		}
	}
	if len(devs) > 0 {
		e.dev = devs[0]
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
