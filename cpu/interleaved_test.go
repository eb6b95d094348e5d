package cpu

import (
	"context"
	"github.com/cortiq/cortiq/fixtures"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// unpermute undoes the rotate-half row permutation of a q/k projection:
// HF row h*hd + j*hd/2 + i holds original (interleaved-pair) row h*hd + 2i + j.
func unpermute(t *tensor.Tensor, heads int) *tensor.Tensor {
	rows, cols := t.Rows(), t.Cols()
	hd := rows / heads
	rb := len(t.Data) / rows
	out := &tensor.Tensor{Name: t.Name, Codec: t.Codec, Shape: []int{rows, cols}, Data: make([]byte, len(t.Data))}
	for h := range heads {
		for i := range hd / 2 {
			for j := range 2 {
				src := h*hd + j*hd/2 + i
				dst := h*hd + 2*i + j
				copy(out.Data[dst*rb:(dst+1)*rb], t.Data[src*rb:(src+1)*rb])
			}
		}
	}
	return out
}

// The stories260K checkpoint with its q/k rows put back in llama2.c's
// interleaved layout must give the same logits under interleaved RoPE.
func TestParityInterleavedRope(t *testing.T) {
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K_hf")
	m, err := importer.FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w := model.MapWeights{}
	for _, n := range m.Weights.Names() {
		w[n], _ = m.Weights.Tensor(n)
	}
	for i := range m.Arch.Layers {
		at := m.Arch.Layers[i].Attn
		at.Rope.Style = model.RopeInterleaved
		q, k := model.LayerTensor(i, model.AttnQ), model.LayerTensor(i, model.AttnK)
		w[q] = unpermute(w[q], at.Heads)
		w[k] = unpermute(w[k], at.KVHeads)
	}
	im := *m
	im.Weights = w
	checkParity(t, &im, fixtures.LoadReference(t, dir))
}

// stories260K.gguf keeps llama2.c's interleaved q/k layout (GGUF "NORM"
// RoPE); through the GGUF importer it must match the HF checkpoint's logits.
func TestStories260KGGUF(t *testing.T) {
	shared := fixtures.Dir(t)
	path := filepath.Join(shared, "fixtures", "models", "stories260K.gguf")
	m, err := importer.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if st := m.Arch.Layers[0].Attn.Rope.Style; st != model.RopeInterleaved {
		t.Errorf("rope style %q, want interleaved", st)
	}
	checkParity(t, m, fixtures.LoadReference(t, filepath.Join(shared, "fixtures", "models", "stories260K_hf")))
}
