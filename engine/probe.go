package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/probe"
)

// probeVersion keys the cached verdicts: a verdict measured by another
// engine version (other kernels, other graph, other classes) is measured
// again. ProbeVersion exports it for `cortiq devices`.
const probeVersion = "cortiq-probe-3"

// ProbeVersion is the engine version the speed verdicts are kept under: a
// verdict of another (an older build's) is ignored and measured again.
const ProbeVersion = probeVersion

// The bounds of one measurement, per arm (the probe's rules decide earlier
// on a clear 2x gap).
const (
	probeSteps        = 14 // single-token decode steps
	probePrefill      = 64 // tokens of one prefill chunk
	probePrefillSteps = 5  // prefill chunks
	probeLayerSteps   = 8  // single-row steps through one layer
)

// probeNow is the probe's clock (tests substitute a fake one).
var probeNow = time.Now

// ClassVerdict is one op class's verdict among the backends raced for
// --backend auto (Engine.ProbeVerdicts).
type ClassVerdict struct {
	// Class is "decode <shape>", "prefill64 <shape>" or
	// "layer <mixer>/<ffn> <shape>" (see raceBackends).
	Class string `json:"class"`
	// Arms are the backends raced, the CPU last.
	Arms []string `json:"arms"`
	// Winner is one of Arms; "" when the race stayed undecided.
	Winner string `json:"winner,omitempty"`
	// Best is each arm's best clean sample of this load (0: none, as for
	// a verdict remembered from an earlier load).
	Best []time.Duration `json:"best_ns,omitempty"`
	// Cached says the verdict came from the cache file.
	Cached bool `json:"cached,omitempty"`
	// Note says what the verdict would take to act on (prefill) or why an
	// arm is out (a failure).
	Note string `json:"note,omitempty"`
}

// raced is what raceBackends decided.
type raced struct {
	keep     int    // index into devs of the backend that decodes; -1 = the CPU
	closed   []bool // the devices closed while racing (every one but keep at the end)
	cpuWon   bool   // the CPU won the decode race (keep is -1)
	cached   bool   // the decode verdict came from the cache
	verdicts []ClassVerdict
	failed   []error // the devices that failed while timed
}

// armCaps are what an arm's sessions can do, seen while racing.
type armCaps struct{ export, imprt bool }

