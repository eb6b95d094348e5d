package cpu

import (
	"encoding/binary"
	"fmt"
	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/fixtures"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/tensor"
)

// parityTol is the absolute logit tolerance against transformers (float32).
const parityTol = 1e-4

func maxAbsDiff(a, b []float32) (float64, int) {
	var m float64
	at := -1
	for i := range a {
		d := math.Abs(float64(a[i] - b[i]))
		if d > m || math.IsNaN(d) {
			m, at = d, i
		}
	}
	return m, at
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// top2Margin is the gap between the two largest values.
func top2Margin(x []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, v := range x {
		f := float64(v)
		if f > a {
			a, b = f, a
		} else if f > b {
			b = f
		}
	}
	return a - b
}

func loadFixture(t testing.TB, name string) (*model.Model, *fixtures.Reference) {
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", name)
	m, err := importer.FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, fixtures.LoadReference(t, dir)
}

// hiddenDiffs compares the residual stream after the embedding and after
// every layer with the reference hidden_states: transformers' entry i is the
// input of layer i, and its last entry is the final norm's output (which
// replaces the last layer's raw output). It returns the max abs difference
// per entry.
func hiddenDiffs(b *Backend, ref *fixtures.Reference) []float64 {
	if ref.Hidden == nil {
		return nil
	}
	L := len(b.layers)
	n, H := len(ref.InputIDs), b.arch.Hidden
	diffs := make([]float64, L+1)
	s, _ := b.newSession(n)
	s.hook = func(layer int, x []float32, rows int) {
		idx := layer + 1
		if layer == L-1 {
			return
		}
		if layer == L {
			idx = L
		}
		diffs[idx], _ = maxAbsDiff(x[:rows*H], ref.Hidden[idx*n*H:(idx+1)*n*H])
	}
	s.Forward(ref.InputIDs, true)
	return diffs
}

// firstDivergence names the first hidden state that departs from the
// reference by more than the tolerance (a debugging aid).
func firstDivergence(b *Backend, ref *fixtures.Reference) string {
	for i, d := range hiddenDiffs(b, ref) {
		if d > parityTol {
			return fmt.Sprintf("hidden_states[%d] (input of layer %d, or final norm) first differs, by %.3g", i, i, d)
		}
	}
	return "hidden states agree"
}

func checkParity(t *testing.T, m *model.Model, ref *fixtures.Reference) {
	b, err := New(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	V := m.Arch.Vocab
	n := len(ref.InputIDs)

	// Whole prompt in one batched forward.
	s, err := b.NewSession(n + len(ref.Generated) + 1)
	if err != nil {
		t.Fatal(err)
	}
	logits, err := s.Forward(ref.InputIDs, true)
	if err != nil {
		t.Fatal(err)
	}
	d, at := maxAbsDiff(logits, ref.Logits)
	t.Logf("%s: prompt logits max abs diff %.3g; hidden states %.3g", t.Name(), d, hiddenDiffs(b, ref))
	if d > parityTol {
		t.Errorf("prompt logits differ by %.3g at token %d id %d (tolerance %g); %s", d, at/V, at%V, parityTol, firstDivergence(b, ref))
	}

	// Greedy decode one token at a time through the cache.
	if ref.Generated == nil || ref.StepLogits == nil {
		return
	}
	step := logits[(n-1)*V:]
	var worst float64
	for i, want := range ref.Generated {
		refStep := ref.StepLogits[i*V : (i+1)*V]
		d, at := maxAbsDiff(step, refStep)
		worst = max(worst, d)
		if d > parityTol {
			t.Errorf("step %d logits differ by %.3g at id %d", i, d, at)
			break
		}
		if got := argmax(step); got != want && top2Margin(refStep) > parityTol {
			t.Errorf("step %d: greedy token %d, reference %d (margin %.3g)", i, got, want, top2Margin(refStep))
			break
		}
		// Feed the reference token so that a near-tie cannot derail the rest.
		step, err = s.Forward([]int{want}, false)
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: decode step logits max abs diff %.3g", t.Name(), worst)
}

func TestParityDense(t *testing.T) {
	for _, name := range fixtures.Dense {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			checkParity(t, m, ref)
		})
	}
}

// convertFixture writes the fixture's checkpoint with every weight stored as
// codec c (f16 or bf16) into dir, and the same weights rounded to c but
// stored as f32 into dir+"_f32".
func convertFixture(t *testing.T, name string, c tensor.Codec) (lowDir, f32Dir string) {
	src := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", name)
	base := t.TempDir()
	lowDir, f32Dir = filepath.Join(base, "low"), filepath.Join(base, "f32")
	f, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var low, rounded []*tensor.Tensor
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		v, err := f.Float32s(n)
		if err != nil {
			t.Fatal(err)
		}
		lb := make([]byte, 2*len(v))
		rb := make([]byte, 4*len(v))
		for i, x := range v {
			var h uint16
			var r float32
			if c == tensor.BF16 {
				h = tensor.F32ToBF16(x)
				r = tensor.BF16ToF32(h)
			} else {
				h = tensor.F32ToF16(x)
				r = tensor.F16ToF32(h)
			}
			binary.LittleEndian.PutUint16(lb[2*i:], h)
			binary.LittleEndian.PutUint32(rb[4*i:], math.Float32bits(r))
		}
		low = append(low, &tensor.Tensor{Name: n, Codec: c, Shape: info.Shape, Data: lb})
		rounded = append(rounded, &tensor.Tensor{Name: n, Codec: tensor.F32, Shape: info.Shape, Data: rb})
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		dir string
		ts  []*tensor.Tensor
	}{{lowDir, low}, {f32Dir, rounded}} {
		os.MkdirAll(d.dir, 0o755)
		os.WriteFile(filepath.Join(d.dir, "config.json"), cfg, 0o644)
		out, err := os.Create(filepath.Join(d.dir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		if err := safetensors.Write(out, d.ts); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
	return lowDir, f32Dir
}

func TestParityMoE(t *testing.T) {
	for _, name := range []string{"mixtral", "qwen2_moe", "qwen3_moe"} {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			checkParity(t, m, ref)
		})
	}
}

func TestParityHybrid(t *testing.T) {
	for _, name := range []string{"lfm2", "qwen3_next"} {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			checkParity(t, m, ref)
		})
	}
}

