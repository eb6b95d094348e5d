package webgpu

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/tensor"
)

// TestAttnPrepFused: one-token steps with the qkv prep fused into the
// attention kernel (Tuning.AttnPrep "fused") and split-K attention's
// combine fused into the output projection (the default) give bit for bit
// the logits of both as their own dispatches (AttnPrep "", AttnCombine
// "separate") on every fixture family with attention, both KV codecs, the
// single-pass and split-K kernels (short and long spans), sliding-window rings, sinks, per-head q/k norms
// and greedy batches on the device.
func TestAttnPrepFused(t *testing.T) {
	d := testDevice(t)
	splitLenOverride = 8 // decode crosses from the single pass to split-K
	defer func() { splitLenOverride = 0 }()
	// The families, then llama with its weights in codecs whose output
	// projection the combining matvec reads (the staged kernel's codecs).
	names := slices.Concat(fixtures.Dense, fixtures.Hybrid, fixtures.InRepo)
	codecs := map[string]tensor.Codec{}
	for _, c := range []tensor.Codec{tensor.Q4_0, tensor.Q8_0, tensor.Q5_0, tensor.IQ4_NL} {
		codecs["llama/"+c.String()] = c
		names = append(names, "llama/"+c.String())
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c, quant := codecs[name]
			if quant {
				name = "llama"
			}
			m, ref := loadFixture(t, name)
			if quant {
				m = quantized(t, m, c)
			}
			for _, f16 := range []bool{false, true} {
				run := func(prep, comb string) (steps []float32, picks []int) {
					_, s := testSession(t, m, Options{Device: d, Chunk: 16, KVF16: f16, Tuning: Tuning{AttnPrep: prep, AttnCombine: comb}}, 64)
					// The fused steps have no prep dispatch; 2 and 40
					// positions: the single pass and split-K.
					for _, end := range []int{2, 40} {
						preps, attns, combs := 0, 0, 0
						for _, x := range s.encodeLayers(nil, 0, len(s.layerOps), 1, 1, end) {
							switch {
							case strings.HasSuffix(x.Label, " attention combine"):
								combs++
							case strings.HasSuffix(x.Label, " qkv prep"):
								preps++
							case strings.HasSuffix(x.Label, " attention"), strings.HasSuffix(x.Label, " attention split"):
								attns++
							}
						}
						if want := map[string]int{"fused": 0, "": attns}[prep]; attns == 0 || preps != want {
							t.Fatalf("AttnPrep %q, %d positions: %d prep and %d attention dispatches", prep, end, preps, attns)
						}
						if end == 40 && comb == "" && name == "llama" && combs != 0 {
							t.Fatalf("AttnCombine fused, %d positions: %d combine dispatches", end, combs)
						}
					}
					// A one-token prompt, then single steps fed the
					// reference's tokens over 24 positions.
					tok := ref.InputIDs[0]
					for i := range 24 {
						l, err := s.Forward([]int{tok}, false)
						if err != nil {
							t.Fatal(err)
						}
						steps = append(steps, l...)
						tok = ref.InputIDs[(i+1)%len(ref.InputIDs)]
					}
					// Then device-side greedy batches of 5.
					if s.GreedyOnDevice() {
						for range 3 {
							ids, err := s.ForwardGreedy(tok, 5)
							if err != nil {
								t.Fatal(err)
							}
							picks = append(picks, ids...)
							tok = ids[len(ids)-1]
						}
					}
					return steps, picks
				}
				ss, sp := run("", "separate")
				for _, c := range [][2]string{{"fused", ""}, {"fused", "separate"}, {"", ""}} {
					fs, fp := run(c[0], c[1])
					for i := range ss {
						if math.Float32bits(fs[i]) != math.Float32bits(ss[i]) {
							t.Fatalf("kv f16 %v, prep %q, combine %q: step %d logit %d: %g, all separate %g", f16, c[0], c[1], i/m.Arch.Vocab, i%m.Arch.Vocab, fs[i], ss[i])
						}
					}
					if !slices.Equal(fp, sp) {
						t.Fatalf("kv f16 %v, prep %q, combine %q: greedy picks %v, all separate %v", f16, c[0], c[1], fp, sp)
					}
				}
			}
		})
	}
}

// TestCombMaxSplits: a one-token step merges split attention's partials in
// its output projection up to combMaxSplits parts, beyond that it runs
// attn_combine (the merge lost there on the H200).
func TestCombMaxSplits(t *testing.T) {
	d := testDevice(t)
	splitLenOverride = 8
	defer func() { splitLenOverride = 0 }()
	m, _ := loadFixture(t, "llama")
	_, s := testSession(t, m, Options{Device: d, Chunk: 16}, 256)
	for _, c := range []struct {
		end        int
		sep, merge bool
	}{{40, false, true}, {8 * combMaxSplits, false, true}, {8*combMaxSplits + 8, true, false}, {250, true, false}} {
		var sep, merge bool
		for _, x := range s.encodeLayers(nil, 0, len(s.layerOps), 1, 1, c.end) {
			sep = sep || strings.HasSuffix(x.Label, " attention combine")
			merge = merge || strings.HasSuffix(x.Label, " o (combine)")
		}
		if sep != c.sep || merge != c.merge {
			t.Errorf("%d positions: attn_combine %v, merged in o %v; want %v, %v", c.end, sep, merge, c.sep, c.merge)
		}
	}
}
