package diffusion

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func synthDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "zimage-synth")
	if err := WriteSynthetic(dir, TinySynth()); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSyntheticPipeline runs a random tiny pipeline end to end: shapes,
// range, determinism, given latents equal to the seeded ones, and CFG.
func TestSyntheticPipeline(t *testing.T) {
	p, err := Open(synthDir(t), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if m := p.SizeMultiple(); m != 16 {
		t.Errorf("size multiple %d, want 16", m)
	}
	o := Options{Prompt: "a cat", Width: 64, Height: 48, Steps: 3, Seed: 7}
	var steps []int
	o.Progress = func(i, n int) { steps = append(steps, i) }
	a, err := p.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(steps, []int{1, 2, 3}) {
		t.Errorf("progress calls %v", steps)
	}
	if len(a.Image) != 3*64*48 || len(a.StepLatents) != 3 {
		t.Fatalf("image of %d values, %d step latents", len(a.Image), len(a.StepLatents))
	}
	C, h, w := p.LatentShape(64, 48)
	if C != 16 || h != 6 || w != 8 || len(a.Latents) != C*h*w {
		t.Errorf("latent shape %d×%d×%d (%d values)", C, h, w, len(a.Latents))
	}
	var lo, hi float32 = 1, 0
	for _, v := range a.Image {
		if math.IsNaN(float64(v)) {
			t.Fatal("NaN in the image")
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo < 0 || hi > 1 || lo == hi {
		t.Errorf("image range [%v, %v]", lo, hi)
	}
	b, err := p.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Image, b.Image) {
		t.Error("two runs with one seed differ")
	}
	// The seeded noise is what Latents would give.
	o2 := o
	o2.Seed = 8
	c, _ := p.Generate(o2)
	if slices.Equal(a.Image, c.Image) {
		t.Error("seeds 7 and 8 gave the same image")
	}
	// Guidance with a negative prompt changes the result and stays finite.
	o3 := o
	o3.Guidance, o3.Negative = 3, "blurry"
	g, err := p.Generate(o3)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a.Image, g.Image) {
		t.Error("guidance had no effect")
	}
	// Given latents: diffusers' shape check.
	o4 := o
	o4.Latents = make([]float32, 10)
	if _, err := p.Generate(o4); err == nil {
		t.Error("latents of the wrong size: no error")
	}
}

// TestOpenErrors: a bad directory, a missing component, a size off the
// grid and a prompt beyond the text encoder's context are clear errors.
func TestOpenErrors(t *testing.T) {
	dir := synthDir(t)
	if _, err := Open(filepath.Join(dir, "nope"), OpenOptions{}); err == nil {
		t.Error("missing directory: no error")
	}
	if _, err := Open(filepath.Join(dir, "vae"), OpenOptions{}); err == nil || !strings.Contains(err.Error(), "model_index.json") {
		t.Errorf("directory without model_index.json: %v", err)
	}
	p, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckSize(60, 48); err == nil || !strings.Contains(err.Error(), "multiples of 16") {
		t.Errorf("size 60x48: %v", err)
	}
	long := strings.Repeat("a very long prompt ", 20)
	if _, err := p.Generate(Options{Prompt: long, Width: 32, Height: 32, Steps: 1}); !errors.Is(err, ErrPromptTooLong) {
		t.Errorf("long prompt: %v", err)
	}
	p.Close()

	if err := os.RemoveAll(filepath.Join(dir, "vae")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, OpenOptions{}); err == nil || !strings.Contains(err.Error(), "missing component vae/") {
		t.Errorf("missing vae/: %v", err)
	}
}

// TestDiTQuant: q8_0 and q4_0 transformer blocks stay close to the float
// weights (relative RMS error of one forward; Gaussian random weights are
// the worst case for 4 bits: ~0.23 here), and unknown codecs are refused.
func TestDiTQuant(t *testing.T) {
	dir := synthDir(t)
	ref, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	C, h, w := ref.LatentShape(64, 64)
	lat := make([]float32, C*h*w)
	for i := range lat {
		lat[i] = float32(math.Sin(float64(i)))
	}
	f, err := ref.Encode("a cat")
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.DiT.Forward(lat, h, w, 0.4, f.Data, f.Rows)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		name string
		tol  float64
	}{{"q8_0", 0.03}, {"q4_0", 0.35}} {
		p, err := Open(dir, OpenOptions{DiTQuant: q.name})
		if err != nil {
			t.Fatal(err)
		}
		if c := p.DiT.layers[0].q.w.Codec.String(); c != q.name {
			t.Errorf("%s: to_q is %s", q.name, c)
		}
		got, err := p.DiT.Forward(lat, h, w, 0.4, f.Data, f.Rows)
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		var se, ss float64
		for i := range got {
			d := float64(got[i] - want[i])
			se += d * d
			ss += float64(want[i]) * float64(want[i])
		}
		rel := math.Sqrt(se / ss)
		t.Logf("%s: relative RMS error %.4f", q.name, rel)
		if rel > q.tol || rel == 0 {
			t.Errorf("%s: relative RMS error %.4f (tolerance %g)", q.name, rel, q.tol)
		}
	}
	if _, err := Open(dir, OpenOptions{DiTQuant: "q3_x"}); err == nil {
		t.Error("unknown quantization: no error")
	}
}
