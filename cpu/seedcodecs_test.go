package cpu

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

// TestSeedCodecs converts a tiny float32 llama to each of the seed's codecs
// through writer.SaveCMF (what `cortiq import --quant CODEC` runs), reopens
// the CMF file and runs it next to its float32 twin (the same weights
// decoded): logits within 1e-4 on the exact CPU path, greedy tokens equal,
// and every matrix (embedding and head included) stored in the codec.
func TestSeedCodecs(t *testing.T) {
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	dir := t.TempDir()
	src := filepath.Join(dir, "f32.gguf")
	if err := synth.Write(src, ggufTypeShape, tensor.F32); err != nil {
		t.Fatal(err)
	}
	f, err := importer.Open(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []tensor.Codec{tensor.Q8_ROW, tensor.Q4_TILED, tensor.Q4TP, tensor.Q2TP, tensor.Q1, tensor.Q1G, tensor.Q1T, tensor.Q8_2F, tensor.BLR} {
		t.Run(c.String(), func(t *testing.T) {
			path := filepath.Join(dir, c.String()+".cmf")
			if err := writer.SaveCMF(f, path, writer.SaveOptions{Quant: c}); err != nil {
				t.Fatal(err)
			}
			m, err := importer.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			n := 0
			for _, name := range m.Weights.Names() {
				if w, _ := m.Weights.Tensor(name); w.Codec == c {
					n++
				}
			}
			want := 9 // one layer's 7 matrices, embedding and output
			if c == tensor.BLR {
				want = 7 // the embedding and the head keep their encoding
			}
			if n != want {
				t.Errorf("%d tensors in %s, want %d", n, c, want)
			}
			twin := dequantizedTwin(t, m)
			ids := []int{1, 7, 200, 42, 255, 2, 99, 3}
			checkTwin(t, c.String(), m, twin, ids, 8, 32)
		})
	}
}

// TestQ82FBank: a routed-expert model converted to q8_2f keeps one column
// field per expert (a [E, out, in] bank's side field holds E) and runs next
// to its float32 twin within 1e-4, greedy tokens equal, so each expert's
// product takes its own field.
func TestQ82FBank(t *testing.T) {
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	dir := t.TempDir()
	src := filepath.Join(dir, "moe.gguf")
	shape := ggufTypeShape
	shape.Hidden, shape.FFN, shape.Experts, shape.ExpertsUsed = 128, 64, 4, 2
	if err := synth.Write(src, shape, tensor.F32); err != nil {
		t.Fatal(err)
	}
	f, err := importer.Open(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	path := filepath.Join(dir, "moe-q8_2f.cmf")
	if err := writer.SaveCMF(f, path, writer.SaveOptions{Quant: tensor.Q8_2F}); err != nil {
		t.Fatal(err)
	}
	m, err := importer.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	bank, ok := m.Weights.Tensor("blk.0.ffn_down_exps.weight")
	if !ok || bank.Codec != tensor.Q8_2F || len(bank.Side) != 4*64*2 {
		t.Fatalf("down bank: %v %v, %d bytes of side", ok, bank.Codec, len(bank.Side))
	}
	checkTwin(t, "q8_2f moe", m, dequantizedTwin(t, m), []int{1, 7, 200, 42, 255, 2, 99, 3}, 8, 32)
}
