package cuda_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
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
// CORTIQ_CUDA_PDL_BENCH lists GGUF paths (comma-separated): prefill of 512
// and 2048 tokens, then tokens per second of 128 greedy steps after it, as
// graphs of 16 steps and as one-step graphs submitted one ahead (as the
// engine does), the backends alternating, best of 3; then the per-kernel
// GPU time of 16 profiled decode steps after 2048 tokens.
// CORTIQ_CUDA_PDL_IMAGES adds backends on other kernel images
// (name=path,...: PTX text, JIT-compiled by the driver, or a fatbin);
// CORTIQ_CUDA_PDL_REPS sets the rounds (3). A measurement on the GPU
// machine: it only logs.
func TestBenchDependent(t *testing.T) {
	spec := os.Getenv("CORTIQ_CUDA_PDL_BENCH")
	if spec == "" {
		t.Skip("CORTIQ_CUDA_PDL_BENCH not set (a measurement on the GPU machine)")
	}
	needGPU(t)
	type variant struct {
		name string
		opts cuda.Options
	}
	variants := []variant{{"dependent", cuda.Options{}}, {"plain", cuda.Options{PlainLaunches: true}}}
	if imgs := os.Getenv("CORTIQ_CUDA_PDL_IMAGES"); imgs != "" {
		for _, kv := range strings.Split(imgs, ",") {
			name, path, _ := strings.Cut(kv, "=")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			variants = append(variants, variant{name, cuda.Options{Image: b}})
		}
	}
	reps := 3
	if n, err := strconv.Atoi(os.Getenv("CORTIQ_CUDA_PDL_REPS")); err == nil && n > 0 {
		reps = n
	}
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
			var ss []pipelinedSession
			for _, v := range variants {
				b, err := cuda.Open(context.Background(), m, v.opts)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				s, err := b.NewSession(4096)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				ss = append(ss, s.(pipelinedSession))
			}
			for _, depth := range []int{512, 2048} {
				pre, g16, g1 := make([]float64, len(ss)), make([]float64, len(ss)), make([]float64, len(ss))
				for range reps {
					for i, s := range ss {
						for _, k := range []int{16, 1} {
							s.Reset()
							t0 := time.Now()
							if _, err := s.Forward(prompt(depth), false); err != nil {
								t.Fatal(err)
							}
							pre[i] = max(pre[i], float64(depth)/time.Since(t0).Seconds())
							if _, err := s.ForwardGreedy(1, k); err != nil { // the graph captured, outside the timing
								t.Fatal(err)
							}
							t0 = time.Now()
							if k == 16 {
								tok := 1
								for range 8 {
									ids, err := s.ForwardGreedy(tok, 16)
									if err != nil {
										t.Fatal(err)
									}
									tok = ids[len(ids)-1]
								}
								g16[i] = max(g16[i], 128/time.Since(t0).Seconds())
								continue
							}
							prev, err := s.SubmitGreedyBatch(1, 1)
							if err != nil {
								t.Fatal(err)
							}
							for range 127 {
								next, err := s.SubmitGreedyBatch(-1, 1)
								if err != nil {
									t.Fatal(err)
								}
								if _, err := s.CollectGreedyBatch(prev); err != nil {
									t.Fatal(err)
								}
								prev = next
							}
							if _, err := s.CollectGreedyBatch(prev); err != nil {
								t.Fatal(err)
							}
							g1[i] = max(g1[i], 128/time.Since(t0).Seconds())
						}
					}
				}
				var sb strings.Builder
				for i, v := range variants {
					fmt.Fprintf(&sb, "\n  %-10s prefill %6.0f tok/s, decode %6.1f tok/s (graphs of 16), %6.1f (one step a graph, one ahead)", v.name, pre[i], g16[i], g1[i])
				}
				t.Logf("after %d tokens:%s", depth, sb.String())
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

type pipelinedSession interface {
	backend.Session
	greedy
	SubmitGreedyBatch(first, k int) (*cuda.GreedyBatch, error)
	CollectGreedyBatch(g *cuda.GreedyBatch) ([]int, error)
}

// TestPairedQKV (CPU): a q4_K_M layer whose v is q6_K (q and k q4_K)
// decodes its q, k and v in one ck_mvq2_q4_K_q6_K launch; Exact keeps the
// three f32-activation matvecs.
func TestPairedQKV(t *testing.T) {
	m := synthModel(t, "q4_K_M") // layer 1 of 2 has a q6_K v (llama.cpp's use_more_bits)
	pair := kernels.MatvecPairName("q4_K", "q6_K")
	for _, exact := range []bool{false, true} {
		fake := driver.NewFake(1 << 30)
		b, err := cuda.Open(context.Background(), m, cuda.Options{Device: fake, Exact: exact})
		if err != nil {
			t.Fatal(err)
		}
		s, err := b.NewSession(64)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Forward([]int{1, 2, 3}, false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Forward([]int{4}, false); err != nil {
			t.Fatal(err)
		}
		if got := fake.Kernels[pair] > 0; got == exact {
			t.Errorf("exact %v: %s looked up %d times", exact, pair, fake.Kernels[pair])
		}
		s.Close()
		b.Close()
	}
}
