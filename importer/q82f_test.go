package importer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

// TestCMFQ82FSide: a q8_2f tensor's column field, stored after its rows,
// comes back as Tensor.Side (mapped and read on demand), and a flipped
// byte in it is found like one in the rows: the model refused naming the
// file and the tensor, mapped, on demand, and after every row was read in
// order (the side field completes the running checksum).
func TestCMFQ82FSide(t *testing.T) {
	const victim = "blk.0.attn_q.weight"
	dir := t.TempDir()
	src := filepath.Join(dir, "m.gguf")
	shape := synth.Shape{Name: "s", Arch: "llama", Hidden: 64, Layers: 1, Heads: 2, KVHeads: 1, FFN: 128,
		Vocab: 64, RopeTheta: 10000, Context: 64}
	if err := synth.Write(src, shape, tensor.F32); err != nil {
		t.Fatal(err)
	}
	m, err := FromGGUF(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "q82.cmf")
	err = writer.SaveCMF(m, p, writer.SaveOptions{Quant: tensor.Q8_2F})
	m.Close()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	open := func(raw []byte) *model.Model {
		f, err := cmf.Read(bytes.NewReader(raw), int64(len(raw)), p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := FromCMFFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	mapped, err := FromCMF(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*model.Model{mapped, open(raw)} {
		w, ok := m.Weights.Tensor(victim)
		if !ok || w.Codec != tensor.Q8_2F || len(w.Side) != 2*64 || len(w.Data) != 64*66 {
			t.Fatalf("%s: %v %v, %d bytes of rows, %d of side", victim, ok, w.Codec, len(w.Data), len(w.Side))
		}
		if _, err := cpu.New(m, cpu.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	mapped.Close()

	f, _ := cmf.Open(p)
	e, _ := f.Entry(victim)
	f.Close()
	raw[e.Offset+e.Length-3] ^= 0x40 // in the side field
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	wantErr := func(t *testing.T, err error) {
		t.Helper()
		var ce *cmf.ChecksumError
		if !errors.As(err, &ce) || ce.Tensor != victim || !strings.Contains(err.Error(), p) {
			t.Fatalf("error %v, want a checksum error naming %s and %s", err, p, victim)
		}
	}
	if mapped, err = FromCMF(p); err != nil {
		t.Fatal(err)
	}
	_, err = cpu.New(mapped, cpu.Options{})
	wantErr(t, err)
	mapped.Close()
	_, err = cpu.New(open(raw), cpu.Options{})
	wantErr(t, err)
	rr := open(raw).Weights.(model.RangeReader)
	rb, _ := tensor.Q8_2F.RowBytes(64)
	buf := make([]byte, rb)
	for r := range 64 {
		err := rr.ReadTensorRows(victim, r, 1, buf)
		if r < 63 && err != nil {
			t.Fatalf("row %d: %v", r, err)
		}
		if r == 63 {
			wantErr(t, err)
		}
	}
}
