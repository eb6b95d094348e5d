package diffusion

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/cortiq/cortiq/safetensors"
)

// The parity tests compare each component and the whole pipeline with
// diffusers (float32, CPU) on the tiny random Z-Image that
// scripts/gen_image_reference.py makes; testdata/zimage holds its output.

const (
	parityTol = 1e-4 // absolute, per component
	minPSNR   = 60   // dB, whole image
)

var refDir = filepath.Join("testdata", "zimage")

func needRefs(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(refDir, "zimage-tiny", "model_index.json")); err != nil {
		t.Skipf("reference model not found at %s (make it with scripts/gen_image_reference.py): %v", filepath.Join(refDir, "zimage-tiny"), err)
	}
}

var (
	pipeOnce sync.Once
	pipeErr  error
	pipeRef  *Pipeline
)

func tinyPipeline(t testing.TB) *Pipeline {
	t.Helper()
	needRefs(t)
	pipeOnce.Do(func() { pipeRef, pipeErr = Open(filepath.Join(refDir, "zimage-tiny"), OpenOptions{}) })
	if pipeErr != nil {
		t.Fatal(pipeErr)
	}
	return pipeRef
}

type refFile struct {
	*safetensors.File
	t testing.TB
}

func openRef(t testing.TB, name string) refFile {
	t.Helper()
	path := filepath.Join(refDir, name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("reference %s not found: %v", path, err)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return refFile{f, t}
}

func (r refFile) has(name string) bool { _, ok := r.Info(name); return ok }

func (r refFile) f32(name string) []float32 {
	r.t.Helper()
	v, err := r.Float32s(name)
	if err != nil {
		r.t.Fatal(err)
	}
	return v
}

func (r refFile) ints(name string) []int {
	r.t.Helper()
	v, err := r.Int64s(name)
	if err != nil {
		r.t.Fatal(err)
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

func (r refFile) shape(name string) []int {
	in, _ := r.Info(name)
	return in.Shape
}

func maxDiff(a, b []float32) (float64, int) {
	if len(a) != len(b) {
		return math.Inf(1), -1
	}
	var m float64
	at := -1
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d > m || math.IsNaN(d) {
			m, at = d, i
		}
	}
	return m, at
}

func psnr(a, b []float32) float64 {
	var se float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		se += d * d
	}
	if se == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(1/(se/float64(len(a))))
}

func TestTextEncoderParity(t *testing.T) {
	p := tinyPipeline(t)
	r := openRef(t, "ref_text_encoder.safetensors")
	md := r.Metadata()
	for _, key := range []string{"prompt", "negative", "empty"} {
		t.Run(key, func(t *testing.T) {
			if !r.has(key + "_input_ids") {
				t.Skipf("no %s in the reference", key)
			}
			text := md[key+"_text"]
			rendered, err := p.TextEncoder.Render(text)
			if err != nil {
				t.Fatal(err)
			}
			if want, ok := md[key+"_rendered"]; ok && rendered != want {
				t.Errorf("chat template renders %q, transformers %q", rendered, want)
			}
			ids, err := p.TextEncoder.Tokens(text)
			if err != nil {
				t.Fatal(err)
			}
			if want := r.ints(key + "_input_ids"); !slices.Equal(ids, want) {
				t.Fatalf("ids %v, want %v", ids, want)
			}
			f, err := p.Encode(text)
			if err != nil {
				t.Fatal(err)
			}
			if d, at := maxDiff(f.Data, r.f32(key+"_embeds")); d > parityTol {
				t.Errorf("caption features (hidden_states[-2]): max |diff| %.3g at %d", d, at)
			} else {
				t.Logf("%d tokens, caption features max |diff| %.3g", f.Rows, d)
			}
		})
	}
}

func TestDiTParity(t *testing.T) {
	p := tinyPipeline(t)
	r := openRef(t, "ref_transformer.safetensors")
	if d, at := maxDiff(p.DiT.TimestepEmbedding(r.f32("t")[0]), r.f32("t_emb")); d > parityTol {
		t.Errorf("timestep embedding: max |diff| %.3g at %d", d, at)
	}
	for _, sfx := range []string{"", "2"} {
		xs := r.shape("x" + sfx) // [C, 1, H, W]
		H, W := xs[2], xs[3]
		cap := r.f32("cap_feats" + sfx)
		rows := r.shape("cap_feats" + sfx)[0]
		out, err := p.DiT.Forward(r.f32("x"+sfx), H, W, r.f32("t" + sfx)[0], cap, rows)
		if err != nil {
			t.Fatal(err)
		}
		if d, at := maxDiff(out, r.f32("out"+sfx)); d > parityTol {
			t.Errorf("forward %q (%d caption rows): max |diff| %.3g at %d", sfx, rows, d, at)
		} else {
			t.Logf("forward %q (%d caption rows): max |diff| %.3g", sfx, rows, d)
		}
	}
}

func TestSchedulerParity(t *testing.T) {
	r := openRef(t, "ref_scheduler.safetensors")
	seq := 0
	for _, c := range r.Metadata()["seq_len"] {
		seq = seq*10 + int(c-'0')
	}
	cases := []struct {
		name, cfg string
		n         int
	}{
		{"shift3_n5", `{"num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": false}`, 5},
		{"shift3_n8", `{"num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": false}`, 8},
		{"shift1_n4", `{"num_train_timesteps": 1000, "shift": 1.0, "use_dynamic_shifting": false}`, 4},
		{"dynamic_n6", `{"num_train_timesteps": 1000, "shift": 1.0, "use_dynamic_shifting": true, "base_shift": 0.5, "max_shift": 1.15, "base_image_seq_len": 256, "max_image_seq_len": 4096}`, 6},
	}
	for _, c := range cases {
		if !r.has(c.name + "_sigmas") {
			continue
		}
		s, err := ParseScheduler([]byte(c.cfg))
		if err != nil {
			t.Fatal(err)
		}
		sig, ts, err := s.Sigmas(c.n, seq)
		if err != nil {
			t.Fatal(err)
		}
		if d, at := maxDiff(sig, r.f32(c.name+"_sigmas")); d > 1e-6 {
			t.Errorf("%s sigmas: max |diff| %.3g at %d: %v vs %v", c.name, d, at, sig, r.f32(c.name+"_sigmas"))
		}
		if d, at := maxDiff(ts, r.f32(c.name+"_timesteps")); d > 1e-3 {
			t.Errorf("%s timesteps: max |diff| %.3g at %d", c.name, d, at)
		}
	}
	s, _ := ParseScheduler([]byte(cases[0].cfg))
	sig, _, _ := s.Sigmas(5, seq)
	i := r.ints("step_index")[0]
	x := r.f32("step_sample")
	Step(x, r.f32("step_model_output"), sig[i], sig[i+1])
	if d, at := maxDiff(x, r.f32("step_prev_sample")); d > parityTol {
		t.Errorf("Euler step: max |diff| %.3g at %d", d, at)
	}
}

func TestVAEParity(t *testing.T) {
	p := tinyPipeline(t)
	r := openRef(t, "ref_vae.safetensors")
	zs := r.shape("latents") // [1, C, h, w]
	h, w := zs[2], zs[3]
	dec, err := p.VAE.Decode(r.f32("latents"), h, w)
	if err != nil {
		t.Fatal(err)
	}
	if d, at := maxDiff(dec, r.f32("decoded")); d > parityTol {
		t.Errorf("decode: max |diff| %.3g at %d", d, at)
	} else {
		t.Logf("decode %dx%d latents: max |diff| %.3g", w, h, d)
	}
}

func TestPipelineParity(t *testing.T) {
	p := tinyPipeline(t)
	r := openRef(t, "ref_pipeline.safetensors")
	md := r.Metadata()
	atoi := func(s string) int {
		n := 0
		for _, c := range s {
			n = n*10 + int(c-'0')
		}
		return n
	}
	W, H, steps := atoi(md["width"]), atoi(md["height"]), atoi(md["steps"])
	runs := []struct {
		key      string
		guidance float32
		negative string
	}{
		{"nocfg", 0, ""},
		{"cfg", 2.5, md["negative"]},
		{"cfg_empty", 2.5, ""},
	}
	for _, run := range runs {
		t.Run(run.key, func(t *testing.T) {
			if !r.has(run.key + "_image") {
				t.Skipf("no %s_image in the reference", run.key)
			}
			res, err := p.Generate(Options{Prompt: md["prompt"], Negative: run.negative, Width: W, Height: H,
				Steps: steps, Guidance: run.guidance, Latents: r.f32("latents")})
			if err != nil {
				t.Fatal(err)
			}
			ref := r.f32(run.key + "_step_latents")
			per := len(ref) / steps
			for i, l := range res.StepLatents {
				d, at := maxDiff(l, ref[i*per:(i+1)*per])
				t.Logf("step %d latents: max |diff| %.3g", i+1, d)
				if d > parityTol {
					t.Errorf("step %d latents: max |diff| %.3g at %d", i+1, d, at)
				}
			}
			want := r.f32(run.key + "_image")
			ps := psnr(res.Image, want)
			d, _ := maxDiff(res.Image, want)
			t.Logf("image %dx%d: PSNR %.1f dB, max |diff| %.3g", W, H, ps, d)
			if ps < minPSNR {
				t.Errorf("image PSNR %.1f dB < %d", ps, minPSNR)
			}
		})
	}
}
