package webgpu

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// TestAttnPrepFused: one-token steps with the qkv prep fused into the
// attention kernel (the default) give bit for bit the logits of the prep
// as its own dispatch (Tuning.AttnPrep "separate") on every fixture family
// with attention, both KV codecs, the single-pass and split-K kernels
// (short and long spans), sliding-window rings, sinks, per-head q/k norms
// and greedy batches on the device.
func TestAttnPrepFused(t *testing.T) {
	d := testDevice(t)
	splitLenOverride = 8 // decode crosses from the single pass to split-K
	defer func() { splitLenOverride = 0 }()
	for _, name := range slices.Concat(fixtures.Dense, fixtures.Hybrid, fixtures.InRepo) {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			for _, f16 := range []bool{false, true} {
				run := func(prep string) (steps []float32, picks []int) {
					_, s := testSession(t, m, Options{Device: d, Chunk: 16, KVF16: f16, Tuning: Tuning{AttnPrep: prep}}, 64)
					// The fused steps have no prep dispatch; 2 and 40
					// positions: the single pass and split-K.
					for _, end := range []int{2, 40} {
						preps, attns := 0, 0
						for _, x := range s.encodeLayers(nil, 0, len(s.layerOps), 1, 1, end) {
							switch {
							case strings.HasSuffix(x.Label, " qkv prep"):
								preps++
							case strings.HasSuffix(x.Label, " attention"), strings.HasSuffix(x.Label, " attention split"):
								attns++
							}
						}
						if want := map[string]int{"": 0, "separate": attns}[prep]; attns == 0 || preps != want {
							t.Fatalf("AttnPrep %q, %d positions: %d prep and %d attention dispatches", prep, end, preps, attns)
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
				fs, fp := run("")
				ss, sp := run("separate")
				for i := range ss {
					if math.Float32bits(fs[i]) != math.Float32bits(ss[i]) {
						t.Fatalf("kv f16 %v: step %d logit %d: fused %g, separate %g", f16, i/m.Arch.Vocab, i%m.Arch.Vocab, fs[i], ss[i])
					}
				}
				if !slices.Equal(fp, sp) {
					t.Fatalf("kv f16 %v: greedy picks fused %v, separate %v", f16, fp, sp)
				}
			}
		})
	}
}
