package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/probe"
)

// Fake backends for the auto choice's race, on a fake clock: each call
// advances the clock by the arm's cost, so the verdicts are exact and no
// test depends on this machine's speed.

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeArm is a backend whose Forward of n tokens costs call + n*tok on the
// clock; with layer > 0 its sessions are LayerRunners (layer per row).
type fakeArm struct {
	name            string
	clock           *fakeClock
	call, tok       time.Duration
	layer           time.Duration
	export          bool // sessions are StateExporters
	layerFail       bool // ForwardLayers fails
	failAt          int  // the failAt-th Forward fails (0: never)
	vocab           int
	forwards, opens int
	closed          bool
}

var errFakeLost = errors.New("fake device lost")

func (b *fakeArm) Name() string { return b.name }
func (b *fakeArm) Close() error { b.closed = true; return nil }
func (b *fakeArm) NewSession(int) (backend.Session, error) {
	b.opens++
	s := &fakeArmSession{b: b}
	switch {
	case b.layer > 0 && b.export:
		return &fakeLayerExportSession{fakeLayerSession{s}}, nil
	case b.layer > 0:
		return &fakeLayerSession{s}, nil
	case b.export:
		return &fakeExportSession{s}, nil
	}
	return s, nil
}

type fakeArmSession struct {
	b *fakeArm
	n int
}

func (s *fakeArmSession) Forward(tokens []int, all bool) ([]float32, error) {
	b := s.b
	b.forwards++
	if b.failAt > 0 && b.forwards >= b.failAt {
		return nil, errFakeLost
	}
	if b.clock != nil {
		b.clock.advance(b.call + time.Duration(len(tokens))*b.tok)
	}
	s.n += len(tokens)
	return make([]float32, b.vocab), nil
}
func (s *fakeArmSession) Len() int     { return s.n }
func (s *fakeArmSession) Reset()       { s.n = 0 }
func (s *fakeArmSession) Close() error { return nil }

type fakeLayerSession struct{ *fakeArmSession }

func (s *fakeLayerSession) ForwardLayers(x []float32, n, pos0, from, to int) error {
	if s.b.layerFail {
		return errFakeLost
	}
	s.b.clock.advance(time.Duration(n*(to-from)) * s.b.layer)
	s.n = max(s.n, pos0+n)
	return nil
}

type fakeExportSession struct{ *fakeArmSession }

func (s *fakeExportSession) ExportState() (*backend.State, error) { return nil, errors.New("fake") }
func (s *fakeExportSession) ImportState(*backend.State) error     { return errors.New("fake") }

type fakeLayerExportSession struct{ fakeLayerSession }

func (s *fakeLayerExportSession) ExportState() (*backend.State, error) {
	return nil, errors.New("fake")
}
func (s *fakeLayerExportSession) ImportState(*backend.State) error { return errors.New("fake") }

// raceModel is an architecture with two kinds of layer (no weights: the
// fakes compute nothing).
func raceModel() *model.Model {
	layers := []model.Layer{
		{Mixer: model.MixerAttention, FFN: model.FFNDense},
		{Mixer: model.MixerAttention, FFN: model.FFNMoE},
		{Mixer: model.MixerAttention, FFN: model.FFNMoE},
	}
	return &model.Model{Arch: model.Arch{Family: "fake", Hidden: 8, Vocab: 16, Layers: layers}, Weights: model.MapWeights{}}
}

func useFakeClock(t *testing.T) *fakeClock {
	c := &fakeClock{t: time.Unix(1e9, 0)}
	old := probeNow
	probeNow = c.now
	t.Cleanup(func() { probeNow = old })
	return c
}