// TestParityGptOss: gpt-oss (sinks, alternating sliding/full layers, YaRN,
// biases, top-k-softmax router with bias, clamped SwiGLU experts) from the
// fixtures committed in the repository.
func TestParityGptOss(t *testing.T) {
	for _, name := range fixtures.InRepo {
		t.Run(name, func(t *testing.T) {
			dir := fixtures.Local(t, name)
			m, err := importer.FromHF(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkParity(t, m, fixtures.LoadReference(t, dir))
		})
	}
}

func TestParityHalfWeights(t *testing.T) {
	for _, name := range []string{"llama", "gemma2_sw8", "qwen2", "phi3", "olmo2", "granite_mult"} {
		for _, c := range []tensor.Codec{tensor.BF16, tensor.F16} {
			t.Run(name+"/"+c.String(), func(t *testing.T) {
				lowDir, f32Dir := convertFixture(t, name, c)
				run := func(dir string) []float32 {
					m, err := importer.FromHF(dir)
					if err != nil {
						t.Fatal(err)
					}
					defer m.Close()
					if w, _ := m.Weights.Tensor(model.LayerTensor(0, model.AttnQ)); dir == lowDir && w.Codec != c {
						t.Fatalf("weights imported as %s, want %s", w.Codec, c)
					}
					b, err := New(m, Options{})
					if err != nil {
						t.Fatal(err)
					}
					s, _ := b.NewSession(64)
					ref := fixtures.LoadReference(t, filepath.Join(fixtures.Dir(t), "fixtures", "tiny", name))
					lg, err := s.Forward(ref.InputIDs, true)
					if err != nil {
						t.Fatal(err)
					}
					return lg
				}
				d, _ := maxAbsDiff(run(lowDir), run(f32Dir))
				t.Logf("%s weights vs f32 compute on rounded weights: max abs diff %.3g", c, d)
				if d > parityTol {
					t.Errorf("max abs diff %.3g > %g", d, parityTol)
				}
			})
		}
	}
}

func TestStories260K(t *testing.T) {
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K_hf")
	m, err := importer.FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f, err := safetensors.Open(filepath.Join(dir, "reference.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := f.Names()
	var prompt, want []int64
	for _, n := range names {
		v, err := f.Int64s(n)
		if err != nil {
			continue
		}
		switch {
		case prompt == nil && (n == "prompt_ids" || n == "input_ids"):
			prompt = v
		case n == "generated_ids":
			want = v
		}
	}
	if prompt == nil || want == nil {
		t.Fatalf("reference.safetensors has %v; want prompt and generated ids", names)
	}
	checkParity(t, m, fixtures.LoadReference(t, dir))
	b, err := New(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := b.NewSession(len(prompt) + len(want))
	toks := make([]int, len(prompt))
	for i, p := range prompt {
		toks[i] = int(p)
	}
	lg, err := s.Forward(toks, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		got := argmax(lg)
		if got != int(w) {
			t.Fatalf("token %d: got %d, want %d", i, got, w)
		}
		if lg, err = s.Forward([]int{got}, false); err != nil && i < len(want)-1 {
			t.Fatal(err)
		}
	}
}

// TestParityLevels runs the parity check at every kernel level this CPU
// has, forced down with kernel.SetLevel (Exact mode: the parity tests'
// default is whatever level the CPU picks).
func TestParityLevels(t *testing.T) {
	defer kernel.SetLevel(kernel.CurrentLevel())
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	for l := kernel.Generic; l <= kernel.Detected(); l++ {
		kernel.SetLevel(l)
		for _, name := range []string{"llama", "qwen2", "gemma2"} {
			t.Run(l.String()+"/"+name, func(t *testing.T) {
				m, ref := loadFixture(t, name)
				checkParity(t, m, ref)
			})
		}
	}
}