// raceBackends decides, for --backend auto, which of the opened device
// backends devs (in preference order) or the CPU backend cpu runs this
// model. It races them per op class under package probe's rules (each
// device's first step and cold steps discarded, best samples compared, an
// early verdict at a 2x gap over every other arm, a failing device out of
// the race) and remembers each verdict per engine version, the raced
// devices and the class (model shape included), so only the first load
// measures. The classes the backend contract lets the engine time:
//
//   - "decode <shape>": one single-token Forward step (embedding, every
//     layer, the head), raced among every device and the CPU. Its verdict
//     decides the session's backend: every other device has lost and is
//     closed at once (raced.closed), so the uploads held together are
//     those of the decode race, and one device's after it.
//   - "prefill64 <shape>": one 64-token Forward chunk from position 0,
//     the kept device against the CPU (none when the CPU decodes). It is
//     reported; when the CPU wins it by 2x or more the verdict's Note says
//     what handing the state over takes (Options.PrefillOnCPU).
//   - "layer <mixer>/<ffn> <shape>", one per kind of decoder layer the
//     model has (attention/dense, attention/moe, short_conv/dense, …): one
//     single-row ForwardLayers step through the first layer of that kind,
//     the kept device against the CPU when its sessions are LayerRunners
//     holding it (webgpu; cuda sessions are not LayerRunners yet).
//
// Attention apart from the FFN, the matvecs apart from the layer, and the
// head apart from the step are not separable through the contract (a
// layer is its unit; only a SplitSession's LayersHead runs the head alone,
// and the CPU session is not one).
//
// A close decode race left undecided keeps the device with the best
// sample. An error from a device while measuring takes it out of the
// race (and of the choice; a kept device failing in prefill leaves the
// CPU); a done ctx stops the measurement and returns ctx's error. The
// devices not yet closed then (raced.closed) are the caller's.
func raceBackends(ctx context.Context, m *model.Model, devs []backend.Backend, cpu backend.Backend, path string) (raced, error) {
	backends := append(slices.Clone(devs), cpu)
	names := make([]string, len(backends))
	for i, b := range backends {
		names[i] = b.Name()
	}
	names = armNames(names)
	host := len(devs)
	tbl := probe.NewTable(probeVersion, strings.Join(names, " + "), path)
	tbl.Now = probeNow
	tbl.Deferred = true // written once every class is raced: a cancelled race leaves nothing
	shape := shapeKey(m)
	res := raced{keep: -1, closed: make([]bool, len(devs))}
	failed := make([]bool, len(backends))
	caps := make([]*armCaps, len(backends))
	fail := func(i int, err error) {
		if !failed[i] {
			failed[i] = true
			res.failed = append(res.failed, fmt.Errorf("%s failed while timed against the CPU: %w", names[i], err))
		}
	}
	// release closes device i, out of the race: its upload is freed at
	// once, not when the race ends.
	release := func(i int) {
		if i >= 0 && i < len(devs) && !res.closed[i] {
			res.closed[i] = true
			devs[i].Close()
		}
	}
	// finish notes the failures on the decode verdict and writes the
	// verdicts held back (Table.Deferred; a class with a failure is never
	// written, and after a failure in decode none is).
	finish := func() raced {
		if len(res.failed) > 0 {
			msgs := make([]string, len(res.failed))
			for i, err := range res.failed {
				msgs[i] = err.Error()
			}
			res.verdicts[0].Note = strings.Join(msgs, "; ") + " (out of the race; the classes from its failure on are measured again on the next load)"
		}
		tbl.Flush()
		return res
	}
	tok := m.Arch.BOS
	if tok < 0 || tok >= m.Arch.Vocab {
		tok = 0
	}

	// run races one class: open(i) gives arm i's session state, step(i)
	// runs one timed call on it. Arms failed in an earlier class are out;
	// with global, an arm failing here is out of the choice too (decode
	// and prefill are what sessions do; a layer class is only informative,
	// its failure takes the arm out of that class alone).
	type armRun struct {
		step  func() error
		close func()
	}
	run := func(cls *probe.Class, idx []int, open func(i int) (armRun, error), steps int, global bool) (ClassVerdict, error) {
		note := func(i int, err error) {
			if global {
				fail(i, err)
			}
		}
		v := ClassVerdict{Class: cls.Name(), Arms: cls.Arms()}
		if w := cls.Winner(); w >= 0 {
			v.Winner, v.Cached = v.Arms[w], true
			return v, nil
		}
		arms := make([]armRun, len(idx))
		defer func() {
			for _, a := range arms {
				if a.close != nil {
					a.close()
				}
			}
		}()
		for k, i := range idx {
			if failed[i] {
				cls.Fail(k)
				continue
			}
			a, err := open(i)
			if err != nil {
				if k == len(idx)-1 {
					return v, err // the CPU: nothing to race against
				}
				note(i, err)
				cls.Fail(k)
				continue
			}
			arms[k] = a
		}
		for n := 0; n < steps*len(idx) && cls.Winner() < 0; n++ {
			if err := ctx.Err(); err != nil {
				return v, err
			}
			k, err := cls.Step(ctx, func(_ context.Context, k int) (bool, error) { return false, arms[k].step() })
			if err != nil {
				if k == len(idx)-1 {
					return v, fmt.Errorf("the CPU failed while timing %s: %w", cls.Name(), err)
				}
				note(idx[k], err)
				cls.Fail(k)
			}
		}
		if w := cls.Winner(); w >= 0 {
			v.Winner = v.Arms[w]
		}
		for k := range idx {
			d, _ := cls.Best(k)
			v.Best = append(v.Best, d)
		}
		return v, nil
	}
	// session opens arm i's session as the engine would: a device holding
	// only some layers is paired with a CPU session for the rest.
	session := func(i, maxLen int) (backend.Session, error) {
		s, err := backends[i].NewSession(maxLen)
		if err != nil {
			return nil, err
		}
		if caps[i] == nil {
			_, ex := s.(backend.StateExporter)
			_, im := s.(backend.StateImporter)
			caps[i] = &armCaps{export: ex, imprt: im}
		}
		if ss, ok := partial(s); ok && i != host {
			sp, err := newSplit(ss, cpu, maxLen)
			if err != nil {
				s.Close()
				return nil, err
			}
			return sp, nil
		}
		return s, nil
	}
	all := make([]int, len(backends))
	for i := range all {
		all[i] = i
	}

	// Decode: one token per step.
	decode := tbl.Race("decode "+shape, names...)
	dv, err := run(decode, all, func(i int) (armRun, error) {
		s, err := session(i, probeSteps+2)
		if err != nil {
			return armRun{}, err
		}
		return armRun{step: func() error {
			if s.Len() >= probeSteps+1 {
				s.Reset()
			}
			_, err := s.Forward([]int{tok}, false)
			return err
		}, close: func() { s.Close() }}, nil
	}, probeSteps, true)
	if err != nil {
		return res, err
	}
	res.cached = dv.Cached
	res.verdicts = append(res.verdicts, dv)

	// The session's backend: the decode winner; when a close race stayed
	// undecided or the winner failed, the device with the best decode
	// sample still standing, else the first device standing; none
	// standing leaves the CPU. Every other device has lost: it is closed
	// now, so the classes below hold one device's upload at most.
	w := slices.Index(names, dv.Winner)
	res.cpuWon = w == host && slices.Contains(failed[:host], false)
	if w < 0 || failed[w] {
		w = -1
		for i := range devs {
			if failed[i] || len(dv.Best) <= i || dv.Best[i] == 0 {
				continue
			}
			if w < 0 || dv.Best[i] < dv.Best[w] {
				w = i
			}
		}
		for i := range devs {
			if w < 0 && !failed[i] {
				w = i
			}
		}
	}
	for i := range devs {
		if i != w {
			release(i)
		}
	}
	if len(res.failed) > 0 {
		// A race with a failure persists nothing: it is measured again,
		// whole, on the next load.
		tbl.Path = ""
	}
	if w < 0 || w == host {
		// The CPU decodes: no device left to race the other classes.
		return finish(), nil
	}
	live := []int{w, host}
	pair := []string{names[w], names[host]}

	// Prefill: one chunk from position 0 per step, the kept device
	// against the CPU (whether PrefillOnCPU would pay).
	chunk := make([]int, probePrefill)
	for i := range chunk {
		chunk[i] = (tok + 7919*i) % m.Arch.Vocab
	}
	prefill := tbl.Race(fmt.Sprintf("prefill%d %s", probePrefill, shape), pair...)
	pv, err := run(prefill, live, func(i int) (armRun, error) {
		s, err := session(i, probePrefill)
		if err != nil {
			return armRun{}, err
		}
		return armRun{step: func() error {
			s.Reset()
			_, err := s.Forward(chunk, false)
			return err
		}, close: func() { s.Close() }}, nil
	}, probePrefillSteps, true)
	if err != nil {
		return res, err
	}
	res.verdicts = append(res.verdicts, pv)
	res.verdicts[1].Note = handover(pv, dv, names, caps)

	// Layers: one single-row step through the first layer of each kind,
	// the kept device against the CPU when its sessions are LayerRunners
	// holding it. After a load that measured decode and prefill, the
	// layer verdicts are only read back (they decide nothing; finding
	// whether the device's sessions are LayerRunners would open one).
	measure := !dv.Cached || !pv.Cached
	seen := map[string]bool{}
	for li, l := range m.Arch.Layers {
		kind := fmt.Sprintf("%s/%s", l.Mixer, l.FFN)
		if seen[kind] {
			continue
		}
		seen[kind] = true
		name := fmt.Sprintf("layer %s %s", kind, shape)
		if !measure {
			if c := tbl.Lookup(name); c != nil {
				res.verdicts = append(res.verdicts, ClassVerdict{Class: name, Arms: c.Arms(), Winner: c.Arms()[c.Winner()], Cached: true})
			}
			continue
		}
		if failed[w] {
			break
		}
		sessions := map[int]backend.Session{}
		for _, i := range live {
			s, err := backends[i].NewSession(probeLayerSteps + 1)
			if err != nil {
				continue
			}
			_, ok := s.(backend.LayerRunner)
			if ss, split := s.(backend.SplitSession); split && !ss.Layers()[li] {
				ok = false
			}
			if !ok {
				s.Close()
				continue
			}
			sessions[i] = s
		}
		if len(sessions) < 2 {
			for _, s := range sessions {
				s.Close()
			}
			continue
		}
		x0 := make([]float32, m.Arch.Hidden)
		for j := range x0 {
			x0[j] = float32(math.Sin(float64(j)+1)) / 4
		}
		cls := tbl.Race(name, pair...)
		lv, err := run(cls, live, func(i int) (armRun, error) {
			s := sessions[i]
			delete(sessions, i)
			lr := s.(backend.LayerRunner)
			x := make([]float32, len(x0))
			pos := 0
			return armRun{step: func() error {
				if pos >= probeLayerSteps {
					s.Reset()
					pos = 0
				}
				copy(x, x0)
				err := lr.ForwardLayers(x, 1, pos, li, li+1)
				pos++
				return err
			}, close: func() { s.Close() }}, nil
		}, probeLayerSteps, false)
		for _, s := range sessions {
			s.Close() // opened but not raced (a cached verdict)
		}
		if err != nil {
			return res, err
		}
		res.verdicts = append(res.verdicts, lv)
	}
	if !failed[w] {
		res.keep = w
	} else {
		// The kept device failed in a later class: the CPU runs it.
		release(w)
		res.cpuWon = false
	}
	return finish(), nil
}

