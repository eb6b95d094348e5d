package cpu

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

// TestGGUFGptOss writes each tiny gpt-oss fixture as a "gpt-oss" GGUF with
// MXFP4 experts (writer.QuantizeExperts + SaveGGUF, llama.cpp's tensor
// names), reads it back and runs it next to its float32 twin (the same
// weights decoded): every logit of the prompt and of a greedy decode within
// 1e-4, greedy tokens equal. The file's experts must be MXFP4 and the
// architecture must read back as the HF one's.
func TestGGUFGptOss(t *testing.T) {
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	for _, name := range fixtures.InRepo {
		t.Run(name, func(t *testing.T) {
			dir := fixtures.Local(t, name)
			hf, err := importer.FromHF(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer hf.Close()
			q, err := writer.QuantizeExperts(hf, tensor.MXFP4)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), name+".gguf")
			if err := writer.SaveGGUF(q, path, writer.SaveOptions{Keep: true}); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if a, _ := f.GetString("general.architecture"); a != "gpt-oss" {
				t.Errorf("general.architecture %q, want gpt-oss", a)
			}
			mx := 0
			names := map[string]bool{}
			for _, ti := range f.Tensors {
				names[ti.Name] = true
				if c, _ := ti.Type.Codec(); c == tensor.MXFP4 {
					mx++
				}
			}
			f.Close()
			if want := 3 * len(hf.Arch.Layers); mx != want {
				t.Errorf("%d MXFP4 tensors, want %d (the expert banks)", mx, want)
			}
			for _, n := range []string{"blk.0.attn_sinks.weight", "blk.0.post_attention_norm.weight", "blk.0.ffn_gate_inp.bias",
				"blk.0.ffn_gate_exps.bias", "blk.0.ffn_up_exps.bias", "blk.0.ffn_down_exps.bias", "blk.0.attn_output.bias"} {
				if !names[n] {
					t.Errorf("file has no %s", n)
				}
			}
			m, err := importer.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if l := m.Arch.Layers; l[0].Attn.Window == 0 || l[1].Attn.Window != 0 || !l[0].Attn.Sinks || !l[0].MoE.RouterBias || !l[0].Attn.Rope.Scaling.NoTruncate {
				t.Errorf("arch read back as %+v / %+v", *l[0].Attn, *l[0].MoE)
			}
			twin := dequantizedTwin(t, m)
			ref := fixtures.LoadReference(t, dir)
			checkTwin(t, "gguf mxfp4", m, twin, ref.InputIDs, 16, 64)
		})
	}
}

// TestGGUFGptOssF32: the fixtures written as float32 "gpt-oss" GGUFs match
// transformers' reference as the HF directories do (1e-4, greedy equal):
// the GGUF reading of sinks, windows, YaRN, norms and biases is gpt-oss's.
func TestGGUFGptOssF32(t *testing.T) {
	for _, name := range fixtures.InRepo {
		t.Run(name, func(t *testing.T) {
			dir := fixtures.Local(t, name)
			hf, err := importer.FromHF(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer hf.Close()
			path := filepath.Join(t.TempDir(), name+".gguf")
			if err := writer.SaveGGUF(hf, path, writer.SaveOptions{Keep: true}); err != nil {
				t.Fatal(err)
			}
			m, err := importer.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkParity(t, m, fixtures.LoadReference(t, dir))
		})
	}
}

// fp4Values is transformers' FP4_VALUES (e2m1), indexed by nibble.
var fp4Values = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}

// hfMXFP4Row encodes one row (a multiple of 32 values) as transformers'
// gpt-oss checkpoints store it: per 32 values a uint8 exponent s (scale
// 2^(s-127)) and 16 bytes, byte k holding elements 2k (low nibble) and
// 2k+1 (high nibble), nearest FP4 value.
func hfMXFP4Row(x []float32) (blocks, scales []byte) {
	for b := 0; b < len(x)/32; b++ {
		v := x[32*b : 32*b+32]
		var amax float64
		for _, f := range v {
			amax = math.Max(amax, math.Abs(float64(f)))
		}
		s := 127
		if amax > 0 {
			s = 127 + int(math.Ceil(math.Log2(amax/6)))
		}
		d := math.Ldexp(1, s-127)
		var nib [32]byte
		for i, f := range v {
			best := 0
			for n, q := range fp4Values {
				if math.Abs(float64(f)/d-float64(q)) < math.Abs(float64(f)/d-float64(fp4Values[best])) {
					best = n
				}
			}
			nib[i] = byte(best)
		}
		for k := range 16 {
			blocks = append(blocks, nib[2*k]|nib[2*k+1]<<4)
		}
		scales = append(scales, byte(s))
	}
	return blocks, scales
}

// hfMXFP4Decode is transformers' convert_moe_packed_tensors for one row.
func hfMXFP4Decode(blocks, scales []byte) []float32 {
	var out []float32
	for b, s := range scales {
		d := float32(math.Ldexp(1, int(s)-127))
		for _, q := range blocks[16*b : 16*b+16] {
			out = append(out, fp4Values[q&0xf]*d, fp4Values[q>>4]*d)
		}
	}
	return out
}

