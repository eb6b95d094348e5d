package model

import (
	"math"
	"strings"
	"testing"
)

func validArch() Arch {
	return Arch{Family: "llama", Vocab: 8, Hidden: 4, Context: 16, NormEps: 1e-5, Norm: NormRMS, Act: ActSiLU,
		EmbedScale: 1, ResidualScale: 1, LogitScale: 1, BOS: 1, EOS: []int{2},
		Layers: []Layer{{Mixer: MixerAttention, FFN: FFNDense, FFNHidden: 8, PreMixerNorm: true, PreFFNNorm: true,
			Attn: &Attention{Heads: 2, KVHeads: 1, HeadDim: 2, Scale: 0.7, Rope: Rope{Theta: 10000, Dims: 2, Style: RopeNeoX}}}}}
}

// Validate refuses every number the forward pass cannot use, and says
// which in words (no Go struct).
func TestValidateNumbers(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	ok := validArch()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	zeroScales := validArch()
	zeroScales.EmbedScale, zeroScales.ResidualScale, zeroScales.LogitScale = 0, 0, 0 // 0 means 1
	if err := zeroScales.Validate(); err != nil {
		t.Fatalf("zero scales: %v", err)
	}
	for _, c := range []struct {
		edit func(a *Arch)
		want string
	}{
		{func(a *Arch) { a.NormEps = nan }, "norm epsilon NaN"},
		{func(a *Arch) { a.NormEps = 0 }, "norm epsilon 0"},
		{func(a *Arch) { a.NormEps = -1e-6 }, "norm epsilon -1e-06"},
		{func(a *Arch) { a.NormEps = inf }, "norm epsilon +Inf"},
		{func(a *Arch) { a.LogitScale = nan }, "logit scale NaN"},
		{func(a *Arch) { a.EmbedScale = inf }, "embedding scale +Inf"},
		{func(a *Arch) { a.ResidualScale = -inf }, "residual scale -Inf"},
		{func(a *Arch) { a.FinalSoftcap = -1 }, "final logit softcap -1"},
		{func(a *Arch) { a.Context = -1 }, "context -1"},
		{func(a *Arch) { a.Vocab = 1 << 30 }, "at most"},
		{func(a *Arch) { a.BOS = -2 }, "BOS id -2"},
		{func(a *Arch) { a.EOS = []int{-1} }, "EOS id -1"},
		{func(a *Arch) { a.Layers[0].Attn.Rope.Theta = math.NaN() }, "rope theta NaN"},
		{func(a *Arch) { a.Layers[0].Attn.Rope.Theta = math.Inf(1) }, "rope theta +Inf"},
		{func(a *Arch) { a.Layers[0].Attn.Rope.Theta = 0 }, "rope theta 0"},
		{func(a *Arch) { a.Layers[0].Attn.Rope.Scaling.Factor = math.NaN() }, "rope scaling factor NaN"},
		{func(a *Arch) { a.Layers[0].Attn.Rope.Scaling = RopeScaling{Type: "linear"} }, `rope scaling "linear" with factor 0`},
		{func(a *Arch) { a.Layers[0].Attn.Scale = nan }, "attention scale NaN"},
		{func(a *Arch) { a.Layers[0].Attn.Scale = 0 }, "attention scale 0"},
		{func(a *Arch) { a.Layers[0].Attn.Softcap = inf }, "attention softcap +Inf"},
		{func(a *Arch) { a.Layers[0].Attn.Window = -1 }, "attention window -1"},
		{func(a *Arch) { a.Layers[0].Attn.HeadDim = -2 }, "layer 0: attention: head dim -2"},
		{func(a *Arch) { a.Layers[0].Attn.KVHeads = 2; a.Layers[0].Attn.Heads = 3 }, "3 heads is not a multiple of 2 kv heads"},
		{func(a *Arch) { a.Layers[0].Attn = nil }, "attention layer without an attention spec"},
		{func(a *Arch) { a.Layers[0].FFNHidden = -8 }, "dense FFN width -8"},
		{func(a *Arch) {
			a.Layers[0].FFN = FFNMoE
			a.Layers[0].MoE = &MoE{Experts: 4, TopK: 2, ExpertHidden: 8, RoutedScale: nan}
		}, "MoE: routed scale NaN"},
		{func(a *Arch) { a.Layers[0].FFN = FFNMoE; a.Layers[0].MoE = &MoE{Experts: 2, TopK: 3, ExpertHidden: 8} }, "3 experts per token of 2"},
		{func(a *Arch) {
			a.Layers[0].Mixer = MixerGatedDelta
			a.Layers[0].Delta = &GatedDelta{KeyHeads: 2, ValueHeads: 3, KeyDim: 4, ValueDim: 4, ConvKernel: 4}
		}, "3 value heads is not a multiple of 2 key heads"},
		{func(a *Arch) { a.Layers[0].Mixer = MixerShortConv; a.Layers[0].Conv = &ShortConv{Kernel: -3} }, "short-conv kernel -3"},
	} {
		a := validArch()
		at := *a.Layers[0].Attn
		a.Layers[0].Attn = &at
		c.edit(&a)
		err := a.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one containing %q", err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "&{") {
			t.Errorf("error %q prints a Go struct", err)
		}
	}
}
