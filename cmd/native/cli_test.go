package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/cortiq/cortiq/fixtures"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/safetensors"
)

// The CLI contract is tested by running the real binary, built once.
var cortiqBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cortiq-cli-test")
	if err != nil {
		panic(err)
	}
	cortiqBin = filepath.Join(dir, "cortiq")
	out, err := exec.Command("go", "build", "-o", cortiqBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building cortiq: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func cortiq(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(cortiqBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cortiq %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

func idList(ids []int) string {
	s := make([]string, len(ids))
	for i, v := range ids {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}

func readLogits(t *testing.T, path string) []float32 {
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := f.Float32s("logits")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i]-b[i])))
	}
	return m
}

// top2Margin is the gap between the best and second-best logit of row.
func top2Margin(row []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, v := range row {
		x := float64(v)
		if x > a {
			a, b = x, a
		} else if x > b {
			b = x
		}
	}
	return a - b
}

type runFinal struct {
	Done    bool   `json:"done"`
	IDs     []int  `json:"ids"`
	Backend string `json:"backend"`
}

func runGreedy(t *testing.T, model string, ids []int, n int, extra ...string) runFinal {
	args := append([]string{"run", "-m", model, "--ids", idList(ids), "-n", fmt.Sprint(n), "--temp", "0", "--ignore-eos", "--json"}, extra...)
	out := cortiq(t, nil, args...)
	var final runFinal
	sc := bufio.NewScanner(strings.NewReader(out))
	lines := 0
	for sc.Scan() {
		lines++
		final = runFinal{}
		if err := json.Unmarshal(sc.Bytes(), &final); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
	}
	if !final.Done || lines != len(final.IDs)+1 {
		t.Fatalf("run --json: %d lines, final %+v", lines, final)
	}
	return final
}

// TestCLIParity is acceptance 1 of the foundation: every fixture, from its
// HF directory and from its f32 CMF import, through the CLI.
func TestCLIParity(t *testing.T) {
	root := fixtures.Dir(t)
	for _, arch := range append(append([]string{}, fixtures.Dense...), fixtures.Hybrid...) {
		t.Run(arch, func(t *testing.T) {
			dir := filepath.Join(root, "fixtures", "tiny", arch)
			ref := fixtures.LoadReference(t, dir)
			tmp := t.TempDir()
			cmfPath := filepath.Join(tmp, arch+".cmf")
			cortiq(t, nil, "import", dir, "-o", cmfPath, "--quant", "f32")
			for _, src := range []string{dir, cmfPath} {
				out := filepath.Join(tmp, "logits.safetensors")
				cortiq(t, []string{"CORTIQ_CACHE=" + tmp}, "logits", "-m", src, "--backend", "cpu", "--ids", idList(ref.InputIDs), "-o", out)
				if d := maxAbsDiff(readLogits(t, out), ref.Logits); d > 1e-4 {
					t.Errorf("%s: logits differ from the reference by %.3g (> 1e-4)", src, d)
				}
				got := runGreedy(t, src, ref.InputIDs, len(ref.Generated), "--backend", "cpu")
				for i, id := range got.IDs {
					if id != ref.Generated[i] {
						m := top2Margin(ref.StepLogits[i*ref.Vocab : (i+1)*ref.Vocab])
						if m > 1e-3 {
							t.Errorf("%s: generated[%d] = %d, want %d (reference margin %.3g)", src, i, id, ref.Generated[i], m)
						}
						break // later tokens follow a different prefix
					}
				}
			}
		})
	}
}

