package importer

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

func TestCMFRoundTripStories(t *testing.T) {
	src := ggufStoriesPath(t)
	m, err := FromGGUF(src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Source, err = GGUFProvenance(src); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "stories.cmf")
	if err := writer.SaveCMF(m, p, writer.SaveOptions{Keep: true}); err != nil {
		t.Fatal(err)
	}
	c, err := FromCMF(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !reflect.DeepEqual(c.Arch, m.Arch) {
		t.Errorf("arch differs:\n%+v\n%+v", c.Arch, m.Arch)
	}
	if !reflect.DeepEqual(c.Tokenizer, m.Tokenizer) || !reflect.DeepEqual(c.Source, m.Source) {
		t.Error("tokenizer or provenance differs")
	}
	if len(c.Weights.Names()) != len(m.Weights.Names()) {
		t.Fatalf("%d tensors, want %d", len(c.Weights.Names()), len(m.Weights.Names()))
	}
	for _, n := range m.Weights.Names() {
		a, _ := m.Weights.Tensor(n)
		b, ok := c.Weights.Tensor(n)
		if !ok || a.Codec != b.Codec || !reflect.DeepEqual(a.Shape, b.Shape) || !bytes.Equal(a.Data, b.Data) {
			t.Errorf("tensor %s differs", n)
		}
	}
	f, err := cmf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Verify(); err != nil {
		t.Error(err)
	}
	f.Close()

	// Deterministic: saving again gives the same bytes.
	p2 := filepath.Join(dir, "again.cmf")
	if err := writer.SaveCMF(c, p2, writer.SaveOptions{Keep: true}); err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(p)
	b2, _ := os.ReadFile(p2)
	if !bytes.Equal(b1, b2) {
		t.Error("saving twice gave different bytes")
	}
	if _, err := os.Stat(p + ".tmp"); !os.IsNotExist(err) {
		t.Error("temporary file left behind")
	}
}

func TestCMFQuantize(t *testing.T) {
	m, err := FromGGUF(ggufStoriesPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := filepath.Join(t.TempDir(), "q8.cmf")
	if err := writer.SaveCMF(m, p, writer.SaveOptions{Quant: tensor.Q8_0}); err != nil {
		t.Fatal(err)
	}
	c, err := FromCMF(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range m.Weights.Names() {
		a, _ := m.Weights.Tensor(n)
		b, _ := c.Weights.Tensor(n)
		want := tensor.Q8_0
		if len(a.Shape) < 2 || a.Cols()%32 != 0 {
			want = a.Codec // norms and the 172-wide ffn_down stay f32
		}
		if b.Codec != want || !reflect.DeepEqual(a.Shape, b.Shape) {
			t.Errorf("%s: %v %v, want %v", n, b.Codec, b.Shape, want)
			continue
		}
		x := make([]float32, a.Elements())
		y := make([]float32, b.Elements())
		if err := tensor.Dequantize(x, a.Codec, a.Data); err != nil {
			t.Fatal(err)
		}
		if err := tensor.Dequantize(y, b.Codec, b.Data); err != nil {
			t.Fatal(err)
		}
		var maxAbs, maxErr float64
		for i := range x {
			maxAbs = max(maxAbs, math.Abs(float64(x[i])))
			maxErr = max(maxErr, math.Abs(float64(x[i]-y[i])))
		}
		if maxErr > maxAbs/100 {
			t.Errorf("%s: q8_0 error %g for values up to %g", n, maxErr, maxAbs)
		}
	}
	if err := writer.SaveCMF(m, p, writer.SaveOptions{Quant: tensor.I32}); err == nil {
		t.Error("i32 accepted")
	}
	if err := writer.SaveCMF(m, p, writer.SaveOptions{Quant: tensor.Codec(99)}); err == nil {
		t.Error("unknown codec accepted")
	}
}

func TestFromCMFErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.cmf")
	os.WriteFile(bad, []byte("CMF\x00 too short"), 0o644)
	if _, err := FromCMF(bad); err == nil {
		t.Error("short file opened")
	}
	// A structurally valid file with an invalid arch.
	w, err := cmf.Create(filepath.Join(dir, "arch.cmf"), &cmf.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := FromCMF(filepath.Join(dir, "arch.cmf")); err == nil {
		t.Error("empty arch accepted")
	}
}

// Through a plain io.ReaderAt (as in the browser) the files import lazily
// and give the same model.
func TestFromFileReaderAt(t *testing.T) {
	src := ggufStoriesPath(t)
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	gf, err := gguf.Read(bytes.NewReader(raw), int64(len(raw)), src)
	if err != nil {
		t.Fatal(err)
	}
	lazy, err := FromGGUFFile(gf)
	if err != nil {
		t.Fatal(err)
	}
	mapped, err := FromGGUF(src)
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	if _, ok := lazy.Weights.(model.MapWeights); ok {
		t.Error("unmapped file gave eager weights")
	}
	if !reflect.DeepEqual(lazy.Arch, mapped.Arch) {
		t.Error("arch differs")
	}
	for _, n := range mapped.Weights.Names() {
		a, _ := mapped.Weights.Tensor(n)
		b, ok := lazy.Weights.Tensor(n)
		if !ok || !bytes.Equal(a.Data, b.Data) || !reflect.DeepEqual(a.Shape, b.Shape) {
			t.Errorf("%s differs", n)
		}
	}
	p := filepath.Join(t.TempDir(), "s.cmf")
	if err := writer.SaveCMF(lazy, p, writer.SaveOptions{Quant: tensor.Q8_0}); err != nil {
		t.Fatal(err)
	}
	craw, _ := os.ReadFile(p)
	cf, err := cmf.Read(bytes.NewReader(craw), int64(len(craw)), p)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := FromCMFFile(cf)
	if err != nil {
		t.Fatal(err)
	}
	q, ok := cm.Weights.Tensor("blk.0.attn_q.weight")
	if !ok || q.Codec != tensor.Q8_0 {
		t.Errorf("cmf lazy tensor: %v", q)
	}
	if _, ok := cm.Weights.Tensor("nope"); ok {
		t.Error("absent tensor found")
	}
	cm.Close()
	if _, ok := cm.Weights.Tensor("blk.0.attn_q.weight"); ok {
		t.Error("tensor read after Close")
	}
	if err := cm.Weights.(interface{ Err() error }).Err(); err == nil {
		t.Error("no error recorded")
	}
}
