package importer

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
)

// sideModel is a one-layer model, hidden 64, whose attn_q is q8_2f and
// whose ffn_up is blr, every tensor copied into memory.
func sideModel(t testing.TB) *model.Model {
	dir := t.TempDir()
	src := filepath.Join(dir, "m.gguf")
	shape := synth.Shape{Name: "s", Arch: "llama", Hidden: 64, Layers: 1, Heads: 2, KVHeads: 2, FFN: 64,
		Vocab: 16, RopeTheta: 10000, Context: 16}
	if err := synth.Write(src, shape, tensor.F32); err != nil {
		t.Fatal(err)
	}
	m, err := FromGGUF(src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w := model.MapWeights{}
	for _, name := range m.Weights.Names() {
		x, _ := m.Weights.Tensor(name)
		c := *x
		c.Data = bytes.Clone(x.Data)
		w[name] = &c
	}
	for name, codec := range map[string]tensor.Codec{"blk.0.attn_q.weight": tensor.Q8_2F, "blk.0.ffn_up.weight": tensor.BLR} {
		x := w[name]
		f := make([]float32, x.Elements())
		if err := tensor.DequantizeTensor(f, x); err != nil {
			t.Fatal(err)
		}
		data, side, err := tensor.EncodeTensor(codec, x.Shape, f)
		if err != nil {
			t.Fatal(err)
		}
		w[name] = &tensor.Tensor{Name: name, Codec: codec, Shape: x.Shape, Data: data, Side: side}
	}
	out := *m
	out.Weights, out.Close = w, nil
	return &out
}

// FuzzCMFSideField writes the side field of a q8_2f or a blr tensor from
// arbitrary bytes, reads the file back as run does and runs two tokens on
// the CPU: the writer and the reader refuse exactly the side fields of the
// wrong length (blr: not a whole rank) naming the tensor, and whatever
// they accept loads and gives logits or a NonFiniteError, never a panic.
func FuzzCMFSideField(f *testing.F) {
	base := sideModel(f)
	victims := []string{"blk.0.attn_q.weight", "blk.0.ffn_up.weight"}
	for i, v := range victims {
		x, _ := base.Weights.Tensor(v)
		f.Add(uint8(i), x.Side)
		f.Add(uint8(i), x.Side[:len(x.Side)/2])
	}
	f.Fuzz(func(t *testing.T, which uint8, side []byte) {
		victim := victims[int(which)%len(victims)]
		var buf bytes.Buffer
		cw, err := cmf.NewWriter(&buf, &cmf.Metadata{Arch: base.Arch, Tokenizer: base.Tokenizer})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range base.Weights.Names() {
			x, _ := base.Weights.Tensor(name)
			if name == victim {
				c := *x
				c.Side = side
				x = &c
			}
			err := cw.WriteTensor(x)
			if name == victim && (err == nil) != (x.CheckSide() == nil) {
				t.Fatalf("WriteTensor %v, CheckSide %v", err, x.CheckSide())
			}
			if err != nil {
				return
			}
		}
		if err := cw.Close(); err != nil {
			t.Fatal(err)
		}
		cf, err := cmf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "fuzz.cmf")
		if err != nil {
			t.Fatalf("a file the writer wrote does not read: %v", err)
		}
		m, err := FromCMFFile(cf)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		b, err := cpu.New(m, cpu.Options{})
		if err != nil {
			t.Fatalf("cpu: %v", err)
		}
		s, err := b.NewSession(4)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		logits, err := s.Forward([]int{0, m.Arch.Vocab - 1}, false)
		var nf *cpu.NonFiniteError
		if err != nil && !errors.As(err, &nf) {
			t.Fatalf("forward: %v", err)
		}
		if err == nil && len(logits) != m.Arch.Vocab {
			t.Fatalf("%d logits", len(logits))
		}
	})
}