// TestRaceThreeArms: two devices and the CPU race per class; the fastest
// decoder is kept, the layer kinds race among the LayerRunners, every
// verdict is persisted with its arms, and the next load measures nothing.
func TestRaceThreeArms(t *testing.T) {
	clock := useFakeClock(t)
	path := filepath.Join(t.TempDir(), "probe.json")
	m := raceModel()
	fast := &fakeArm{name: "cuda:0:fake", clock: clock, call: 1 * time.Millisecond, tok: 100 * time.Microsecond, vocab: 16}
	slow := &fakeArm{name: "webgpu:fake", clock: clock, call: 4 * time.Millisecond, tok: 200 * time.Microsecond, layer: 500 * time.Microsecond, vocab: 16}
	cpu := &fakeArm{name: "cpu", clock: clock, call: 20 * time.Millisecond, tok: 2 * time.Millisecond, layer: 200 * time.Microsecond, vocab: 16}
	r, err := raceBackends(context.Background(), m, []backend.Backend{fast, slow}, cpu, path)
	if err != nil {
		t.Fatal(err)
	}
	if r.keep != 0 || r.cpuWon || r.cached || len(r.failed) != 0 {
		t.Fatalf("race %+v, want the first device kept, measured", r)
	}
	want := map[string]string{"decode": "cuda:0:fake", "prefill64": "cuda:0:fake", "layer attention/dense": "cpu", "layer attention/moe": "cpu"}
	if len(r.verdicts) != len(want) {
		t.Fatalf("%d verdicts %+v, want %d", len(r.verdicts), r.verdicts, len(want))
	}
	for _, v := range r.verdicts {
		cls := strings.TrimSuffix(v.Class, " "+shapeKey(m))
		if want[cls] != v.Winner {
			t.Errorf("%s: winner %q, want %q", cls, v.Winner, want[cls])
		}
		arms := []string{"cuda:0:fake", "webgpu:fake", "cpu"}
		if strings.HasPrefix(cls, "layer ") {
			arms = arms[1:] // the CUDA fake is no LayerRunner
		}
		if !slices.Equal(v.Arms, arms) || len(v.Best) != len(arms) || v.Best[len(arms)-1] == 0 {
			t.Errorf("%s: arms %q best %v, want %q measured", cls, v.Arms, v.Best, arms)
		}
	}
	entries, err := probe.ReadCache(path)
	if err != nil || len(entries) != len(want) {
		t.Fatalf("cache %+v, %v", entries, err)
	}
	for _, e := range entries {
		if e.Version != probeVersion || e.Device != "cuda:0:fake + webgpu:fake + cpu" {
			t.Errorf("entry %+v keyed wrong", e)
		}
	}
	// The next load adopts every verdict: no session, no step.
	before := []int{fast.opens, slow.opens, cpu.opens}
	r, err = raceBackends(context.Background(), m, []backend.Backend{fast, slow}, cpu, path)
	if err != nil || r.keep != 0 || !r.cached {
		t.Fatalf("cached race %+v, %v", r, err)
	}
	for _, v := range r.verdicts {
		if !v.Cached || v.Best != nil {
			t.Errorf("%s measured again: %+v", v.Class, v)
		}
	}
	if now := []int{fast.opens, slow.opens, cpu.opens}; !slices.Equal(now, before) {
		t.Errorf("a cached race opened sessions: %v → %v", before, now)
	}
	// Another set of devices is another race: measured again.
	r, err = raceBackends(context.Background(), m, []backend.Backend{slow}, cpu, path)
	if err != nil || r.cached || r.keep != 0 {
		t.Fatalf("race of another set: %+v, %v", r, err)
	}
}

// TestRaceCPUWins: devices slower than the CPU lose; the caller reports it
// as a backend reason, not a fault.
func TestRaceCPUWins(t *testing.T) {
	clock := useFakeClock(t)
	a := &fakeArm{name: "cuda:0:fake", clock: clock, call: 30 * time.Millisecond, vocab: 16}
	b := &fakeArm{name: "webgpu:fake", clock: clock, call: 40 * time.Millisecond, vocab: 16}
	cpu := &fakeArm{name: "cpu", clock: clock, call: 3 * time.Millisecond, vocab: 16}
	r, err := raceBackends(context.Background(), raceModel(), []backend.Backend{a, b}, cpu, "")
	if err != nil || r.keep != -1 || !r.cpuWon {
		t.Fatalf("race %+v, %v; want the CPU", r, err)
	}
	msg := cpuFasterError([]string{a.name, b.name}, "/x/probe.json", false).Error()
	for _, w := range []string{"measured just now", "cuda:0:fake, webgpu:fake", "--backend cuda or --backend webgpu", "/x/probe.json"} {
		if !strings.Contains(msg, w) {
			t.Errorf("reason %q lacks %q", msg, w)
		}
	}
}

