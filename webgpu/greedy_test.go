package webgpu

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/gpu"
)

func TestForwardGreedy(t *testing.T) {
	d := testDevice(t)
	for _, name := range []string{"llama", "gemma3_text_sw8", "qwen2", "split/mistral_sw8"} {
		t.Run(name, func(t *testing.T) {
			if n, ok := strings.CutPrefix(name, "split/"); ok {
				name = n
				splitLenOverride = 8 // the 12 steps of one submit cross splits
				defer func() { splitLenOverride = 0 }()
			}
			m, ref := loadFixture(t, name)
			_, s := testSession(t, m, Options{Device: d, Chunk: 16}, 64)
			p := ref.InputIDs
			if _, err := s.Forward(p[:len(p)-1], false); err != nil {
				t.Fatal(err)
			}
			// Two submits of 12 steps each.
			got, err := s.ForwardGreedy(p[len(p)-1], 12)
			if err != nil {
				t.Fatal(err)
			}
			more, err := s.ForwardGreedy(got[11], 12)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, more...)
			if s.Len() != len(p)-1+24 {
				t.Errorf("Len %d after greedy, want %d", s.Len(), len(p)-1+24)
			}
			// The same picks through Forward and a host argmax.
			s.Reset()
			l, err := s.Forward(p, false)
			if err != nil {
				t.Fatal(err)
			}
			var want []int
			for range 24 {
				tok := argmaxF(l)
				want = append(want, tok)
				if l, err = s.Forward([]int{tok}, false); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("greedy on device %v\nForward+argmax    %v", got, want)
			}
			// Pipelined: the second batch continues from the device's own
			// last pick before the host has read the first; a dropped third
			// batch gives its positions back.
			s.Reset()
			if _, err := s.Forward(p[:len(p)-1], false); err != nil {
				t.Fatal(err)
			}
			g1, err := s.SubmitGreedy(p[len(p)-1], 12)
			if err != nil {
				t.Fatal(err)
			}
			g2, err := s.SubmitGreedy(-1, 12)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.SubmitGreedy(-1, 1); err == nil {
				t.Error("a third batch in flight was accepted")
			}
			a1, err := s.CollectGreedy(g1)
			if err != nil {
				t.Fatal(err)
			}
			g3, err := s.SubmitGreedy(-1, 5)
			if err != nil {
				t.Fatal(err)
			}
			a2, err := s.CollectGreedy(g2)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.DropGreedy(g3); err != nil {
				t.Fatal(err)
			}
			if piped := append(a1, a2...); !slices.Equal(piped, want) {
				t.Errorf("pipelined greedy %v\nForward+argmax   %v", piped, want)
			}
			if s.Len() != len(p)-1+24 {
				t.Errorf("Len %d after a dropped batch, want %d", s.Len(), len(p)-1+24)
			}
			if _, err := s.SubmitGreedy(-1, 1); err == nil {
				t.Error("a continuation after a dropped batch was accepted")
			}
			l, err = s.Forward([]int{a2[11]}, false)
			if err != nil {
				t.Fatal(err)
			}
			if l2, err := s.Forward([]int{argmaxF(l)}, false); err != nil || len(l2) != len(l) {
				t.Fatalf("Forward after a dropped batch: %v", err)
			}
			vocab := m.Arch.Vocab
			for i, tok := range got {
				if top2Margin(ref.StepLogits[i*vocab:(i+1)*vocab]) <= parityTol {
					break // later steps may follow another branch legitimately
				}
				if tok != ref.Generated[i] {
					t.Errorf("step %d: %d, reference %d", i, tok, ref.Generated[i])
					break
				}
			}
		})
	}
}

