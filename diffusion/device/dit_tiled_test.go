package device

import (
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// TestDiTBindingsBrowser: at 1024² with Z-Image-Turbo's shapes, every
// buffer the runner binds fits the browser's 128 MiB bindings once the
// weights are banded and the feed-forward chunked (for a short and the
// longest caption, one input; a guidance batch over the limit runs per
// input). The sizes before banding and chunking are logged.
func TestDiTBindingsBrowser(t *testing.T) {
	const limit = 128 << 20
	sh := diffusion.ZImageTurboSynth().DiT
	s := &diffusion.DiTSpec{Dim: sh.Dim, Heads: sh.Heads, HeadDim: sh.Dim / sh.Heads, FFN: int(float64(sh.Dim) / 3 * 8)}
	ffn := (s.FFN + 3) &^ 3
	for _, capRows := range []int{32, 512} {
		rows := 64*64 + capRows // 1024² → a 128² latent → 64² patches of 2x2
		for _, c := range []tensor.Codec{tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_0} {
			bs := DiTBindings(s, rows, c)
			var names []string
			for k := range bs {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				over := ""
				if bs[k] > limit {
					over = " (over 128 MiB: split)"
				}
				t.Logf("1024², %d caption rows, %s weights: %s %.1f MiB%s", capRows, c, k, float64(bs[k])/(1<<20), over)
			}
			if st := uint64(4 * rows * s.Dim); st > limit {
				t.Errorf("%d rows: a stream buffer of %d bytes exceeds the limit", rows, st)
			}
			if ch := ffnChunk(limit, ffn, rows); uint64(4*ch*ffn) > limit || ch < 1 {
				t.Errorf("%d rows: a feed-forward chunk of %d rows is %d bytes", rows, ch, 4*ch*ffn)
			}
			for _, m := range []struct{ out, in int }{{s.Dim, s.Dim}, {2 * ffn, s.Dim}, {s.Dim, ffn}} {
				cc := c
				if m.in%32 != 0 {
					cc = tensor.F32
				}
				rb, _ := tensor.ByteLen(cc, []int{1, m.in})
				per := bandRows(limit, uint64(rb))
				if per < 2 || uint64(per*int(rb))+64 > limit {
					t.Errorf("%s %dx%d: bands of %d rows of %d bytes", c, m.out, m.in, per, rb)
				}
			}
		}
	}
}

// TestDiTRunnerTiled: with a small forced binding limit (matrices in many
// row bands, the feed-forward in chunks of a few rows, a guidance batch
// per input) and with the other GEMM tiling and attention rows split over
// four threads a forward gives the unsplit runner's output bit for bit, with f32 and q8_0 weights.
func TestDiTRunnerTiled(t *testing.T) {
	ref := filepath.Join("..", "testdata", "zimage")
	model := filepath.Join(ref, "zimage-tiny")
	if _, err := os.Stat(filepath.Join(model, "model_index.json")); err != nil {
		t.Skipf("reference model not found at %s: %v", model, err)
	}
	d := testDevice(t)
	f := refTransformer(t, ref)
	x, _ := f.Float32s("x")
	tt, _ := f.Float32s("t")
	cap1, _ := f.Float32s("cap_feats")
	cap2, _ := f.Float32s("cap_feats2")
	xi, _ := f.Info("x")
	c1, _ := f.Info("cap_feats")
	c2, _ := f.Info("cap_feats2")
	for _, c := range []tensor.Codec{tensor.F32, tensor.Q8_0} {
		quant := ""
		if c != tensor.F32 {
			quant = c.String()
		}
		p, err := diffusion.Open(model, diffusion.OpenOptions{DiTQuant: quant})
		if err != nil {
			t.Fatal(err)
		}
		spec, err := p.DiT.Spec()
		if err != nil {
			t.Fatal(err)
		}
		forward := func(opts DiTOptions) [][]float32 {
			opts.Codec = c
			run, err := NewDiTRunner(d, spec, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer run.Close()
			p.DiT.SetDevice(run)
			ys, err := p.DiT.ForwardBatch(x, xi.Shape[2], xi.Shape[3], tt[0], [][]float32{cap1, cap2}, []int{c1.Shape[0], c2.Shape[0]})
			if err != nil {
				t.Fatal(err)
			}
			return ys
		}
		whole := forward(DiTOptions{})
		// 4 KiB: f32 bands of 14 rows (W1/W3: 25 bands), feed-forward
		// chunks of 5 rows.
		split := forward(DiTOptions{MaxBinding: 4 << 10})
		// Another GEMM tiling (each output is one fma chain either way),
		// four threads per attention row (each the same scores).
		large := forward(DiTOptions{Gemm: shaders.GemmLarge(), AttnSplit: 4})
		p.Close()
		for i := range whole {
			for j := range whole[i] {
				if math.Float32bits(whole[i][j]) != math.Float32bits(split[i][j]) || math.Float32bits(whole[i][j]) != math.Float32bits(large[i][j]) {
					t.Fatalf("%s, caption %d: value %d split %g, GemmLarge and split attention %g, whole %g", c, i, j, split[i][j], large[i][j], whole[i][j])
				}
			}
		}
		t.Logf("%s: split under a 4 KiB binding limit = GemmLarge's with split attention = whole, bit for bit", c)
	}
}

// TestDiTRunnerRecorded: a forward keeps its recorded evaluation, the next
// forward of the same layout reuses it with the same result, and a
// generation's end (diffusion.DiTTrimmer) releases it.
func TestDiTRunnerRecorded(t *testing.T) {
	d, p, ref := tinyPipeline(t)
	spec, err := p.DiT.Spec()
	if err != nil {
		t.Fatal(err)
	}
	run, err := NewDiTRunner(d, spec, DiTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	p.DiT.SetDevice(run)
	f := refTransformer(t, ref)
	x, _ := f.Float32s("x")
	tt, _ := f.Float32s("t")
	cap1, _ := f.Float32s("cap_feats")
	xi, _ := f.Info("x")
	ci, _ := f.Info("cap_feats")
	a, err := p.DiT.Forward(x, xi.Shape[2], xi.Shape[3], tt[0], cap1, ci.Shape[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(run.recs) != 1 {
		t.Fatalf("%d recorded evaluations after a forward, want 1", len(run.recs))
	}
	var rec *ditRun
	for _, r := range run.recs {
		rec = r
	}
	b, err := p.DiT.Forward(x, xi.Shape[2], xi.Shape[3], tt[0], cap1, ci.Shape[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range run.recs {
		if len(run.recs) != 1 || r != rec {
			t.Fatalf("the second forward of the layout recorded anew")
		}
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("value %d: %g replayed, %g recorded", i, b[i], a[i])
		}
	}
	if _, err := p.Generate(diffusion.Options{Prompt: "a cat", Width: 64, Height: 64, Steps: 2}); err != nil {
		t.Fatal(err)
	}
	if len(run.recs) != 0 {
		t.Errorf("%d recorded evaluations after a generation, want 0 (trimmed)", len(run.recs))
	}
}