// TestRaceDeviceFails: a device that fails while timed is out of the race
// and of the choice; the others decide, and nothing is persisted (a
// transient fault is not slowness).
func TestRaceDeviceFails(t *testing.T) {
	clock := useFakeClock(t)
	path := filepath.Join(t.TempDir(), "probe.json")
	broken := &fakeArm{name: "cuda:0:fake", clock: clock, call: 1 * time.Millisecond, failAt: 3, vocab: 16}
	ok := &fakeArm{name: "webgpu:fake", clock: clock, call: 2 * time.Millisecond, vocab: 16}
	cpu := &fakeArm{name: "cpu", clock: clock, call: 9 * time.Millisecond, vocab: 16}
	r, err := raceBackends(context.Background(), raceModel(), []backend.Backend{broken, ok}, cpu, path)
	if err != nil || r.keep != 1 || len(r.failed) != 1 || !errors.Is(r.failed[0], errFakeLost) || !strings.Contains(r.failed[0].Error(), "cuda:0:fake") {
		t.Fatalf("race %+v, %v; want webgpu kept and cuda's failure named", r, err)
	}
	if n := r.verdicts[0].Note; !strings.Contains(n, "cuda:0:fake failed while timed") {
		t.Errorf("decode note %q does not name the failure", n)
	}
	if broken.forwards != 3 {
		t.Errorf("the failed device ran %d steps, want 3 (none after its failure)", broken.forwards)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("verdicts persisted after a failure (%v)", err)
	}
	// A failure in a layer class (informative only) takes the device out
	// of that class, not out of the choice.
	lf := &fakeArm{name: "webgpu:fake", clock: clock, call: 1 * time.Millisecond, layer: time.Millisecond, layerFail: true, vocab: 16}
	lcpu := &fakeArm{name: "cpu", clock: clock, call: 9 * time.Millisecond, layer: time.Millisecond, vocab: 16}
	r, err = raceBackends(context.Background(), raceModel(), []backend.Backend{lf}, lcpu, "")
	if err != nil || r.keep != 0 || len(r.failed) != 0 || len(r.verdicts) != 4 || r.verdicts[2].Winner != "cpu" {
		t.Fatalf("race with a failing LayerRunner: %+v, %v; want the device kept, the layer classes to the CPU", r, err)
	}
	// Every device failing leaves the CPU with the failures to report.
	broken.forwards, ok.failAt, ok.forwards = 0, 1, 0
	r, err = raceBackends(context.Background(), raceModel(), []backend.Backend{broken, ok}, cpu, path)
	if err != nil || r.keep != -1 || r.cpuWon || len(r.failed) != 2 {
		t.Fatalf("race %+v, %v; want the CPU for want of a device, two failures", r, err)
	}
}

// TestRacePrefillHandover: another arm than the decode winner prefilling
// 2x faster is reported with what acting on it would take.
func TestRacePrefillHandover(t *testing.T) {
	clock := useFakeClock(t)
	ms, us := time.Millisecond, time.Microsecond
	// cuda: quick submits, slow per token; webgpu: the reverse.
	dec := &fakeArm{name: "cuda:0:fake", clock: clock, call: 1 * ms, tok: 1 * ms, vocab: 16}
	pre := &fakeArm{name: "webgpu:fake", clock: clock, call: 3 * ms, tok: 100 * us, export: true, vocab: 16}
	cpu := &fakeArm{name: "cpu", clock: clock, call: 50 * ms, tok: 5 * ms, vocab: 16}
	r, err := raceBackends(context.Background(), raceModel(), []backend.Backend{dec, pre}, cpu, "")
	if err != nil || r.keep != 0 {
		t.Fatalf("race %+v, %v; want cuda (decode)", r, err)
	}
	p := r.verdicts[1]
	if p.Winner != "webgpu:fake" || !strings.Contains(p.Note, "webgpu:fake prefills") || !strings.Contains(p.Note, "cuda:0:fake's sessions cannot import") {
		t.Errorf("prefill verdict %+v", p)
	}
	dec.export = true // now cuda imports: the contract allows it
	r, _ = raceBackends(context.Background(), raceModel(), []backend.Backend{dec, pre}, cpu, "")
	if n := r.verdicts[1].Note; !strings.Contains(n, "contract allows the hand-over") {
		t.Errorf("note %q", n)
	}
	// The CPU prefilling faster than the decoding device: PrefillOnCPU.
	slowPre := &fakeArm{name: "webgpu:fake", clock: clock, call: 1 * ms, tok: 2 * ms, export: true, vocab: 16}
	fastCPU := &fakeArm{name: "cpu", clock: clock, call: 5 * ms, tok: 100 * us, vocab: 16}
	r, _ = raceBackends(context.Background(), raceModel(), []backend.Backend{slowPre}, fastCPU, "")
	if n := r.verdicts[1].Note; r.keep != 0 || !strings.Contains(n, "PrefillOnCPU") {
		t.Errorf("race %+v, note %q", r, n)
	}
}

