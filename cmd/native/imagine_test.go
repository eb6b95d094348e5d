package main

import (
	"bytes"
	"encoding/binary"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/tensor"
)

// TestImagine: cortiq imagine on a random tiny Z-Image writes a PNG of the
// asked size and, with --raw-out, the float image that rounds to it; given
// --latents, the run is reproducible from the noise alone.
func TestImagine(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "zimage")
	if err := diffusion.WriteSynthetic(model, diffusion.TinySynth()); err != nil {
		t.Fatal(err)
	}
	// Noise [1, 16, 6, 8] for a 64x48 image (VAE scale 8).
	noise := make([]byte, 4*16*6*8)
	for i := range 16 * 6 * 8 {
		binary.LittleEndian.PutUint32(noise[4*i:], math.Float32bits(float32(math.Sin(float64(i)))))
	}
	lat := filepath.Join(dir, "noise.safetensors")
	f, _ := os.Create(lat)
	safetensors.Write(f, []*tensor.Tensor{{Name: "latents", Codec: tensor.F32, Shape: []int{1, 16, 6, 8}, Data: noise}})
	f.Close()

	out, raw := filepath.Join(dir, "a.png"), filepath.Join(dir, "a.safetensors")
	cortiq(t, nil, "imagine", "-m", model, "-p", "a red fox", "--steps", "2", "--size", "64x48",
		"--latents", lat, "--raw-out", raw, "--guidance", "1.5", "--negative", "blurry", "-o", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	im, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if r := im.Bounds(); r.Dx() != 64 || r.Dy() != 48 {
		t.Fatalf("PNG is %dx%d, want 64x48", r.Dx(), r.Dy())
	}
	rf, err := safetensors.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	info, _ := rf.Info("image")
	if len(info.Shape) != 3 || info.Shape[0] != 3 || info.Shape[1] != 48 || info.Shape[2] != 64 {
		t.Fatalf("raw image shape %v, want [3 48 64]", info.Shape)
	}
	img, _ := rf.Float32s("image")
	r8, _, _, _ := im.At(5, 7).RGBA()
	if want := uint32(math.RoundToEven(float64(img[7*64+5] * 255))); r8>>8 != want {
		t.Errorf("pixel (5,7) red %d, raw %v rounds to %d", r8>>8, img[7*64+5], want)
	}
	// Same noise, same image.
	out2 := filepath.Join(dir, "b.png")
	cortiq(t, nil, "imagine", "-m", model, "-p", "a red fox", "--steps", "2", "--size", "64x48",
		"--latents", lat, "--guidance", "1.5", "--negative", "blurry", "-o", out2)
	if b2, _ := os.ReadFile(out2); !bytes.Equal(b, b2) {
		t.Error("same latents, different PNG")
	}
}

