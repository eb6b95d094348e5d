package cuda_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortiq/cortiq/cuda"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
)

// TestBenchShapes measures prefill and decode on synthetic models of real
// shapes when CORTIQ_CUDA_BENCH names them ("llama-1b:q4_0,q8_0,q4_K_M"),
// with the per-kernel GPU time of a profiled prefill and decode step. It is
// a measurement run on the GPU machine (scripts/bench-cuda-h200.sh), not a
// timed assertion: it only logs.
func TestBenchShapes(t *testing.T) {
	spec := os.Getenv("CORTIQ_CUDA_BENCH")
	if spec == "" {
		t.Skip("CORTIQ_CUDA_BENCH not set (a measurement, run by scripts/bench-cuda-h200.sh)")
	}
	needGPU(t)
	shape, quants, _ := strings.Cut(spec, ":")
	sh, err := synth.ParseShape(shape)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range strings.Split(quants, ",") {
		t.Run(q, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), q+".gguf")
			mix, err := synth.ParseMix(q)
			if err != nil {
				t.Fatal(err)
			}
			if err := synth.WriteMix(path, sh, mix); err != nil {
				t.Fatal(err)
			}
			m, err := importer.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, o := range []cuda.Options{{}, {Profile: true}, {Exact: true}, {Exact: true, Profile: true}} {
				t0 := time.Now()
				b, err := cuda.Open(context.Background(), m, o)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("exact %v, profile %v: upload %.2fs", o.Exact, o.Profile, time.Since(t0).Seconds())
				run(t, b, o.Profile, m.Arch.Vocab)
				b.Close()
			}
		})
	}
	_ = tensor.F32
}

func run(t *testing.T, b *cuda.Backend, prof bool, vocab int) {
	s, err := b.NewSession(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prompt := func(n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = (i*7919 + 13) % vocab
		}
		return p
	}
	type greedy interface {
		ForwardGreedy(int, int) ([]int, error)
	}
	if prof {
		s.Forward(prompt(512), false)
		report(t, "prefill 512", b.Profile())
		for range 16 {
			s.Forward([]int{5}, false)
		}
		report(t, "16 decode steps", b.Profile())
		return
	}
	// The prefill GEMM (weights and activations in f16 on tensor cores)
	// against token-by-token matvecs (f32 activations) on the same prompt:
	// how far apart the two paths put the last logits.
	gemm, err := s.Forward(prompt(64), false)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := b.NewSession(128)
	if err != nil {
		t.Fatal(err)
	}
	var mv []float32
	for _, tok := range prompt(64) {
		if mv, err = s2.Forward([]int{tok}, false); err != nil {
			t.Fatal(err)
		}
	}
	s2.Close()
	t.Logf("64-token prompt, last logits: GEMM vs matvec path max |Δ| %.3g (max |logit| %.3g), argmax %d vs %d",
		maxDiff(gemm, mv), maxAbs(mv), argmax(gemm), argmax(mv))
	s.(greedy).ForwardGreedy(1, 1)
	s.(greedy).ForwardGreedy(1, 8)
	for _, n := range []int{512, 2048} {
		s.Reset()
		t0 := time.Now()
		if _, err := s.Forward(prompt(n), false); err != nil {
			t.Fatal(err)
		}
		d := time.Since(t0)
		t.Logf("pp%d: %.0f tok/s (%.1f ms)", n, float64(n)/d.Seconds(), d.Seconds()*1e3)
	}
	for _, depth := range []int{512, 2048} {
		for _, k := range []int{1, 8} {
			s.Reset()
			s.Forward(prompt(depth), false)
			tok, steps := 1, 0
			t0 := time.Now()
			for steps < 128 {
				ids, err := s.(greedy).ForwardGreedy(tok, k)
				if err != nil {
					t.Fatal(err)
				}
				tok = ids[len(ids)-1]
				steps += k
			}
			d := time.Since(t0)
			t.Logf("tg128 at depth %d, %d steps per graph launch: %.0f tok/s", depth, k, float64(steps)/d.Seconds())
		}
	}
}

func maxAbs(x []float32) float64 {
	var m float64
	for _, v := range x {
		m = max(m, float64(v), -float64(v))
	}
	return m
}

func report(t *testing.T, what string, ks []cuda.KernelTime) {
	var total float64
	for _, k := range ks {
		total += k.MS
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: %.3f ms of kernels\n", what, total)
	for _, k := range ks {
		fmt.Fprintf(&sb, "  %-22s %5d calls %9.3f ms %5.1f%%\n", k.Name, k.Calls, k.MS, 100*k.MS/total)
	}
	t.Log(sb.String())
}

// TestProfilePrefill logs where a prefill's GPU time goes, kernel by
// kernel, at 512 and 2048 tokens, and the unprofiled prefill rate (best of
// 3), when CORTIQ_CUDA_PREFILL names the shapes as CORTIQ_CUDA_BENCH does
// ("llama-1b:q4_0,q8_0,q4_K_M"); the files are written to
// CORTIQ_CUDA_PREFILL_DIR (kept, and reused when there) or a temporary
// directory. A measurement on the GPU machine; it only logs.
func TestProfilePrefill(t *testing.T) {
	spec := os.Getenv("CORTIQ_CUDA_PREFILL")
	if spec == "" {
		t.Skip("CORTIQ_CUDA_PREFILL not set (a measurement on the GPU machine)")
	}
	needGPU(t)
	shape, quants, _ := strings.Cut(spec, ":")
	sh, err := synth.ParseShape(shape)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range strings.Split(quants, ",") {
		t.Run(q, func(t *testing.T) {
			dir := cmp.Or(os.Getenv("CORTIQ_CUDA_PREFILL_DIR"), t.TempDir())
			path := filepath.Join(dir, shape+"-"+q+".gguf")
			if _, err := os.Stat(path); err != nil {
				mix, err := synth.ParseMix(q)
				if err != nil {
					t.Fatal(err)
				}
				if err := synth.WriteMix(path, sh, mix); err != nil {
					t.Fatal(err)
				}
			}
			m, err := importer.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			prompt := func(n int) []int {
				p := make([]int, n)
				for i := range p {
					p[i] = (i*7919 + 13) % m.Arch.Vocab
				}
				return p
			}
			for _, o := range []cuda.Options{{Profile: true}, {}} {
				b, err := cuda.Open(context.Background(), m, o)
				if err != nil {
					t.Fatal(err)
				}
				s, err := b.NewSession(2048)
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range []int{512, 2048} {
					best := time.Duration(math.MaxInt64)
					for range 3 {
						s.Reset()
						t0 := time.Now()
						if _, err := s.Forward(prompt(n), false); err != nil {
							t.Fatal(err)
						}
						best = min(best, time.Since(t0))
						if o.Profile {
							report(t, fmt.Sprintf("%s prefill %d", q, n), b.Profile())
							break
						}
					}
					if !o.Profile {
						t.Logf("%s pp%d: %.0f tok/s (%.2f ms, best of 3)", q, n, float64(n)/best.Seconds(), best.Seconds()*1e3)
					}
				}
				s.Close()
				b.Close()
			}
		})
	}
}
