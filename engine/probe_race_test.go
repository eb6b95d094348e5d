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
	closes          int
	up              *fakeUploads // counts this fake's upload while open
}

// fakeUploads counts the fake devices' uploads held at once: live now,
// peak the most ever, atPrefill the most while a prefill chunk ran.
type fakeUploads struct {
	mu                    sync.Mutex
	live, peak, atPrefill int
}

func (u *fakeUploads) open() {
	u.mu.Lock()
	u.live++
	u.peak = max(u.peak, u.live)
	u.mu.Unlock()
}

func (u *fakeUploads) get() (live, peak, atPrefill int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.live, u.peak, u.atPrefill
}

var errFakeLost = errors.New("fake device lost")

func (b *fakeArm) Name() string { return b.name }
func (b *fakeArm) Close() error {
	if !b.closed && b.up != nil {
		b.up.mu.Lock()
		b.up.live--
		b.up.mu.Unlock()
	}
	b.closed = true
	b.closes++
	return nil
}
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
	if b.up != nil && len(tokens) > 1 {
		b.up.mu.Lock()
		b.up.atPrefill = max(b.up.atPrefill, b.up.live)
		b.up.mu.Unlock()
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

// TestRaceThreeArms: two devices and the CPU race decode; the fastest
// decoder is kept and the other device closed at once (before the prefill
// and layer classes, which race the kept device against the CPU), every
// verdict is persisted with its arms, and the next load measures nothing.
func TestRaceThreeArms(t *testing.T) {
	clock := useFakeClock(t)
	path := filepath.Join(t.TempDir(), "probe.json")
	m := raceModel()
	fast := &fakeArm{name: "cuda:0:fake", clock: clock, call: 1 * time.Millisecond, tok: 100 * time.Microsecond, layer: 500 * time.Microsecond, vocab: 16}
	slow := &fakeArm{name: "webgpu:fake", clock: clock, call: 4 * time.Millisecond, tok: 200 * time.Microsecond, layer: 500 * time.Microsecond, vocab: 16}
	cpu := &fakeArm{name: "cpu", clock: clock, call: 20 * time.Millisecond, tok: 2 * time.Millisecond, layer: 200 * time.Microsecond, vocab: 16}
	r, err := raceBackends(context.Background(), m, []backend.Backend{fast, slow}, cpu, path)
	if err != nil {
		t.Fatal(err)
	}
	if r.keep != 0 || r.cpuWon || r.cached || len(r.failed) != 0 || !slices.Equal(r.closed, []bool{false, true}) {
		t.Fatalf("race %+v, want the first device kept, measured, the second closed", r)
	}
	if !slow.closed || slow.closes != 1 || fast.closed || slow.opens != 1 {
		t.Errorf("the loser: closed %v (%d times), %d sessions (want 1, the decode race's); the winner closed %v", slow.closed, slow.closes, slow.opens, fast.closed)
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
		if cls != "decode" {
			arms = []string{"cuda:0:fake", "cpu"} // the loser is closed
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
	// The next load adopts every verdict: no session, no step; the loser
	// is closed without a step.
	before := []int{fast.opens, slow.opens, cpu.opens}
	slow.closed, slow.closes = false, 0
	r, err = raceBackends(context.Background(), m, []backend.Backend{fast, slow}, cpu, path)
	if err != nil || r.keep != 0 || !r.cached || !slow.closed || fast.closed {
		t.Fatalf("cached race %+v, %v", r, err)
	}
	// So does cachedRace, with no backend open (the auto choice's path
	// when the devices are named by backend.Identify).
	c, ok := cachedRace(m, []string{fast.name, slow.name}, path)
	if !ok || c.keep != 0 || c.cpuWon || !c.cached || len(c.verdicts) != len(r.verdicts) {
		t.Fatalf("cachedRace %+v, %v; want %+v", c, ok, r)
	}
	for i, v := range c.verdicts {
		if w := r.verdicts[i]; v.Class != w.Class || v.Winner != w.Winner || !slices.Equal(v.Arms, w.Arms) || !v.Cached {
			t.Errorf("cachedRace verdict %+v, raceBackends' %+v", v, w)
		}
	}
	if _, ok := cachedRace(m, []string{slow.name}, path); ok {
		t.Errorf("cachedRace found a verdict for another set of devices")
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
	slow.closed = false
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
	if err != nil || r.keep != -1 || !r.cpuWon || !a.closed || !b.closed || len(r.verdicts) != 1 {
		t.Fatalf("race %+v, %v; want the CPU, both devices closed, the decode verdict alone (no device left to race the rest)", r, err)
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
	if broken.forwards != 3 || !broken.closed || ok.closed {
		t.Errorf("the failed device ran %d steps, want 3 (none after its failure), closed %v (want true; the kept one %v)", broken.forwards, broken.closed, ok.closed)
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
	broken.closed, ok.closed = false, false
	r, err = raceBackends(context.Background(), raceModel(), []backend.Backend{broken, ok}, cpu, path)
	if err != nil || r.keep != -1 || r.cpuWon || len(r.failed) != 2 {
		t.Fatalf("race %+v, %v; want the CPU for want of a device, two failures", r, err)
	}
}

// TestRacePrefillHandover: the CPU prefilling 2x faster than the device
// that decodes is reported with what acting on it would take. A device
// that prefills faster but loses decode is closed once it loses (its
// upload is not held for an informative class).
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
	if p := r.verdicts[1]; p.Winner != "cuda:0:fake" || !slices.Equal(p.Arms, []string{"cuda:0:fake", "cpu"}) || p.Note != "" || !pre.closed || pre.opens != 1 {
		t.Errorf("prefill verdict %+v; the decode loser closed %v after %d sessions (want 1)", p, pre.closed, pre.opens)
	}
	// The CPU prefilling faster than the decoding device: PrefillOnCPU.
	slowPre := &fakeArm{name: "webgpu:fake", clock: clock, call: 1 * ms, tok: 2 * ms, export: true, vocab: 16}
	fastCPU := &fakeArm{name: "cpu", clock: clock, call: 5 * ms, tok: 100 * us, vocab: 16}
	r, _ = raceBackends(context.Background(), raceModel(), []backend.Backend{slowPre}, fastCPU, "")
	if n := r.verdicts[1].Note; r.keep != 0 || !strings.Contains(n, "PrefillOnCPU") {
		t.Errorf("race %+v, note %q", r, n)
	}
	// A device that cannot import a state: the note says so.
	noImport := &fakeArm{name: "webgpu:fake", clock: clock, call: 1 * ms, tok: 2 * ms, vocab: 16}
	exportCPU := &fakeArm{name: "cpu", clock: clock, call: 5 * ms, tok: 100 * us, export: true, vocab: 16}
	r, _ = raceBackends(context.Background(), raceModel(), []backend.Backend{noImport}, exportCPU, "")
	if n := r.verdicts[1].Note; r.keep != 0 || !strings.Contains(n, "cpu prefills") || !strings.Contains(n, "webgpu:fake's sessions cannot import") {
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

// The fake devices the auto choice names and opens in TestAutoChoosesAmong
// and TestAutoRaceFreesLosers; autoCalls counts "identify NAME" and
// "open NAME"; a name in autoUnnamed cannot be identified without opening.
var (
	autoFakesMu sync.Mutex
	autoFakes   = map[string]*fakeArm{}
	autoUnnamed = map[string]bool{}
	autoCalls   = map[string]int{}
)

func init() {
	for _, n := range []string{"probe-a", "probe-b"} {
		backend.Register(n, func(context.Context, *model.Model, backend.Options) (backend.Backend, error) {
			autoFakesMu.Lock()
			defer autoFakesMu.Unlock()
			autoCalls["open "+n]++
			if b := autoFakes[n]; b != nil {
				if b.up != nil {
					b.up.open()
				}
				return b, nil
			}
			return nil, fmt.Errorf("%s: no device here", n)
		})
		backend.RegisterIdentifier(n, func(context.Context, *model.Model, backend.Options) (string, error) {
			autoFakesMu.Lock()
			defer autoFakesMu.Unlock()
			autoCalls["identify "+n]++
			if autoUnnamed[n] {
				return "", backend.ErrUnidentified
			}
			if b := autoFakes[n]; b != nil {
				return b.name, nil
			}
			return "", fmt.Errorf("%s: no device here", n)
		})
	}
}

// useAutoFakes makes the auto choice consider probe-a and probe-b.
func useAutoFakes(t *testing.T) {
	old := autoDevices
	autoDevices = []string{"probe-a", "probe-b"}
	t.Cleanup(func() {
		autoDevices = old
		autoFakesMu.Lock()
		clear(autoFakes)
		clear(autoUnnamed)
		clear(autoCalls)
		autoFakesMu.Unlock()
	})
}

// autoCount reads autoCalls[key].
func autoCount(key string) int {
	autoFakesMu.Lock()
	defer autoFakesMu.Unlock()
	return autoCalls[key]
}

// TestAutoChoosesAmong: the engine's auto choice over registered device
// backends, on cached verdicts (so no test timing): the devices are named
// without opening them and only the cached winner is opened, without a
// step; a CPU verdict opens nothing and runs on the CPU with the reason; a
// device that cannot be named is opened to learn its name (the cached
// verdict still holds, the loser closed without a step); a backend asked
// for by name is never measured nor swapped; NoProbe keeps the first that
// opens; a machine without the devices opens none.
func TestAutoChoosesAmong(t *testing.T) {
	m := tinyModelWith(t, "", 0)
	useAutoFakes(t)
	path := filepath.Join(t.TempDir(), "probe.json")
	fresh := func() (a, b *fakeArm) {
		a = &fakeArm{name: "probe-a:fake", vocab: m.Arch.Vocab}
		b = &fakeArm{name: "probe-b:fake", vocab: m.Arch.Vocab}
		autoFakesMu.Lock()
		autoFakes["probe-a"], autoFakes["probe-b"] = a, b
		clear(autoCalls)
		autoFakesMu.Unlock()
		return a, b
	}
	arms := []string{"probe-a:fake", "probe-b:fake", "cpu"}
	cache := func(winner string) {
		es := []string{fmt.Sprintf(`{"version":%q,"device":%q,"class":%q,"winner":%q,"arms":["probe-a:fake","probe-b:fake","cpu"]}`,
			probeVersion, strings.Join(arms, " + "), "decode "+shapeKey(m), winner)}
		if winner != "cpu" {
			es = append(es, fmt.Sprintf(`{"version":%q,"device":%q,"class":%q,"winner":%q,"arms":[%q,"cpu"]}`,
				probeVersion, strings.Join(arms, " + "), "prefill64 "+shapeKey(m), winner, winner))
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
	opened := func() []int { return []int{autoCount("open probe-a"), autoCount("open probe-b")} }

	cache("probe-b:fake")
	a, b := fresh()
	e := newEngine(t, m, Options{Backend: "auto", ProbeCache: path})
	if e.dev != b || b.closed || steps(a, b) != 0 || e.DeviceError() != nil || e.BackendReason() != "" {
		t.Fatalf("auto on a cached probe-b verdict: device %v (b closed %v, %d steps), error %v, reason %q",
			e.BackendName(), b.closed, steps(a, b), e.DeviceError(), e.BackendReason())
	}
	if o := opened(); !slices.Equal(o, []int{0, 1}) || autoCount("identify probe-a") != 1 {
		t.Errorf("a cached verdict opened %v (probe-a, probe-b), want only the winner once", o)
	}
	if v := e.ProbeVerdicts(); len(v) != 2 || !v[0].Cached || v[0].Winner != "probe-b:fake" || !slices.Equal(v[1].Arms, []string{"probe-b:fake", "cpu"}) {
		t.Errorf("verdicts %+v", v)
	}

	// A device that cannot be named without opening: both are opened,
	// the cached verdict is adopted, the loser closed without a step.
	a, b = fresh()
	autoFakesMu.Lock()
	autoUnnamed["probe-a"] = true
	autoFakesMu.Unlock()
	e = newEngine(t, m, Options{Backend: "auto", ProbeCache: path})
	if e.dev != b || !a.closed || a.closes != 1 || steps(a, b) != 0 || !slices.Equal(opened(), []int{1, 1}) {
		t.Fatalf("unnamed probe-a: device %s, a closed %v (%d times), %d steps, opened %v", e.BackendName(), a.closed, a.closes, steps(a, b), opened())
	}
	autoFakesMu.Lock()
	clear(autoUnnamed)
	autoFakesMu.Unlock()

	// Asked for by name: that backend, whatever the verdicts say; nothing
	// else named or opened.
	a, b = fresh()
	e = newEngine(t, m, Options{Backend: "probe-a", ProbeCache: path})
	if e.dev != a || steps(a, b) != 0 || !slices.Equal(opened(), []int{1, 0}) || autoCount("identify probe-b") != 0 || e.ProbeVerdicts() != nil {
		t.Fatalf("--backend probe-a: device %s, %d steps, opened %v", e.BackendName(), steps(a, b), opened())
	}

	// NoProbe: the first that opens, the next never opened.
	a, b = fresh()
	e = newEngine(t, m, Options{Backend: "auto", ProbeCache: path, NoProbe: true})
	if e.dev != a || steps(a, b) != 0 || !slices.Equal(opened(), []int{1, 0}) {
		t.Fatalf("NoProbe: device %s, %d steps, opened %v", e.BackendName(), steps(a, b), opened())
	}

	// A cached CPU verdict: nothing opened, the reason names them.
	cache("cpu")
	a, b = fresh()
	e = newEngine(t, m, Options{Backend: "auto", ProbeCache: path})
	if e.dev != nil || !slices.Equal(opened(), []int{0, 0}) || e.DeviceError() != nil || !strings.Contains(e.BackendReason(), "earlier load") ||
		!strings.Contains(e.BackendReason(), "probe-a:fake, probe-b:fake") {
		t.Fatalf("cached CPU verdict: device %s, opened %v, error %v, reason %q", e.BackendName(), opened(), e.DeviceError(), e.BackendReason())
	}
	if v := e.ProbeVerdicts(); len(v) != 1 || v[0].Winner != "cpu" || !v[0].Cached {
		t.Errorf("verdicts %+v", v)
	}

	// A device that is not there is neither opened nor an arm: the race
	// is among those that are (here none is cached for that set, so it is
	// measured).
	autoFakesMu.Lock()
	autoFakes["probe-a"] = nil
	clear(autoCalls)
	autoFakesMu.Unlock()
	e = newEngine(t, m, Options{Backend: "auto", ProbeCache: path})
	if v := e.ProbeVerdicts(); len(v) == 0 || !slices.Equal(v[0].Arms, []string{"probe-b:fake", "cpu"}) || v[0].Cached {
		t.Fatalf("race without probe-a: %+v", v)
	}
	if o := opened(); !slices.Equal(o, []int{0, 1}) {
		t.Errorf("opened %v, want probe-b only", o)
	}

	// No device at all (a CPU-only machine): nothing opened, each
	// backend's reason reported.
	autoFakesMu.Lock()
	clear(autoFakes)
	clear(autoCalls)
	autoFakesMu.Unlock()
	e = newEngine(t, m, Options{Backend: "auto", ProbeCache: path})
	if err := e.DeviceError(); e.dev != nil || !slices.Equal(opened(), []int{0, 0}) || err == nil ||
		!strings.Contains(err.Error(), "probe-a: no device here") || !strings.Contains(err.Error(), "probe-b: no device here") || e.ProbeVerdicts() != nil {
		t.Fatalf("no device: %s, opened %v, error %v", e.BackendName(), opened(), err)
	}
}

// TestAutoRaceFreesLosers: a first load (no verdict) opens both devices
// and races them; the one that loses decode is closed before the prefill
// class runs, so at most both uploads are held during the decode race and
// one after it; the next load opens the winner alone.
func TestAutoRaceFreesLosers(t *testing.T) {
	m := tinyModelWith(t, "", 0)
	useAutoFakes(t)
	path := filepath.Join(t.TempDir(), "probe.json")
	up := &fakeUploads{}
	a := &fakeArm{name: "probe-a:fake", vocab: m.Arch.Vocab, up: up}
	b := &fakeArm{name: "probe-b:fake", vocab: m.Arch.Vocab, up: up}
	autoFakesMu.Lock()
	autoFakes["probe-a"], autoFakes["probe-b"] = a, b
	autoFakesMu.Unlock()
	e := newEngine(t, m, Options{Backend: "auto", ProbeCache: path})
	live, peak, atPrefill := up.get()
	v := e.ProbeVerdicts()
	if peak != 2 || len(v) == 0 || v[0].Cached || !slices.Equal(v[0].Arms, []string{"probe-a:fake", "probe-b:fake", "cpu"}) {
		t.Fatalf("first load: peak %d uploads (want 2, both raced), verdicts %+v", peak, v)
	}
	// Which arm wins is this machine's timing; what is held is not.
	kept := 0
	if e.dev != nil {
		kept = 1
	}
	if live != kept || atPrefill > 1 || a.closes > 1 || b.closes > 1 {
		t.Fatalf("after the race: %d uploads held (device %s), %d while prefill ran (want at most 1), closes %d/%d",
			live, e.BackendName(), atPrefill, a.closes, b.closes)
	}
	for _, f := range []*fakeArm{a, b} {
		if (e.dev == backend.Backend(f)) == f.closed {
			t.Errorf("%s: closed %v, kept %v", f.name, f.closed, e.dev == backend.Backend(f))
		}
	}
	if e.dev == nil {
		t.Skipf("the CPU won the race on this machine (%q): the next load's device path is covered by TestAutoChoosesAmong", e.BackendReason())
	}
	// The next load: the saved verdict opens the winner alone.
	e.dev.Close()
	a.closed, b.closed, a.closes, b.closes = false, false, 0, 0
	*up = fakeUploads{}
	autoFakesMu.Lock()
	clear(autoCalls)
	autoFakesMu.Unlock()
	winner := e.dev
	e = newEngine(t, m, Options{Backend: "auto", ProbeCache: path})
	if _, peak, _ := up.get(); e.dev != winner || peak != 1 || autoCount("open probe-a")+autoCount("open probe-b") != 1 || !e.ProbeVerdicts()[0].Cached {
		t.Fatalf("second load: device %s (want %s), peak %d uploads, opened %d", e.BackendName(), winner.Name(), peak, autoCount("open probe-a")+autoCount("open probe-b"))
	}
}