// TestImagineErrors: bad input is a clear error and leaves no file.
func TestImagineErrors(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "zimage")
	if err := diffusion.WriteSynthetic(model, diffusion.TinySynth()); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken")
	if err := diffusion.WriteSynthetic(broken, diffusion.TinySynth()); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(broken, "transformer"))
	// variant is a copy of the model that edit breaks.
	variant := func(name string, edit func(m string)) string {
		m := filepath.Join(dir, name)
		if err := diffusion.WriteSynthetic(m, diffusion.TinySynth()); err != nil {
			t.Fatal(err)
		}
		edit(m)
		return m
	}
	missing := map[string]string{}
	for _, c := range []string{"vae", "text_encoder", "tokenizer", "scheduler"} {
		missing[c] = variant("no-"+c, func(m string) { os.RemoveAll(filepath.Join(m, c)) })
	}
	noWeights := variant("no-weights", func(m string) { os.Remove(filepath.Join(m, "vae", "diffusion_pytorch_model.safetensors")) })
	truncated := variant("truncated", func(m string) {
		os.Truncate(filepath.Join(m, "transformer", "diffusion_pytorch_model.safetensors"), 100)
	})
	badConfig := variant("bad-config", func(m string) { os.WriteFile(filepath.Join(m, "vae", "config.json"), []byte("{"), 0o644) })
	long := strings.Repeat("a long prompt ", 20)
	out := filepath.Join(dir, "out.png")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-m", filepath.Join(dir, "nothing"), "-p", "x"}, "no such file"},
		{[]string{"-m", dir, "-p", "x"}, "no model_index.json"},
		{[]string{"-m", broken, "-p", "x"}, "missing component transformer/"},
		{[]string{"-m", model, "-p", "x", "--size", "60x48"}, "multiples of 16"},
		{[]string{"-m", model, "-p", "x", "--size", "64"}, "WIDTHxHEIGHT"},
		{[]string{"-m", missing["vae"], "-p", "x"}, "missing component vae/"},
		{[]string{"-m", missing["text_encoder"], "-p", "x"}, "missing component text_encoder/"},
		{[]string{"-m", missing["tokenizer"], "-p", "x"}, "missing component tokenizer/"},
		{[]string{"-m", missing["scheduler"], "-p", "x"}, "missing component scheduler/"},
		{[]string{"-m", noWeights, "-p", "x"}, filepath.Join("no-weights", "vae") + ": no model.safetensors"},
		{[]string{"-m", truncated, "-p", "x"}, "diffusion_pytorch_model.safetensors: header length"},
		{[]string{"-m", badConfig, "-p", "x"}, filepath.Join("bad-config", "vae", "config.json")},
		{[]string{"-m", model, "-p", long, "--size", "32x32"}, "prompt too long"},
		{[]string{"-m", model, "-p", "x", "--guidance", "2", "--negative", long, "--size", "32x32"}, "negative prompt"},
		{[]string{"-m", model, "-p", "x", "--size", "32x32", "--raw-out", filepath.Join(dir, "none", "raw.safetensors")}, "does not exist"},
		{[]string{"-m", model, "-p", "x", "--size", "32x32", "--latents", filepath.Join(dir, "none.safetensors")}, "none.safetensors"},
		{[]string{"-m", model, "-p", "x", "--backend", "metal"}, "want auto, cpu, webgpu or cuda"},
	}
	for _, c := range cases {
		args := append([]string{"imagine", "--steps", "1", "-o", out}, c.args...)
		msg := cortiqFails(t, args...)
		if !strings.Contains(msg, c.want) {
			t.Errorf("%v: error %q does not say %q", c.args, strings.TrimSpace(msg), c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v: %s was written", c.args, out)
		}
	}
	// An output that already exists is left as it was by a failing run.
	if err := os.WriteFile(out, []byte("the user's file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-m", model, "-p", long, "--size", "32x32"},
		{"-m", model, "-p", "x", "--size", "40x40"},
	} {
		cortiqFails(t, append([]string{"imagine", "--steps", "1", "-o", out}, args...)...)
		if b, err := os.ReadFile(out); err != nil || string(b) != "the user's file" {
			t.Errorf("%v: the existing %s is now %q (%v)", args, out, b, err)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".out.png") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestImagineParity: cortiq imagine on the tiny Z-Image of
// diffusion/testdata with diffusers' initial noise gives diffusers' image
// (PSNR ≥ 60 dB on the float output, and the PNG is its rounding).
func TestImagineParity(t *testing.T) {
	imagineVsDiffusers(t, "nocfg")
	imagineVsDiffusers(t, "cfg", "--guidance", "", "--negative", "")
}

// imagineVsDiffusers runs cortiq imagine on the tiny Z-Image of
// diffusion/testdata (skipping without it) with diffusers' prompt, size,
// steps and initial noise, and extra arguments (an empty value after
// --guidance or --negative takes diffusers' own), and checks the float
// image against diffusers' key+"_image" (PSNR ≥ 60 dB). It returns what
// cortiq wrote to stderr.
func imagineVsDiffusers(t *testing.T, key string, extra ...string) string {
	t.Helper()
	ref := filepath.Join("..", "..", "diffusion", "testdata", "zimage")
	model := filepath.Join(ref, "zimage-tiny")
	if _, err := os.Stat(filepath.Join(model, "model_index.json")); err != nil {
		t.Skipf("reference model not found at %s: %v", model, err)
	}
	rf, err := safetensors.Open(filepath.Join(ref, "ref_pipeline.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	md := rf.Metadata()
	for i := 1; i < len(extra); i++ {
		if extra[i] == "" && (extra[i-1] == "--guidance" || extra[i-1] == "--negative") {
			extra[i] = md[strings.TrimPrefix(extra[i-1], "--")]
		}
	}
	dir := t.TempDir()
	out, raw := filepath.Join(dir, key+".png"), filepath.Join(dir, key+".safetensors")
	args := append([]string{"imagine", "-m", model, "-p", md["prompt"], "--steps", md["steps"],
		"--size", md["width"] + "x" + md["height"], "--latents", filepath.Join(ref, "ref_pipeline.safetensors"),
		"--raw-out", raw, "-o", out}, extra...)
	cmd := exec.Command(cortiqBin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cortiq %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	got := readImage(t, raw)
	want, err := rf.Float32s(key + "_image")
	if err != nil {
		t.Fatal(err)
	}
	var se float64
	for i := range want {
		d := float64(got[i] - want[i])
		se += d * d
	}
	psnr := 10 * math.Log10(float64(len(want))/se)
	t.Logf("%s %v: PSNR %.1f dB", key, extra, psnr)
	if psnr < 60 {
		t.Errorf("%s %v: PSNR %.1f dB < 60", key, extra, psnr)
	}
	return stderr.String()
}

func readImage(t *testing.T, path string) []float32 {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := f.Float32s("image")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestImportPipelineCMF: cortiq import turns a diffusers directory into one
// CMF file that cortiq imagine runs to the same image.
func TestImportPipelineCMF(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "zimage")
	if err := diffusion.WriteSynthetic(model, diffusion.TinySynth()); err != nil {
		t.Fatal(err)
	}
	c := filepath.Join(dir, "zimage.cmf")
	cortiq(t, nil, "import", model, "-o", c)
	if msg := cortiqFails(t, "import", model, "-o", filepath.Join(dir, "bad.cmf"), "--quant", "f16"); !strings.Contains(msg, "q8_0 or q4_0") {
		t.Errorf("--quant f16 on a pipeline: %q", msg)
	}
	a, b := filepath.Join(dir, "a.png"), filepath.Join(dir, "b.png")
	cortiq(t, nil, "imagine", "-m", model, "-p", "fox", "--steps", "2", "--size", "32x32", "-o", a)
	cortiq(t, nil, "imagine", "-m", c, "-p", "fox", "--steps", "2", "--size", "32x32", "-o", b)
	pa, _ := os.ReadFile(a)
	pb, _ := os.ReadFile(b)
	if len(pa) == 0 || !bytes.Equal(pa, pb) {
		t.Error("the CMF pipeline's PNG differs from the directory's")
	}
}

// TestImagineWebGPU: with --backend webgpu (transformer blocks and VAE
// decoder on the device) the image still matches diffusers' (PSNR ≥ 60 dB).
func TestImagineWebGPU(t *testing.T) {
	if dev, err := gpu.Open(gpu.Options{}); err != nil {
		t.Skipf("no WebGPU adapter: %v", err)
	} else {
		dev.Close()
	}
	imagineVsDiffusers(t, "nocfg", "--backend", "webgpu")
}

// TestImagineCUDA: with --backend cuda the transformer blocks run on the
// CUDA device where there is one, and where there is not (CI) the run
// says why on stderr and finishes as auto; either way the image matches
// diffusers' (PSNR ≥ 60 dB).
func TestImagineCUDA(t *testing.T) {
	stderr := imagineVsDiffusers(t, "nocfg", "--backend", "cuda")
	loaded := ""
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "imagine: loaded") {
			loaded = l
		}
	}
	t.Log(loaded)
	if !strings.Contains(loaded, "cuda refused (") && !strings.Contains(loaded, "transformer blocks on cuda:") {
		t.Errorf("--backend cuda: the load line says neither where the transformer runs nor why not: %q", loaded)
	}
}
