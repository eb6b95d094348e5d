package webgpu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

// TestParityQ82F runs q8_2f CMF files (`cortiq import --quant q8_2f`) on
// the device next to the CPU's exact kernels: a dense llama whose fused
// q/k/v join three column fields in one weight, and a routed-expert model
// whose banks carry one field per expert; each memory-mapped and read
// unmapped (lazy weights, as in the browser). Prefill and decode logits
// within lowbitTol, weights held on the device as q8_2f.
func TestParityQ82F(t *testing.T) {
	d := testDevice(t)
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	dir := t.TempDir()
	dense := synth.Shape{Name: "k", Arch: "llama", Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, FFN: 192,
		Vocab: 256, RopeTheta: 10000, Context: 64}
	moe := dense
	moe.FFN, moe.Experts, moe.ExpertsUsed = 64, 4, 2
	for _, sh := range []struct {
		name  string
		shape synth.Shape
	}{{"dense", dense}, {"moe", moe}} {
		src := filepath.Join(dir, sh.name+".gguf")
		if err := synth.Write(src, sh.shape, tensor.F32); err != nil {
			t.Fatal(err)
		}
		f, err := importer.Open(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, sh.name+".cmf")
		err = writer.SaveCMF(f, path, writer.SaveOptions{Quant: tensor.Q8_2F})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, mapped := range []bool{true, false} {
			label := sh.name + "/mapped"
			if !mapped {
				label = sh.name + "/unmapped"
			}
			t.Run(label, func(t *testing.T) {
				var m *model.Model
				if mapped {
					if m, err = importer.FromCMF(path); err != nil {
						t.Fatal(err)
					}
				} else {
					fd, err := os.Open(path)
					if err != nil {
						t.Fatal(err)
					}
					defer fd.Close()
					st, _ := fd.Stat()
					cf, err := cmf.Read(fd, st.Size(), path)
					if err != nil {
						t.Fatal(err)
					}
					if m, err = importer.FromCMFFile(cf); err != nil {
						t.Fatal(err)
					}
				}
				defer m.Close()
				cb, err := cpu.New(m, cpu.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer cb.Close()
				gb, err := New(m, Options{Device: d, Chunk: 16})
				if err != nil {
					t.Fatal(err)
				}
				defer gb.Close()
				if gb.emb.codec != tensor.Q8_2F {
					t.Fatalf("device holds the embedding as %s", gb.emb.codec)
				}
				cs, err := cb.NewSession(32)
				if err != nil {
					t.Fatal(err)
				}
				gs, err := gb.NewSession(32)
				if err != nil {
					t.Fatal(err)
				}
				defer gs.Close()
				ids := []int{1, 7, 200, 42, 255, 2, 99, 3, 250, 17}
				want, err := cs.Forward(ids, true)
				if err != nil {
					t.Fatal(err)
				}
				got, err := gs.Forward(ids, true)
				if err != nil {
					t.Fatal(err)
				}
				checkRows(t, "prefill", got, want, sh.shape.Vocab, lowbitTol)
				for _, tok := range []int{5, 6} {
					if want, err = cs.Forward([]int{tok}, false); err != nil {
						t.Fatal(err)
					}
					if got, err = gs.Forward([]int{tok}, false); err != nil {
						t.Fatal(err)
					}
					checkRows(t, "decode", got, want, sh.shape.Vocab, lowbitTol)
				}
			})
		}
	}
}

// TestParityBLR runs a blr CMF file (`cortiq import --quant blr`: every
// layer projection two q1 products) on the device next to the CPU's exact
// kernels, prefill and decode logits within lowbitTol; each projection is
// held as its two stages, and the pre-norms the first stages read run at
// one-token steps. A blr embedding is refused before upload with
// ErrUnsupported naming it (the engine runs the model on the CPU).
func TestParityBLR(t *testing.T) {
	d := testDevice(t)
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	dir := t.TempDir()
	shape := synth.Shape{Name: "k", Arch: "llama", Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, FFN: 192,
		Vocab: 256, RopeTheta: 10000, Context: 64}
	src := filepath.Join(dir, "f32.gguf")
	if err := synth.Write(src, shape, tensor.F32); err != nil {
		t.Fatal(err)
	}
	f, err := importer.Open(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	path := filepath.Join(dir, "blr.cmf")
	if err := writer.SaveCMF(f, path, writer.SaveOptions{Quant: tensor.BLR}); err != nil {
		t.Fatal(err)
	}
	m, err := importer.FromCMF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cb, err := cpu.New(m, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	gb, err := New(m, Options{Device: d, Chunk: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer gb.Close()
	for _, w := range append(append([]*dweight{gb.layers[1].o, gb.layers[1].down}, gb.layers[1].qkv...), gb.layers[1].gu...) {
		if w.codec != tensor.BLR || w.stages[0] == nil || w.stages[0].codec != tensor.Q1 || w.stages[1].codec != tensor.Q1 {
			t.Fatalf("%s held as %s, stages %v", w.name, w.codec, w.stages)
		}
	}
	cs, err := cb.NewSession(32)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := gb.NewSession(32)
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	ids := []int{1, 7, 200, 42, 255, 2, 99, 3, 250, 17}
	prefillDecode(t, "", cs, gs, ids, shape.Vocab)

	// A mix: only k and up in blr, beside float32 q, v, gate (whose
	// one-token matvecs fuse the pre-norm): the norms must still run for
	// the blr first stages.
	mix := model.MapWeights{}
	for _, name := range f.Weights.Names() {
		x, _ := f.Weights.Tensor(name)
		if strings.HasSuffix(name, "attn_k.weight") || strings.HasSuffix(name, "ffn_up.weight") {
			xf := make([]float32, x.Elements())
			if err := tensor.DequantizeTensor(xf, x); err != nil {
				t.Fatal(err)
			}
			data, side, err := tensor.EncodeTensor(tensor.BLR, x.Shape, xf)
			if err != nil {
				t.Fatal(err)
			}
			x = &tensor.Tensor{Name: name, Codec: tensor.BLR, Shape: x.Shape, Data: data, Side: side}
		}
		mix[name] = x
	}
	mm := *f
	mm.Weights, mm.Close = mix, nil
	cpuRef, err := cpu.New(&mm, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cpuRef.Close()
	gm, err := New(&mm, Options{Device: d, Chunk: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer gm.Close()
	cs2, err := cpuRef.NewSession(32)
	if err != nil {
		t.Fatal(err)
	}
	gs2, err := gm.NewSession(32)
	if err != nil {
		t.Fatal(err)
	}
	defer gs2.Close()
	prefillDecode(t, "mix ", cs2, gs2, ids, shape.Vocab)

	// A blr embedding: refused by name before upload.
	w := model.MapWeights{}
	for _, name := range m.Weights.Names() {
		w[name], _ = m.Weights.Tensor(name)
	}
	emb := w[model.TokenEmbd]
	ef := make([]float32, emb.Elements())
	if err := tensor.DequantizeTensor(ef, emb); err != nil {
		t.Fatal(err)
	}
	data, side, err := tensor.EncodeTensor(tensor.BLR, emb.Shape, ef)
	if err != nil {
		t.Fatal(err)
	}
	w[model.TokenEmbd] = &tensor.Tensor{Name: model.TokenEmbd, Codec: tensor.BLR, Shape: emb.Shape, Data: data, Side: side}
	bm := *m
	bm.Weights, bm.Close = w, nil
	if b, err := New(&bm, Options{Device: d}); err == nil {
		b.Close()
		t.Fatal("a blr embedding was uploaded")
	} else if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), model.TokenEmbd) {
		t.Errorf("blr embedding: %v", err)
	}
}

// prefillDecode runs ids through the CPU session cs and the device session
// gs (every row's logits), then three single-token steps, and checks each
// pair of logits within lowbitTol ("<label>prefill", "<label>decode").
func prefillDecode(t *testing.T, label string, cs, gs backend.Session, ids []int, vocab int) {
	t.Helper()
	want, err := cs.Forward(ids, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := gs.Forward(ids, true)
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, label+"prefill", got, want, vocab, lowbitTol)
	for _, tok := range []int{5, 6, 7} {
		if want, err = cs.Forward([]int{tok}, false); err != nil {
			t.Fatal(err)
		}
		if got, err = gs.Forward([]int{tok}, false); err != nil {
			t.Fatal(err)
		}
		checkRows(t, label+"decode", got, want, vocab, lowbitTol)
	}
}