func TestStats(t *testing.T) {
	d := testDevice(t)
	m, ref := loadFixture(t, "llama")
	b, err := New(m, Options{Device: d, Chunk: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st0 := b.Stats()
	if st0.ResidentBytes <= 0 || st0.UploadBytes <= 0 || st0.WeightBytesToken <= 0 {
		t.Fatalf("stats after load: %+v", st0)
	}
	s, err := b.NewSession(64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forward(ref.InputIDs, false); err != nil { // 24 tokens, 3 chunks
		t.Fatal(err)
	}
	for range 8 {
		if _, err := s.Forward([]int{3}, false); err != nil {
			t.Fatal(err)
		}
	}
	st := b.Stats()
	if st.UploadBytes != st0.UploadBytes {
		t.Errorf("weights re-uploaded while generating: %d -> %d", st0.UploadBytes, st.UploadBytes)
	}
	// 3 prefill submits + 8 decode submits for 32 positions.
	if want := 11.0 / 32; st.SubmitsPerToken != want {
		t.Errorf("submits per token %v, want %v", st.SubmitsPerToken, want)
	}
	if st.ResidentBytes <= st0.ResidentBytes {
		t.Errorf("session memory not counted: %d -> %d", st0.ResidentBytes, st.ResidentBytes)
	}
	s.Close()
	if got := b.Stats().ResidentBytes; got != st0.ResidentBytes {
		t.Errorf("resident after session close %d, want %d", got, st0.ResidentBytes)
	}
}

// TestFaults proves every injected failure is an error, never logits, and
// that a failed session refuses further work.
func TestFaults(t *testing.T) {
	d := testDevice(t)
	m, ref := loadFixture(t, "qwen3")
	t.Run("pipeline", func(t *testing.T) {
		// A device of its own: the shared one has every pipeline cached.
		own, err := gpu.Open(gpu.Options{})
		if err != nil {
			t.Skip(err)
		}
		defer own.Close()
		own.Faults.PipelineBuild.Store(true)
		if _, err := New(m, Options{Device: own}); err == nil {
			t.Fatal("New succeeded with a failing pipeline build")
		}
		own.Faults.PipelineBuild.Store(false)
		b, err := New(m, Options{Device: own})
		if err != nil {
			t.Fatalf("New after the fault cleared: %v", err)
		}
		b.Close()
	})
	b, err := New(m, Options{Device: d})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, f := range []struct {
		name string
		arm  func()
	}{
		{"submit", func() { d.Faults.Submit.Store(true) }},
		{"readback", func() { d.Faults.Readback.Store(true) }},
	} {
		t.Run(f.name, func(t *testing.T) {
			s, err := b.newSession(64)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Forward(ref.InputIDs[:10], false); err != nil {
				t.Fatal(err)
			}
			f.arm()
			l, err := s.Forward(ref.InputIDs[10:12], false)
			if err == nil || l != nil {
				t.Fatalf("faulted Forward returned %d logits, err %v", len(l), err)
			}
			if _, err := s.Forward([]int{1}, false); err == nil {
				t.Fatal("session still usable after a fault")
			}
			if _, err := s.ForwardGreedy(1, 2); err == nil {
				t.Fatal("greedy still usable after a fault")
			}
			// Reset makes it usable again (the facade may also discard it).
			s.Reset()
			if _, err := s.Forward(ref.InputIDs[:3], false); err != nil {
				t.Fatalf("after Reset: %v", err)
			}
		})
	}
	t.Run("device lost mid-generation", func(t *testing.T) {
		own, err := gpu.Open(gpu.Options{})
		if err != nil {
			t.Skip(err)
		}
		defer own.Close()
		b, err := New(m, Options{Device: own})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		s, err := b.newSession(64)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ForwardGreedy(ref.InputIDs[0], 4); err != nil {
			t.Fatal(err)
		}
		own.Faults.LoseDevice.Store(true)
		ids, err := s.ForwardGreedy(ref.InputIDs[1], 4)
		if err == nil || ids != nil || !errors.Is(err, gpu.ErrDeviceLost) {
			t.Fatalf("after loss: ids %v err %v", ids, err)
		}
		if _, err := b.NewSession(8); !errors.Is(err, gpu.ErrDeviceLost) {
			t.Fatalf("new session on a lost device: %v", err)
		}
	})
}

// TestSoftwareAdapterDeclined: the registered opener declines a software
// adapter unless the scheduler allows it (backend.Options.AllowSoftware),
// with an error that is backend.ErrSoftware and ErrNoAdapter; Identify
// (no device) declines it alike and, allowed, names it as Open's Name.
func TestSoftwareAdapterDeclined(t *testing.T) {
	d := testDevice(t)
	if d.Info().Type != "cpu" {
		t.Skipf("adapter %q is not a software one", d.Info().Name)
	}
	m, _ := loadFixture(t, "llama")
	ctx := context.Background()
	if _, err := backend.Open(ctx, "webgpu", m, backend.Options{}); !errors.Is(err, gpu.ErrNoAdapter) || !errors.Is(err, backend.ErrSoftware) {
		t.Fatalf("software adapter not declined: %v", err)
	}
	// Identify names it without a device, declining it as Open does.
	if _, err := backend.Identify(ctx, "webgpu", m, backend.Options{}); !errors.Is(err, gpu.ErrNoAdapter) || !errors.Is(err, backend.ErrSoftware) {
		t.Fatalf("software adapter not declined by Identify: %v", err)
	}
	id, err := backend.Identify(ctx, "webgpu", m, backend.Options{AllowSoftware: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := backend.Open(ctx, "webgpu", m, backend.Options{AllowSoftware: true})
	if err != nil {
		t.Fatal(err)
	}
	if name := b.Name(); name != "webgpu:"+d.Info().Name || id != name {
		t.Errorf("Name %q, Identify %q", name, id)
	}
	b.Close()
}

// TestGraphOpsOnce guards the graph's construction: an op with a second
// bind group (the fused gate/up activation) must still be dispatched once.
func TestGraphOpsOnce(t *testing.T) {
	d := testDevice(t)
	m, _ := loadFixture(t, "llama")
	_, s := testSession(t, m, Options{Device: d, Chunk: 16}, 64)
	for i, ops := range s.layerOps {
		seen := map[*op]bool{}
		for _, o := range ops {
			if seen[o] {
				t.Errorf("layer %d: op %q appears twice", i, o.label)
			}
			seen[o] = true
		}
		var labels []string
		for _, d := range s.encodeLayers(nil, i, i+1, 1, 1, 8) {
			labels = append(labels, d.Label)
		}
		if slices.Contains(labels, "L0 act") || (i == 0 && !slices.Contains(labels, "L0 gate/up")) {
			t.Errorf("layer %d one-token dispatches %q: want the fused gate/up and no act", i, labels)
		}
	}
}

// TestLongPrefillGemm runs prompts long enough for the tiled GEMM (and a
// second chunk) through the graph: the last position's logits equal the
// CPU engine's, and the row-blocked kernel's, for a dense model with fused
// gate/up rows and one with biases and Gemma norms.
func TestLongPrefillGemm(t *testing.T) {
	d := testDevice(t)
	for _, name := range []string{"llama", "qwen2", "gemma3_text_sw8"} {
		t.Run(name, func(t *testing.T) {
			m, _ := loadFixture(t, name)
			n := 2*gemmMinTokens + 37
			if m.Arch.Context > 0 {
				n = min(n, m.Arch.Context-1)
			}
			if n < gemmMinTokens {
				t.Skipf("context %d is shorter than a GEMM step", m.Arch.Context)
			}
			ids := make([]int, n)
			for i := range ids {
				ids[i] = (i*7919 + 13) % m.Arch.Vocab
			}
			cb, err := cpu.New(m, cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer cb.Close()
			cs, err := cb.NewSession(n)
			if err != nil {
				t.Fatal(err)
			}
			want, err := cs.Forward(ids, false)
			if err != nil {
				t.Fatal(err)
			}
			run := func(gemm bool) []float32 {
				_, s := testSession(t, m, Options{Device: d, Chunk: gemmMinTokens + 64}, n)
				if !gemm {
					s.gemmReady = true // leave every matmul on the row-blocked kernel
				}
				got, err := s.Forward(ids, false)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range s.layerOps[0] {
					if gemm && o.gemmRows > 0 && o.gemm.p == nil {
						t.Fatalf("%s: the tiled GEMM was not used", o.label)
					}
				}
				return got
			}
			withGemm, rowBlocked := run(true), run(false)
			for i := range want {
				if d := math.Abs(float64(withGemm[i] - want[i])); d > 1e-4*max(1, math.Abs(float64(want[i]))) {
					t.Fatalf("logit %d: GEMM %g, CPU %g", i, withGemm[i], want[i])
				}
				if d := math.Abs(float64(withGemm[i] - rowBlocked[i])); d > 1e-4*max(1, math.Abs(float64(want[i]))) {
					t.Fatalf("logit %d: GEMM %g, row-blocked kernel %g", i, withGemm[i], rowBlocked[i])
				}
			}
		})
	}
}
