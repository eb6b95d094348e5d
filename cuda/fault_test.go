package cuda_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/cuda"
	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/engine"
	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/sample"
)

func loadTiny(t testing.TB, name string) *model.Model {
	t.Helper()
	dir := fixtures.Tiny(t, name)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Skipf("fixture %s not here: %v", dir, err)
	}
	m, err := importer.FromHF(dir)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		if m.Close != nil {
			m.Close()
		}
	})
	return m
}

// baseDevice is the real device 0 when there is one, else a Fake: the
// fault tests run everywhere, and on a GPU they check real tokens too.
func baseDevice(t *testing.T) (d driver.Device, real bool) {
	c, err := driver.Open(0)
	if err == nil {
		return c, true
	}
	return driver.NewFake(1 << 30), false
}

// cpuContinue is the CPU's greedy continuation of history, n tokens.
func cpuContinue(t *testing.T, m *model.Model, history []int, n int) []int {
	b, err := cpu.New(m, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := b.NewSession(len(history) + n)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.Forward(history, false)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for range n {
		tok := sample.Argmax(l)
		out = append(out, tok)
		if l, err = s.Forward([]int{tok}, false); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestNoDriver: without libcuda.so.1 the backend refuses with the reason
// and the engine runs the CPU, saying why.
func TestNoDriver(t *testing.T) {
	if _, err := driver.Devices(); !errors.Is(err, driver.ErrNoDriver) {
		t.Skipf("a CUDA driver is installed here (%v)", err)
	}
	m := synthModel(t, "f32")
	_, err := cuda.Open(context.Background(), m, cuda.Options{})
	if err == nil || !strings.Contains(err.Error(), "cuda: no libcuda.so.1 (NVIDIA driver not installed)") {
		t.Fatalf("open without a driver: %v", err)
	}
	e, err := engine.NewFromModel(synthModel(t, "f32"), engine.Options{Backend: "cuda"}) // the engine closes its model
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	res, err := e.Generate(context.Background(), engine.Request{IDs: []int{1, 5, 9}, MaxTokens: 4, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != "cpu" || !strings.Contains(res.DeviceError, "no libcuda.so.1") {
		t.Fatalf("backend %q, device error %q", res.Backend, res.DeviceError)
	}
}

// TestRefusals: what the kernels cannot run is refused naming it.
func TestRefusals(t *testing.T) {
	t.Run("fixtures", func(t *testing.T) {
		for _, c := range []struct{ fixture, want string }{
			{"lfm2", "mixer"}, {"qwen3_moe", "FFN"},
		} {
			m := loadTiny(t, c.fixture)
			_, err := cuda.Open(context.Background(), m, cuda.Options{Device: driver.NewFake(1 << 30)})
			if !errors.Is(err, cuda.ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want ErrUnsupported naming %q", c.fixture, err, c.want)
			}
		}
	})
	// A codec the kernels lack is refused naming the tensor and the codec.
	m := synthModel(t, "f32")
	w := model.MapWeights{}
	for _, n := range m.Weights.Names() {
		tt, _ := m.Weights.Tensor(n)
		w[n] = tt
	}
	q := *w["blk.1.ffn_up.weight"]
	q.Codec = 8 // q4_1
	w["blk.1.ffn_up.weight"] = &q
	mm := *m
	mm.Weights = w
	_, err := cuda.Open(context.Background(), &mm, cuda.Options{Device: driver.NewFake(1 << 30)})
	if !errors.Is(err, cuda.ErrUnsupported) || !strings.Contains(err.Error(), "blk.1.ffn_up.weight is q4_1") {
		t.Errorf("q4_1 weight: %v", err)
	}
	// A budget too small for the weights.
	_, err = cuda.Open(context.Background(), m, cuda.Options{Device: driver.NewFake(1 << 30), VRAMBudget: 1000})
	if err == nil || !strings.Contains(err.Error(), "budget") {
		t.Errorf("tiny budget: %v", err)
	}
}

// TestFaultsFallBack injects a fault at each point of the device path —
// the kernel image refused, memory exhausted, a launch failing in the
// prefill or mid-decode, the device lost mid-decode, with and without
// greedy graphs — and wants the generation finished on the CPU: every
// token the CPU computes is the CPU's continuation of the sequence so far
// (on a real GPU the device's own tokens equal the CPU's as well; on the
// fake device, whose kernels compute nothing, they are zeros).
func TestFaultsFallBack(t *testing.T) {
	m := synthModel(t, "f32")
	prompt := []int{1, 17, 33, 101, 7, 250, 64, 3}
	const n = 16
	want := cpuContinue(t, m, prompt, n)
	// launches counts the kernel launches of a fault-free run on the fake.
	launches := func(batch, tokens int) int {
		fake := driver.NewFake(1 << 30)
		old := cuda.OpenDevice
		cuda.OpenDevice = func(int) (driver.Device, error) { return fake, nil }
		defer func() { cuda.OpenDevice = old }()
		e, err := engine.NewFromModel(synthModel(t, "f32"), engine.Options{Backend: "cuda"})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if _, err := e.Generate(context.Background(), engine.Request{IDs: prompt, MaxTokens: tokens, IgnoreEOS: true, GreedyBatch: batch}, nil); err != nil {
			t.Fatal(err)
		}
		return fake.Launches
	}
	// mid is a launch in the middle of the decode.
	mid := func(batch int) int { a, b := launches(batch, 2), launches(batch, n); return a + (b-a)/2 }
	plain, graph, late := mid(0), mid(4), launches(0, n)-3
	for _, c := range []struct {
		name  string
		fault func(*driver.Faulty)
		batch int
		atGen bool // the fault hits after generation started
	}{
		{"refuse-image", func(f *driver.Faulty) { f.RefuseLoad = true }, 0, false},
		{"out-of-memory", func(f *driver.Faulty) { f.AllocLimit = 4096 }, 0, false},
		{"launch-prefill", func(f *driver.Faulty) { f.FailLaunch = 3 }, 0, false},
		{"launch-decode", func(f *driver.Faulty) { f.FailLaunch = plain }, 0, true},
		{"lose-decode", func(f *driver.Faulty) { f.LoseAfter = plain + 7 }, 0, true},
		{"launch-greedy-graph", func(f *driver.Faulty) { f.FailLaunch = graph }, 4, true},
		{"lose-greedy-graph", func(f *driver.Faulty) { f.LoseAfter = graph + 3 }, 4, true},
		{"launch-graph-late", func(f *driver.Faulty) { f.FailLaunch = late }, 0, true},
		{"lose-graph-late", func(f *driver.Faulty) { f.LoseAfter = late }, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, real := baseDevice(t)
			f := &driver.Faulty{Device: base}
			c.fault(f)
			old := cuda.OpenDevice
			cuda.OpenDevice = func(int) (driver.Device, error) { return f, nil }
			defer func() { cuda.OpenDevice = old }()
			e, err := engine.NewFromModel(synthModel(t, "f32"), engine.Options{Backend: "cuda"}) // the engine closes its model
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			var devToks []int
			res, err := e.Generate(context.Background(), engine.Request{IDs: prompt, MaxTokens: n, IgnoreEOS: true, GreedyBatch: c.batch},
				func(tk engine.Token) error {
					if tk.Backend != "cpu" {
						devToks = append(devToks, tk.ID)
					}
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if res.DeviceError == "" {
				t.Fatalf("no device error reported (backend %s)", res.Backend)
			}
			t.Logf("%d device tokens, then the CPU: %s", len(devToks), res.DeviceError)
			if c.atGen && len(devToks) == 0 {
				t.Errorf("the fault hit before the first token: move it later")
			}
			if real && fmt.Sprint(devToks) != fmt.Sprint(want[:len(devToks)]) {
				t.Errorf("device tokens %v, want %v", devToks, want[:len(devToks)])
			}
			history := append(append([]int(nil), prompt...), devToks...)
			rest := cpuContinue(t, m, history, n-len(devToks))
			if got, exp := fmt.Sprint(res.IDs), fmt.Sprint(append(append([]int(nil), devToks...), rest...)); got != exp {
				t.Errorf("tokens %s, want %s", got, exp)
			}
		})
	}
}
