package cuda_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cuda"
	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/cuda/kernels"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/synth"
)

type greedy interface {
	ForwardGreedy(first, k int) ([]int, error)
}

// TestDependentLaunchesFake (CPU): the decode graphs' kernels are
// programmatic dependents where the device has PDL and the image is the
// embedded fatbin, never in the prefill, and never with PlainLaunches, a
// PTX-text image or a device without PDL.
func TestDependentLaunchesFake(t *testing.T) {
	m := synthModel(t, "f32")
	for _, c := range []struct {
		name  string
		opts  cuda.Options
		noPDL bool
		want  bool
	}{
		{"default", cuda.Options{}, false, true},
		{"plain", cuda.Options{PlainLaunches: true}, false, false},
		{"ptx-text", cuda.Options{Image: []byte("//\n.version 7.8\n.target sm_80\n")}, false, false},
		{"no-pdl", cuda.Options{}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := driver.NewFake(1 << 30)
			fake.SetPDL(!c.noPDL)
			c.opts.Device = fake
			b, err := cuda.Open(context.Background(), m, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			s, err := b.NewSession(64)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Forward([]int{1, 2, 3, 4, 5, 6, 7, 8}, false); err != nil {
				t.Fatal(err)
			}
			if fake.Dependent != 0 {
				t.Fatalf("%d dependent launches in the prefill", fake.Dependent)
			}
			if _, err := s.Forward([]int{9}, false); err != nil {
				t.Fatal(err)
			}
			if _, err := s.(greedy).ForwardGreedy(3, 4); err != nil {
				t.Fatal(err)
			}
			if got := fake.Dependent > 0; got != c.want {
				t.Errorf("%d dependent launches in the decode graphs, want any: %v", fake.Dependent, c.want)
			}
		})
	}
}

// TestDependentParity (GPU, sm_90): programmatic dependent launches change
// when a kernel starts, never what it computes: the logits of one-token
// steps after a long prompt and the picks of greedy graphs are bit for bit
// those of plain launches (a kernel reading its predecessor's output before
// it is complete would show here), on a quantized model of several layers.
func TestDependentParity(t *testing.T) {
	needGPU(t)
	info, err := driver.DeviceInfo(0)
	if err != nil {
		t.Fatal(err)
	}
	if !info.PDL || !kernels.Dependent(kernels.Image, info.Major, info.Minor) {
		t.Skipf("%s: the kernels are not launched as dependents here", info)
	}
	sh := synth.Shape{Name: "pdl", Arch: "llama", Hidden: 512, Layers: 4, Heads: 8, KVHeads: 2, FFN: 1536, Vocab: 1024,
		RopeTheta: 10000, Context: 1024}
	for _, mix := range []string{"q4_0", "q4_K_M", "q8_0"} {
		t.Run(mix, func(t *testing.T) {
			m := synthShape(t, sh, mix)
			run := func(plain bool) (logits [][]float32, picks []int) {
				b, err := cuda.Open(context.Background(), m, cuda.Options{PlainLaunches: plain})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				s, err := b.NewSession(1024)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				ids := make([]int, 600)
				for i := range ids {
					ids[i] = (i*53 + 5) % m.Arch.Vocab
				}
				l, err := s.Forward(ids, false)
				if err != nil {
					t.Fatal(err)
				}
				logits = append(logits, l)
				for i := range 24 {
					l, err := s.Forward([]int{(i*7 + 3) % m.Arch.Vocab}, false)
					if err != nil {
						t.Fatal(err)
					}
					logits = append(logits, l)
				}
				for range 3 {
					p, err := s.(greedy).ForwardGreedy(argmax(logits[len(logits)-1]), 16)
					if err != nil {
						t.Fatal(err)
					}
					picks = append(picks, p...)
				}
				return logits, picks
			}
			dl, dp := run(false)
			pl, pp := run(true)
			for i := range pl {
				for j := range pl[i] {
					if math.Float32bits(dl[i][j]) != math.Float32bits(pl[i][j]) {
						t.Fatalf("step %d logit %d: %v dependent, %v plain", i, j, dl[i][j], pl[i][j])
					}
				}
			}
			if fmt.Sprint(dp) != fmt.Sprint(pp) {
				t.Errorf("greedy picks %v dependent, %v plain", dp, pp)
			}
		})
	}
}

// TestBenchDependent measures greedy decode with and without programmatic
// dependent launches, in one process on the same files, when
// CORTIQ_CUDA_PDL_BENCH lists GGUF paths (comma-separated): tokens per
// second of 128 greedy steps (graphs of 16) after prompts of 512 and 2048
// tokens, the two backends alternating, best of 3; then the per-kernel GPU
// time of 16 profiled decode steps after 2048 tokens. A measurement on the
// GPU machine: it only logs.
func TestBenchDependent(t *testing.T) {
	spec := os.Getenv("CORTIQ_CUDA_PDL_BENCH")
	if spec == "" {
		t.Skip("CORTIQ_CUDA_PDL_BENCH not set (a measurement on the GPU machine)")
	}
	needGPU(t)
	for _, path := range strings.Split(spec, ",") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			m, err := importer.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			V := m.Arch.Vocab
			prompt := func(n int) []int {
				p := make([]int, n)
				for i := range p {
					p[i] = (i*7919 + 13) % V
				}
				return p
			}
			names := []string{"dependent", "plain"}
			var bs []*cuda.Backend
			var ss []greedySession
			for _, plain := range []bool{false, true} {
				b, err := cuda.Open(context.Background(), m, cuda.Options{PlainLaunches: plain})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				s, err := b.NewSession(4096)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				bs, ss = append(bs, b), append(ss, s.(greedySession))
			}
			for _, depth := range []int{512, 2048} {
				best := make([]float64, len(ss))
				for range 3 {
					for i, s := range ss {
						s.Reset()
						if _, err := s.Forward(prompt(depth), false); err != nil {
							t.Fatal(err)
						}
						if _, err := s.ForwardGreedy(1, 16); err != nil { // the graph captured, outside the timing
							t.Fatal(err)
						}
						tok := 1
						t0 := time.Now()
						for range 8 {
							ids, err := s.ForwardGreedy(tok, 16)
							if err != nil {
								t.Fatal(err)
							}
							tok = ids[len(ids)-1]
						}
						best[i] = max(best[i], 128/time.Since(t0).Seconds())
					}
				}
				t.Logf("decode after %d tokens: %s %.1f tok/s, %s %.1f tok/s (%.3f×)", depth, names[0], best[0], names[1], best[1], best[0]/best[1])
			}
			b, err := cuda.Open(context.Background(), m, cuda.Options{Profile: true})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			s, err := b.NewSession(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Forward(prompt(2048), false); err != nil {
				t.Fatal(err)
			}
			b.Profile()
			for range 16 {
				if _, err := s.Forward([]int{5}, false); err != nil {
					t.Fatal(err)
				}
			}
			report(t, "16 decode steps after 2048 tokens", b.Profile())
		})
	}
}

type greedySession interface {
	backend.Session
	greedy
}
