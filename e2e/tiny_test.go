package e2e

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortiq/cortiq/engine"
	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/sample"
)

// denseArchs are the dense attention fixtures of ../shared/fixtures/tiny.
var denseArchs = []string{"llama", "mistral", "mistral_sw8", "qwen2", "qwen3", "gemma", "gemma2", "gemma2_sw8",
	"gemma3_text", "gemma3_text_sw8", "phi3", "granite", "granite_mult", "olmo2", "smollm3"}

const logitTol = 2e-3

type reference struct {
	ids    []int
	logits []float32
	greedy []int
	vocab  int
	native []int // greedy ids of the native CPU engine
}

func loadReference(t *testing.T, dir string) *reference {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(dir, "reference.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, err := f.Int64s("input_ids")
	if err != nil {
		t.Fatal(err)
	}
	lg, err := f.Float32s("logits")
	if err != nil {
		t.Fatal(err)
	}
	gen, err := f.Int64s("generated_ids")
	if err != nil {
		t.Fatal(err)
	}
	r := &reference{logits: lg, vocab: len(lg) / len(in)}
	for _, x := range in {
		r.ids = append(r.ids, int(x))
	}
	for _, x := range gen {
		r.greedy = append(r.greedy, int(x))
	}
	// The native run the browser must match token for token.
	e, err := engine.Load(context.Background(), nil, dir, engine.Options{Backend: "cpu"})
	if err != nil {
		t.Fatalf("native load %s: %v", dir, err)
	}
	defer e.Close()
	res, err := e.Generate(context.Background(), engine.Request{IDs: r.ids, MaxTokens: len(r.greedy), IgnoreEOS: true,
		Sampling: sample.Params{Temperature: 0}}, nil)
	if err != nil {
		t.Fatalf("native generate %s: %v", dir, err)
	}
	r.native = res.IDs
	return r
}

func maxAbsDiff(a, b []float32) (float64, int) {
	if len(a) != len(b) {
		return math.Inf(1), -1
	}
	worst, at := 0.0, 0
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
	}
	return worst, at
}

type logitsResult struct {
	Logits    []float32 `json:"logits"`
	Vocab     int       `json:"vocab"`
	Positions int       `json:"positions"`
	Backend   string    `json:"backend"`
}

func (b *browser) logits(ids []int, backend string) *logitsResult {
	b.t.Helper()
	var res logitsResult
	b.mustEval(fmt.Sprintf(`cortiq.logits(%s, {backend: %q}).then(r => ({logits: Array.from(r.logits), vocab: r.vocab, positions: r.positions, backend: r.backend}))`,
		intsJSON(ids), backend), &res, 3*time.Minute)
	return &res
}

func intsJSON(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// TestTinyFixtures: for every dense tiny fixture, served as an HF directory
// by the server package, window.cortiq.logits in the browser is within 2e-3
// of the reference logits on WebGPU (SwiftShader) and on the CPU engine, and
// greedy ids equal the native engine's.
func TestTinyFixtures(t *testing.T) {
	needBrowser(t)
	root := needShared(t, "fixtures/tiny")
	models := map[string]string{}
	for _, a := range denseArchs {
		models[a] = filepath.Join(root, a)
	}
	srv := newServer(t, models)
	b := newBrowser(t, true, "")
	b.open(srv.url() + "/")
	for i, arch := range denseArchs {
		t.Run(arch, func(t *testing.T) {
			b.t = t
			ref := loadReference(t, filepath.Join(root, arch))
			src := arch
			if i == 0 {
				// One fixture by URL: the HF directory probed without a listing.
				src = srv.url() + "/models/" + arch + "/"
			}
			t0 := time.Now()
			info := b.mustLoad(src, `{backend: "webgpu"}`, 2*time.Minute)
			if info.Vocab != ref.vocab {
				t.Fatalf("vocab %d, reference %d", info.Vocab, ref.vocab)
			}
			gpu := strings.HasPrefix(info.Backend, "webgpu")
			if !gpu {
				t.Errorf("WebGPU declined %s: %s", arch, info.DeviceError)
			}
			for _, be := range []string{"webgpu", "cpu"} {
				if be == "webgpu" && !gpu {
					continue
				}
				lg := b.logits(ref.ids, be)
				if lg.Positions != len(ref.ids) || lg.Vocab != ref.vocab {
					t.Fatalf("%s: logits shape [%d %d], want [%d %d]", be, lg.Positions, lg.Vocab, len(ref.ids), ref.vocab)
				}
				d, at := maxAbsDiff(lg.Logits, ref.logits)
				t.Logf("%s logits on %s: max |diff| %.2e (at position %d)", arch, lg.Backend, d, at/max(ref.vocab, 1))
				if d > logitTol {
					t.Errorf("%s logits on %s differ from the reference by %.3e > %.0e (position %d, token %d)", arch, lg.Backend, d, logitTol, at/ref.vocab, at%ref.vocab)
				}
			}
			backends := []string{"cpu"}
			if gpu {
				backends = append(backends, "webgpu")
			}
			for _, be := range backends {
				res := b.generate(map[string]any{"ids": ref.ids, "maxTokens": len(ref.native), "temperature": 0, "ignoreEOS": true, "backend": be}, 5*time.Minute)
				if !equalInts(res.IDs, ref.native) {
					t.Errorf("%s greedy on %s:\n got %v\nwant %v (native CPU engine)", arch, res.Backend, res.IDs, ref.native)
				}
				if !equalInts(ref.native, ref.greedy) {
					t.Logf("%s: native greedy differs from transformers' (near-tie margins, see ../shared/README.md)", arch)
				}
			}
			t.Logf("%s: %.1fs", arch, time.Since(t0).Seconds())
		})
	}
}