// TestQuantizedImportError is acceptance 4: q8_0 and q4_0 imports of a
// fixture, with the logits error measured against the f32 reference.
//
// Two checks. First, exactness: the quantized model must compute exactly
// what float32 math on its dequantized weights computes (the same model
// re-imported as f32 dequantizes every block), within 1e-4 — this is what
// catches a wrong block layout or kernel. Second, the error against the
// unquantized reference, stated as RMS and max relative to the logit std.
// A quantization step is amax/127 (q8_0) or amax/8 (q4_0) per block of 32,
// a relative weight error of ~0.4% and ~7% RMS for these uniform random
// weights. The fixtures are untrained, with a large initializer (0.2) and
// no learned structure to absorb it, so each layer amplifies the error
// about 5-8x: measured here 1.2-2.9% (q8_0) and 18-40% (q4_0) RMS of the
// std. The limits (q8_0: RMS 5%, max 30%; q4_0: RMS 60%, max 250%) sit
// above those measurements with margin for the random accumulation; what
// quantization does to a trained model is checked by
// TestQuantizedStoriesText.
func TestQuantizedImportError(t *testing.T) {
	root := fixtures.Dir(t)
	for _, arch := range []string{"llama", "qwen3", "gemma2"} {
		dir := filepath.Join(root, "fixtures", "tiny", arch)
		ref := fixtures.LoadReference(t, dir)
		tmp := t.TempDir()
		for _, q := range []struct {
			codec       string
			rms, maxRel float64
		}{{"q8_0", 0.05, 0.30}, {"q4_0", 0.60, 2.5}} {
			p := filepath.Join(tmp, arch+"-"+q.codec+".cmf")
			cortiq(t, nil, "import", dir, "-o", p, "--quant", q.codec)
			deq := filepath.Join(tmp, arch+"-"+q.codec+"-dequantized.cmf")
			cortiq(t, nil, "import", p, "-o", deq, "--quant", "f32")
			out := filepath.Join(tmp, "l.safetensors")
			// The exactness check needs the CPU kernels' Exact mode (the
			// default Int8 mode rounds activations in decode;
			// cpu.TestInt8Decode bounds that).
			exact := []string{"CORTIQ_KERNEL=exact"}
			cortiq(t, exact, "logits", "-m", p, "--backend", "cpu", "--ids", idList(ref.InputIDs), "-o", out)
			got := readLogits(t, out)
			cortiq(t, exact, "logits", "-m", deq, "--backend", "cpu", "--ids", idList(ref.InputIDs), "-o", out)
			if d := maxAbsDiff(got, readLogits(t, out)); d > 1e-4 {
				t.Errorf("%s %s: quantized kernels differ from f32 math on the dequantized weights by %.3g", arch, q.codec, d)
			}
			var mean, sq, errSq, errMax float64
			for i := range ref.Logits {
				mean += float64(ref.Logits[i])
			}
			mean /= float64(len(ref.Logits))
			for i := range ref.Logits {
				d := float64(ref.Logits[i]) - mean
				sq += d * d
				e := float64(got[i] - ref.Logits[i])
				errSq += e * e
				errMax = math.Max(errMax, math.Abs(e))
			}
			std := math.Sqrt(sq / float64(len(ref.Logits)))
			rms := math.Sqrt(errSq/float64(len(ref.Logits))) / std
			t.Logf("%s %s: logit error RMS %.4f×std, max %.4f×std (std %.3f)", arch, q.codec, rms, errMax/std, std)
			if rms > q.rms || errMax/std > q.maxRel {
				t.Errorf("%s %s: RMS %.4f (limit %.2f), max %.4f (limit %.2f) of the logit std", arch, q.codec, rms, q.rms, errMax/std, q.maxRel)
			}
		}
	}
}

// TestQuantizedStoriesText: on a trained model q8_0 keeps the greedy text
// word for word.
func TestQuantizedStoriesText(t *testing.T) {
	src := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	p := filepath.Join(t.TempDir(), "s-q8_0.cmf")
	cortiq(t, nil, "import", src, "-o", p, "--quant", "q8_0")
	out := cortiq(t, nil, "run", "-m", p, "-p", "Once upon a time", "-n", "64", "--temp", "0")
	if out != storiesWant {
		t.Fatalf("q8_0 greedy text\n%q\nwant\n%q", out, storiesWant)
	}
}