// TestRaceCancelled: a done context stops the race with its error.
func TestRaceCancelled(t *testing.T) {
	clock := useFakeClock(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := &fakeArm{name: "webgpu:fake", clock: clock, call: time.Millisecond, vocab: 16}
	cpu := &fakeArm{name: "cpu", clock: clock, call: time.Millisecond, vocab: 16}
	if _, err := raceBackends(ctx, raceModel(), []backend.Backend{a}, cpu, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled race: %v", err)
	}
}

// The fake devices the auto choice opens by name in TestAutoChoosesAmong.
var (
	autoFakesMu sync.Mutex
	autoFakes   = map[string]*fakeArm{}
)

func init() {
	for _, n := range []string{"probe-a", "probe-b"} {
		backend.Register(n, func(context.Context, *model.Model, backend.Options) (backend.Backend, error) {
			autoFakesMu.Lock()
			defer autoFakesMu.Unlock()
			if b := autoFakes[n]; b != nil {
				return b, nil
			}
			return nil, fmt.Errorf("%s: no device here", n)
		})
	}
}

// TestAutoChoosesAmong: the engine's auto choice over registered device
// backends, on cached verdicts (so no test timing): the cached winner is
// kept and the others closed without a step; a CPU verdict runs on the
// CPU with the reason; a backend asked for by name is never measured nor
// swapped; NoProbe keeps the first that opens.
func TestAutoChoosesAmong(t *testing.T) {
	m := tinyModelWith(t, "", 0)
	old := autoDevices
	autoDevices = []string{"probe-a", "probe-b"}
	t.Cleanup(func() { autoDevices = old })
	path := filepath.Join(t.TempDir(), "probe.json")
	fresh := func() (a, b *fakeArm) {
		a = &fakeArm{name: "probe-a:fake", vocab: m.Arch.Vocab}
		b = &fakeArm{name: "probe-b:fake", vocab: m.Arch.Vocab}
		autoFakesMu.Lock()
		autoFakes["probe-a"], autoFakes["probe-b"] = a, b
		autoFakesMu.Unlock()
		return a, b
	}
	t.Cleanup(func() { autoFakesMu.Lock(); clear(autoFakes); autoFakesMu.Unlock() })
	arms := []string{"probe-a:fake", "probe-b:fake", "cpu"}
	cache := func(winner string) {
		var es []string
		for _, c := range []string{"decode ", "prefill64 "} {
			es = append(es, fmt.Sprintf(`{"version":%q,"device":%q,"class":%q,"winner":%q,"arms":["probe-a:fake","probe-b:fake","cpu"]}`,
				probeVersion, strings.Join(arms, " + "), c+shapeKey(m), winner))
		}
		if err := os.WriteFile(path, []byte(`{"entries":[`+strings.Join(es, ",")+`]}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	steps := func(bs ...*fakeArm) (n int) {
		for _, b := range bs {
			n += b.opens + b.forwards
		}
		return n
	}

	cache("probe-b:fake")
	a, b := fresh()
	e := newEngine(t, m, Options{Backend: "auto", ProbeCache: path})
	if e.dev != b || !a.closed || b.closed || steps(a, b) != 0 || e.DeviceError() != nil || e.BackendReason() != "" {
		t.Fatalf("auto on a cached probe-b verdict: device %v (a closed %v, b closed %v, %d steps), error %v, reason %q",
			e.BackendName(), a.closed, b.closed, steps(a, b), e.DeviceError(), e.BackendReason())
	}
	if v := e.ProbeVerdicts(); len(v) != 2 || !v[0].Cached || v[0].Winner != "probe-b:fake" {
		t.Errorf("verdicts %+v", v)
	}

	// Asked for by name: that backend, whatever the verdicts say.
	a, b = fresh()
	e = newEngine(t, m, Options{Backend: "probe-a", ProbeCache: path})
	if e.dev != a || steps(a, b) != 0 || b.opens != 0 || e.ProbeVerdicts() != nil {
		t.Fatalf("--backend probe-a: device %s, %d steps", e.BackendName(), steps(a, b))
	}

	// NoProbe: the first that opens, the next never opened.
	a, b = fresh()
	e = newEngine(t, m, Options{Backend: "auto", ProbeCache: path, NoProbe: true})
	if e.dev != a || steps(a, b) != 0 {
		t.Fatalf("NoProbe: device %s, %d steps", e.BackendName(), steps(a, b))
	}

	// A cached CPU verdict: both closed, the reason names them.
	cache("cpu")
	a, b = fresh()
	e = newEngine(t, m, Options{Backend: "auto", ProbeCache: path})
	if e.dev != nil || !a.closed || !b.closed || e.DeviceError() != nil || !strings.Contains(e.BackendReason(), "earlier load") ||
		!strings.Contains(e.BackendReason(), "probe-a:fake, probe-b:fake") {
		t.Fatalf("cached CPU verdict: device %s, error %v, reason %q", e.BackendName(), e.DeviceError(), e.BackendReason())
	}

	// A device that does not open is no arm: the race is among those that
	// do (here none is cached for that set, so it is measured).
	autoFakesMu.Lock()
	autoFakes["probe-a"] = nil
	autoFakesMu.Unlock()
	e = newEngine(t, m, Options{Backend: "auto", ProbeCache: path})
	if v := e.ProbeVerdicts(); len(v) == 0 || !slices.Equal(v[0].Arms, []string{"probe-b:fake", "cpu"}) || v[0].Cached {
		t.Fatalf("race without probe-a: %+v", v)
	}
}
