package quant

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/sample"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/tokenizer"
	"github.com/cortiq/cortiq/writer"
)

const shared = "../../shared/fixtures"

// klCodecs are the table's rows: the references q8_0 and q4_0, and the
// seed's codecs; those GPTQ can write also get its numbers, and GPTQ must
// beat round-to-nearest on stories260K for mustBeat.
var (
	klCodecs = []tensor.Codec{tensor.Q8_0, tensor.Q4_0, tensor.Q8_ROW, tensor.Q8_2F, tensor.Q4_TILED, tensor.Q4TP, tensor.Q2TP, tensor.Q1, tensor.Q1G, tensor.Q1T, tensor.BLR, tensor.MXFP4}
	mustBeat = []tensor.Codec{tensor.Q4_0, tensor.Q4TP, tensor.Q2TP}
)

// klRowResult is one model's KL for one codec (RTN and, for gptqCodecs,
// GPTQ) and how many tensors took the codec.
type klResult struct {
	rtn, gptq float64
	n         int
}

// convert writes src re-encoded to c (with GPTQ from grams when given) and
// opens the file.
func convert(t *testing.T, src *model.Model, c tensor.Codec, grams map[string]*Gram) (*model.Model, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "q.cmf")
	opts := writer.SaveOptions{Quant: c}
	if grams != nil {
		opts.Encode = Quantizer(grams, c, Options{})
	}
	if err := writer.SaveCMF(src, path, opts); err != nil {
		t.Fatal(err)
	}
	m, err := importer.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range m.Weights.Names() {
		if w, _ := m.Weights.Tensor(name); w.Codec == c {
			n++
		}
	}
	return m, n
}

// klTable measures every codec on ref: calibrate on calib, evaluate on eval.
func klTable(t *testing.T, ref *model.Model, calib, eval []int, window int) map[tensor.Codec]klResult {
	grams, err := Calibrate(ref, calib, window)
	if err != nil {
		t.Fatal(err)
	}
	out := map[tensor.Codec]klResult{}
	for _, c := range klCodecs {
		m, n := convert(t, ref, c, nil)
		r := klResult{n: n}
		if r.rtn, err = KL(ref, m, eval, window); err != nil {
			t.Fatal(err)
		}
		m.Close()
		if tensor.CanSetElem(c) && n > 0 {
			m, _ := convert(t, ref, c, grams)
			if r.gptq, err = KL(ref, m, eval, window); err != nil {
				t.Fatal(err)
			}
			m.Close()
		}
		out[c] = r
	}
	return out
}

// ownText samples n sequences of length tokens from m (temperature 1,
// seeds from seed on, each from token 1), concatenated.
func ownText(t *testing.T, m *model.Model, seed uint64, n, length int) []int {
	t.Helper()
	b, err := cpu.New(m, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var out []int
	for i := range n {
		sm := sample.New(sample.Params{Temperature: 1, Seed: seed + uint64(i)})
		s, err := b.NewSession(length)
		if err != nil {
			t.Fatal(err)
		}
		seq := []int{1}
		for len(seq) < length {
			l, err := s.Forward(seq[len(seq)-1:], false)
			if err != nil {
				t.Fatal(err)
			}
			seq = append(seq, sm.Sample(l, seq))
		}
		s.Close()
		out = append(out, seq...)
	}
	return out
}

// TestKLTable measures each codec's error against f32 (mean KL divergence
// of the next-token distributions, in nats) on stories260K (calibrated on
// its own sampled text, evaluated on the held-out texts of
// stories260K.md) and on the tiny fixtures (calibrated and evaluated on
// different samples of their own text), logs the table docs/cmf.md records,
// and checks that GPTQ beats round-to-nearest for q4_0, q4tp and q2tp on
// stories260K.
func TestKLTable(t *testing.T) {
	if testing.Short() {
		t.Skip("the KL table converts 30 models (-short)")
	}
	gguf := filepath.Join(shared, "models", "stories260K.gguf")
	md, err := os.ReadFile(filepath.Join(shared, "models", "stories260K.md"))
	if err != nil {
		t.Skipf("no stories260K fixture (%v): the KL table needs %s", err, gguf)
	}
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	blocks := regexp.MustCompile("(?s)```\n\\$ ./run[^\n]*\n(.*?)```").FindAllSubmatch(md, -1)
	if len(blocks) < 2 {
		t.Fatalf("%s: want the greedy and the sampled text blocks", gguf)
	}
	ref, err := importer.Open(context.Background(), gguf)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	tok, err := tokenizer.Load(ref.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	// Calibration: the model's own text, sampled; evaluation: the two texts
	// of stories260K.md, held out.
	calib := ownText(t, ref, 1, 8, 256)
	eval := append(tok.Encode(string(blocks[0][1]), true), tok.Encode(string(blocks[1][1]), true)...)
	stories := klTable(t, ref, calib, eval, 256)

	// The tiny fixtures: 2-layer random models, hidden 64, FFN 128.
	dirs, _ := filepath.Glob(filepath.Join(shared, "tiny", "*"))
	tiny := map[tensor.Codec]klResult{}
	var used []string
	for _, d := range dirs {
		m, err := importer.Open(context.Background(), d)
		if err != nil {
			t.Logf("%s: %v (left out)", d, err)
			continue
		}
		calib, eval := ownText(t, m, 1, 4, 128), ownText(t, m, 100, 2, 64)
		for c, r := range klTable(t, m, calib, eval, 128) {
			s := tiny[c]
			s.rtn += r.rtn
			s.gptq += r.gptq
			s.n += r.n
			tiny[c] = s
		}
		used = append(used, filepath.Base(d))
		m.Close()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| codec | stories260K RTN | stories260K GPTQ | tensors | tiny fixtures RTN | tiny GPTQ | tensors |\n|---|---|---|---|---|---|---|\n")
	k := float64(max(1, len(used)))
	for _, c := range klCodecs {
		s, ty := stories[c], tiny[c]
		num := func(v float64, n int, ok bool) string {
			if n == 0 || !ok {
				return "—"
			}
			return fmt.Sprintf("%.4g", v)
		}
		g := tensor.CanSetElem(c)
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %d |\n", c, num(s.rtn, s.n, true), num(s.gptq, s.n, g), s.n,
			num(ty.rtn/k, ty.n, true), num(ty.gptq/k, ty.n, g), ty.n)
	}
	t.Logf("KL(f32 ‖ codec) per next token, nats; tiny fixtures: %s%s", strings.Join(used, ", "), b.String())
	for _, c := range mustBeat {
		if s := stories[c]; !(s.gptq < s.rtn) {
			t.Errorf("stories260K %s: GPTQ KL %.4g does not beat round-to-nearest's %.4g", c, s.gptq, s.rtn)
		}
	}
}