const storiesWant = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said\n"

// TestStoriesText is acceptance 3: the known greedy text, word for word.
func TestStoriesText(t *testing.T) {
	p := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	out := cortiq(t, nil, "run", "-m", p, "-p", "Once upon a time", "-n", "64", "--temp", "0")
	if out != storiesWant {
		t.Fatalf("got\n%q\nwant\n%q", out, storiesWant)
	}
}

// TestCLIWebGPU: the device backend through the CLI contract (issue 4,
// acceptance 1-2): the backend is named, nothing fell back, one submit per
// steady decode token, no uploads after the first token, and the logits
// within 2e-3 of the reference. It skips where no adapter exists.
func TestCLIWebGPU(t *testing.T) {
	root := fixtures.Dir(t)
	for _, arch := range []string{"llama", "gemma2_sw8", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			dir := filepath.Join(root, "fixtures", "tiny", arch)
			ref := fixtures.LoadReference(t, dir)
			out := cortiq(t, nil, "run", "-m", dir, "--ids", idList(ref.InputIDs), "-n", "8", "--temp", "0", "--ignore-eos", "--json", "--backend", "webgpu")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			var final struct {
				Backend          string  `json:"backend"`
				FallbackOps      int     `json:"fallback_ops"`
				SubmitsPerToken  float64 `json:"submits_per_token"`
				UploadBytesDelta *int64  `json:"upload_bytes_delta"`
				DeviceError      string  `json:"device_error"`
				IDs              []int   `json:"ids"`
			}
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &final); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(final.Backend, "webgpu:") {
				t.Skipf("no WebGPU adapter: %s", final.DeviceError)
			}
			if final.FallbackOps != 0 || final.SubmitsPerToken != 1 || final.UploadBytesDelta == nil || *final.UploadBytesDelta != 0 {
				t.Errorf("final %+v: want fallback_ops 0, submits_per_token 1, upload_bytes_delta 0", final)
			}
			batched := runGreedy(t, dir, ref.InputIDs, 8, "--backend", "webgpu", "--greedy-batch", "4")
			if fmt.Sprint(batched.IDs) != fmt.Sprint(final.IDs) {
				t.Errorf("--greedy-batch 4 gave %v, one token per submit %v", batched.IDs, final.IDs)
			}
			p := filepath.Join(t.TempDir(), "l.safetensors")
			cortiq(t, nil, "logits", "-m", dir, "--backend", "webgpu", "--ids", idList(ref.InputIDs), "-o", p)
			if d := maxAbsDiff(readLogits(t, p), ref.Logits); d > 2e-3 {
				t.Errorf("webgpu logits differ from the reference by %.3g (> 2e-3)", d)
			}
		})
	}
}

// TestBenchKernelLevel checks that the CPU kernel environment variables
// reach the kernels and that bench --json reports the level and mode.
func TestBenchKernelLevel(t *testing.T) {
	p := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	out := cortiq(t, []string{"CORTIQ_CPU_LEVEL=avx2", "CORTIQ_KERNEL=exact"}, "bench", "-m", p, "--backend", "cpu", "--prompt", "4", "--gen", "2", "--reps", "1", "--json")
	var res struct {
		Level string `json:"kernel_level"`
		Mode  string `json:"kernel_mode"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if want := min(kernel.AVX2, kernel.Detected()).String(); res.Level != want || res.Mode != "exact" {
		t.Errorf("bench reports kernels %q, %q; want %q, exact", res.Level, res.Mode, want)
	}
	cmd := exec.Command(cortiqBin, "bench", "--bandwidth")
	cmd.Env = append(os.Environ(), "CORTIQ_CPU_LEVEL=sse9")
	if msg, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(msg), "CORTIQ_CPU_LEVEL") {
		t.Errorf("CORTIQ_CPU_LEVEL=sse9: err %v, output %q; want an error naming the variable", err, msg)
	}
}
