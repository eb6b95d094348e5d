package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/safetensors"
)

// TestImagineInBrowser: the tiny Z-Image, served as one pipeline CMF file
// and loaded into a tab, generates diffusers' image from diffusers' noise
// (PSNR ≥ 60 dB) with the transformer blocks and the VAE on WebGPU
// (SwiftShader) and all in wasm on the CPU, reporting every step.
func TestImagineInBrowser(t *testing.T) {
	needBrowser(t)
	ref := filepath.Join("..", "diffusion", "testdata", "zimage")
	model := filepath.Join(ref, "zimage-tiny")
	if _, err := os.Stat(filepath.Join(model, "model_index.json")); err != nil {
		t.Skipf("reference model not found at %s: %v", model, err)
	}
	c := filepath.Join(t.TempDir(), "zimage-tiny.cmf")
	if err := diffusion.SaveCMF(model, c, diffusion.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	rf, err := safetensors.Open(filepath.Join(ref, "ref_pipeline.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	md := rf.Metadata()
	lat, _ := rf.Float32s("latents")
	want, _ := rf.Float32s("cfg_image")
	req, _ := json.Marshal(map[string]any{"prompt": md["prompt"], "negativePrompt": md["negative"], "width": 96,
		"height": 64, "steps": 5, "guidance": 2.5, "latents": lat})

	srv := newServer(t, map[string]string{"zimage-tiny": c})
	b := newBrowser(t, true, "")
	b.open(srv.url() + "/")
	for _, backend := range []string{"webgpu", "cpu"} {
		t.Run(backend, func(t *testing.T) {
			b.t = t
			info := b.mustLoad("zimage-tiny", fmt.Sprintf(`{backend: %q}`, backend), 2*time.Minute)
			if info.Family != "zimage" {
				t.Fatalf("loaded as %q", info.Family)
			}
			if backend == "webgpu" && info.Backend != "webgpu" {
				t.Errorf("WebGPU declined the pipeline: %s", info.DeviceError)
			}
			var res struct {
				Image    []float32 `json:"image"`
				PNG      int       `json:"png"`
				Backend  string    `json:"backend"`
				Progress int       `json:"progress"`
			}
			b.mustEval(fmt.Sprintf(`(() => { let n = 0; return cortiq.imagine(%s, () => n++).then(r =>
				({image: Array.from(r.image), png: r.png.length, backend: r.backend, progress: n})); })()`, req), &res, 5*time.Minute)
			if res.Progress != 5 || res.PNG == 0 {
				t.Errorf("%d progress events (want 5), PNG of %d bytes", res.Progress, res.PNG)
			}
			if len(res.Image) != len(want) {
				t.Fatalf("image of %d values, want %d", len(res.Image), len(want))
			}
			var se float64
			for i := range want {
				d := float64(res.Image[i] - want[i])
				se += d * d
			}
			psnr := 10 * math.Log10(float64(len(want))/se)
			t.Logf("%s (%s): PSNR %.1f dB", backend, res.Backend, psnr)
			if psnr < 60 {
				t.Errorf("%s: PSNR %.1f dB < 60", backend, psnr)
			}
		})
	}
	// The page: Load shows the image tab, Generate image shows the picture.
	t.Run("page", func(t *testing.T) {
		b.t = t
		var got string
		b.mustEval(`(async () => {
			const $ = (id) => document.getElementById(id);
			const wait = async (ok) => { for (let i = 0; i < 1800 && !ok(); i++) await new Promise(r => setTimeout(r, 100)); return ok(); };
			$("model").value = "zimage-tiny"; $("backend").value = "cpu"; $("load").click();
			if (!await wait(() => !$("imagine").hidden)) return "no image tab: " + $("status").textContent;
			if (!document.querySelector(".compose").hidden) return "chat box still shown";
			$("img-size").value = "256x256"; $("img-steps").value = "2"; $("img-go").click();
			if (!await wait(() => $("img-out").src)) return "no picture: " + $("status").textContent;
			await $("img-out").decode();
			return $("img-out").naturalWidth + "x" + $("img-out").naturalHeight + " " + $("img-progress-text").textContent;
		})()`, &got, 5*time.Minute)
		t.Logf("page: %s", got)
		if !strings.HasPrefix(got, "256x256 ") {
			t.Errorf("page: %s", got)
		}
	})
}
