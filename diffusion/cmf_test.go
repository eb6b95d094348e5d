package diffusion

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/importer"
)

// TestCMFRoundTrip: a pipeline saved as one CMF file generates exactly the
// image its diffusers directory does; with q8_0 transformer blocks the
// file is smaller and the image close; the VAE encoder is left out; the
// LLM importer refuses the file, naming cortiq imagine.
func TestCMFRoundTrip(t *testing.T) {
	dir := filepath.Join(refDir, "zimage-tiny")
	if _, err := os.Stat(filepath.Join(dir, "model_index.json")); err != nil {
		dir = synthDir(t)
	}
	out := t.TempDir()
	path := filepath.Join(out, "zimage.cmf")
	if err := SaveCMF(dir, path, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	o := Options{Prompt: "a red fox", Width: 96, Height: 64, Steps: 3, Guidance: 2, Negative: "blurry", Seed: 3}
	gen := func(path string, opts OpenOptions) *Result {
		t.Helper()
		p, err := Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		r, err := p.Generate(o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	want := gen(dir, OpenOptions{})
	if got := gen(path, OpenOptions{}); !slices.Equal(got.Image, want.Image) {
		t.Error("the CMF pipeline's image differs from the directory's")
	}

	f, err := cmf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Verify(); err != nil {
		t.Error(err)
	}
	for _, n := range f.Names() {
		if strings.HasPrefix(n, "vae/encoder.") {
			t.Errorf("the VAE encoder's %s is in the file", n)
			break
		}
	}
	if !IsPipelineCMF(f) {
		t.Error("IsPipelineCMF is false")
	}
	f.Close()
	if _, err := importer.FromCMF(path); err == nil || !strings.Contains(err.Error(), "imagine") {
		t.Errorf("importer.FromCMF on a pipeline: %v", err)
	}

	q := filepath.Join(out, "zimage-q8.cmf")
	if err := SaveCMF(dir, q, SaveOptions{DiTQuant: "q8_0"}); err != nil {
		t.Fatal(err)
	}
	s1, _ := os.Stat(path)
	s2, _ := os.Stat(q)
	if s2.Size() >= s1.Size() {
		t.Errorf("q8_0 file %d bytes, f32 file %d", s2.Size(), s1.Size())
	}
	if qp, err := Open(q, OpenOptions{}); err != nil {
		t.Fatal(err)
	} else {
		if qp.DiTQuant != "q8_0" {
			t.Errorf("the q8_0 file's pipeline says DiTQuant %q", qp.DiTQuant)
		}
		qp.Close()
	}
	got := gen(q, OpenOptions{})
	if ps := psnr(got.Image, want.Image); ps < 30 {
		t.Errorf("q8_0 transformer: image PSNR %.1f dB against float weights", ps)
	} else {
		t.Logf("q8_0 transformer: %d -> %d bytes, image PSNR %.1f dB", s1.Size(), s2.Size(), ps)
	}
	if err := SaveCMF(dir, filepath.Join(out, "x.cmf"), SaveOptions{DiTQuant: "q5"}); err == nil {
		t.Error("unknown quantization: no error")
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") || e.Name() == "x.cmf" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