// armNames are the race's arm names for backends named names (the CPU
// last): a name repeated is numbered ("webgpu:x#2").
func armNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, b := range names {
		n := b
		for k := 2; slices.Contains(out, n); k++ {
			n = fmt.Sprintf("%s#%d", b, k)
		}
		out = append(out, n)
	}
	return out
}

// cachedRace is what raceBackends would decide from saved verdicts alone
// for the devices named devNames (Backend.Name, as backend.Identify gives
// them; preference order) and the CPU, with no backend open: ok when the
// decode verdict is saved and, for a device winner, the prefill verdict
// too (a race would then measure nothing: the layer verdicts are read
// back). The auto choice then opens the winner only, or nothing when the
// CPU won.
func cachedRace(m *model.Model, devNames []string, path string) (raced, bool) {
	if path == "" || len(devNames) == 0 {
		return raced{}, false
	}
	names := armNames(append(slices.Clone(devNames), "cpu"))
	host := len(names) - 1
	tbl := probe.NewTable(probeVersion, strings.Join(names, " + "), path)
	tbl.Now = probeNow
	shape := shapeKey(m)
	dc := tbl.Race("decode "+shape, names...)
	w := dc.Winner()
	if w < 0 {
		return raced{}, false
	}
	res := raced{keep: -1, cached: true, cpuWon: w == host}
	res.verdicts = []ClassVerdict{{Class: dc.Name(), Arms: dc.Arms(), Winner: names[w], Cached: true}}
	if w == host {
		return res, true
	}
	pc := tbl.Race(fmt.Sprintf("prefill%d %s", probePrefill, shape), names[w], names[host])
	pw := pc.Winner()
	if pw < 0 {
		return raced{}, false
	}
	res.keep = w
	res.verdicts = append(res.verdicts, ClassVerdict{Class: pc.Name(), Arms: pc.Arms(), Winner: pc.Arms()[pw], Cached: true})
	seen := map[string]bool{}
	for _, l := range m.Arch.Layers {
		kind := fmt.Sprintf("%s/%s", l.Mixer, l.FFN)
		if seen[kind] {
			continue
		}
		seen[kind] = true
		if c := tbl.Lookup(fmt.Sprintf("layer %s %s", kind, shape)); c != nil {
			res.verdicts = append(res.verdicts, ClassVerdict{Class: c.Name(), Arms: c.Arms(), Winner: c.Arms()[c.Winner()], Cached: true})
		}
	}
	return res, true
}