// writeSafetensors writes raw tensors (name → dtype, shape, bytes).
func writeSafetensors(t *testing.T, path string, ts map[string]rawTensor) {
	t.Helper()
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	sort.Strings(names)
	header := map[string]any{}
	var data []byte
	for _, n := range names {
		r := ts[n]
		header[n] = map[string]any{"dtype": r.dtype, "shape": r.shape, "data_offsets": []int{len(data), len(data) + len(r.data)}}
		data = append(data, r.data...)
	}
	h, _ := json.Marshal(header)
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

type rawTensor struct {
	dtype string
	shape []int
	data  []byte
}

// TestHFMXFP4GptOss: a gpt-oss checkpoint with MXFP4 experts as OpenAI
// ships them (gate_up_proj_blocks/_scales, down_proj_blocks/_scales, U8)
// imports with the experts kept MXFP4, and computes what transformers'
// dequantization of those blocks computes: every logit of the prompt and a
// greedy decode within 1e-4 of a float checkpoint holding the blocks'
// values (decoded here as convert_moe_packed_tensors does), greedy equal.
func TestHFMXFP4GptOss(t *testing.T) {
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	src := fixtures.Local(t, "gpt_oss_e8")
	f, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	json.Unmarshal(cfg, &c)
	c["quantization_config"] = map[string]any{"quant_method": "mxfp4", "modules_to_not_convert": []string{"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}
	qcfg, _ := json.Marshal(c)
	E, H, I := int(c["num_local_experts"].(float64)), int(c["hidden_size"].(float64)), int(c["intermediate_size"].(float64))

	quant, twin := map[string]rawTensor{}, map[string]rawTensor{}
	f32 := func(v []float32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b
	}
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		v, err := f.Float32s(n)
		if err != nil {
			t.Fatal(err)
		}
		var in, out int // the matrix as transformers stores it: x @ W, W [E, in, out]
		switch {
		case strings.HasSuffix(n, "experts.gate_up_proj"):
			in, out = H, 2*I
		case strings.HasSuffix(n, "experts.down_proj"):
			in, out = I, H
		default:
			quant[n] = rawTensor{"F32", info.Shape, f32(v)}
			twin[n] = quant[n]
			continue
		}
		// Rows of the stored blocks are outputs: row r, column c is W[e][c][r].
		var blocks, scales []byte
		dq := make([]float32, len(v))
		for e := range E {
			for r := range out {
				row := make([]float32, in)
				for c := range in {
					row[c] = v[(e*in+c)*out+r]
				}
				b, s := hfMXFP4Row(row)
				blocks, scales = append(blocks, b...), append(scales, s...)
				for c, x := range hfMXFP4Decode(b, s) {
					dq[(e*in+c)*out+r] = x
				}
			}
		}
		quant[n+"_blocks"] = rawTensor{"U8", []int{E, out, in / 32, 16}, blocks}
		quant[n+"_scales"] = rawTensor{"U8", []int{E, out, in / 32}, scales}
		twin[n] = rawTensor{"F32", info.Shape, f32(dq)}
	}
	load := func(ts map[string]rawTensor, config []byte) *model.Model {
		dir := t.TempDir()
		writeSafetensors(t, filepath.Join(dir, "model.safetensors"), ts)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), config, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := importer.FromHF(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	qm, tm := load(quant, qcfg), load(twin, cfg)
	for _, n := range []string{model.FFNGateExps, model.FFNUpExps, model.FFNDownExps} {
		if w, _ := qm.Weights.Tensor(model.LayerTensor(0, n)); w.Codec != tensor.MXFP4 {
			t.Fatalf("%s imported as %s, want mxfp4", n, w.Codec)
		}
	}
	ref := fixtures.LoadReference(t, src)
	checkTwin(t, "mxfp4 import", qm, tm, ref.InputIDs, 16, 64)
}

// TestCMFGptOss: a gpt-oss model with MXFP4 experts survives a CMF round
// trip (Keep): the same Arch, the same codecs, the same logits bit for bit.
func TestCMFGptOss(t *testing.T) {
	dir := fixtures.Local(t, "gpt_oss_e8")
	hf, err := importer.FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	q, err := writer.QuantizeExperts(hf, tensor.MXFP4)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gpt-oss.cmf")
	if err := writer.SaveCMF(q, path, writer.SaveOptions{Keep: true}); err != nil {
		t.Fatal(err)
	}
	m, err := importer.FromCMF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if a, b := m.Arch, q.Arch; !reflect.DeepEqual(a, b) {
		t.Fatalf("arch read back as %+v, want %+v", a, b)
	}
	if w, _ := m.Weights.Tensor(model.LayerTensor(0, model.FFNDownExps)); w.Codec != tensor.MXFP4 {
		t.Fatalf("experts read back as %s", w.Codec)
	}
	ids := fixtures.LoadReference(t, dir).InputIDs
	run := func(m *model.Model) []float32 {
		b, err := New(m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := b.NewSession(len(ids))
		lg, err := s.Forward(ids, true)
		if err != nil {
			t.Fatal(err)
		}
		return lg
	}
	if d, _ := maxAbsDiff(run(m), run(q)); d != 0 {
		t.Errorf("logits differ by %.3g after the round trip", d)
	}
}