// handover says what acting on a prefill verdict would take when the CPU
// prefills at least 2x faster than the device that decodes ("" otherwise).
// The prefill race is the kept device against the CPU (the last of names);
// caps are indexed as names.
func handover(pv, dv ClassVerdict, names []string, caps []*armCaps) string {
	p, d := slices.Index(pv.Arms, pv.Winner), slices.Index(pv.Arms, dv.Winner)
	if p < 0 || d < 0 || p == d || len(pv.Best) != len(pv.Arms) || pv.Best[p] == 0 || pv.Best[d] == 0 {
		return ""
	}
	gap := float64(pv.Best[d]) / float64(pv.Best[p])
	if gap < probe.DefaultConfig.EarlyGap {
		return ""
	}
	host := len(names) - 1
	dn := slices.Index(names, dv.Winner)
	msg := fmt.Sprintf("%s prefills %.1fx faster than %s, which decodes fastest: ", pv.Winner, gap, dv.Winner)
	cp, cd := caps[host], caps[dn]
	switch {
	case pv.Winner != names[host]:
		return "" // not a race against the CPU
	case cp == nil || cd == nil:
		return msg + "the sessions' capabilities were not seen"
	case cd.imprt:
		return msg + "Options.PrefillOnCPU hands the prompt's state to the device (CPU export, device ImportState)"
	case !cp.export:
		return msg + names[host] + "'s sessions cannot export their state (backend.StateExporter)"
	}
	return msg + dv.Winner + "'s sessions cannot import a state (backend.StateImporter)"
}

// cpuFasterError is the auto choice's verdict that the CPU decodes
// faster than every device raced.
func cpuFasterError(devs []string, path string, cached bool) error {
	how := "measured just now"
	if cached {
		how = "measured on an earlier load"
	}
	if path != "" {
		how += "; `cortiq devices --forget all` or deleting " + path + " measures again"
	}
	force := make([]string, len(devs))
	for i, d := range devs {
		force[i] = "--backend " + strings.SplitN(d, ":", 2)[0]
	}
	return &CPUFasterError{fmt.Sprintf("the CPU engine decodes this model faster than %s (%s; %s forces the device)",
		strings.Join(devs, ", "), how, strings.Join(force, " or "))}
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
