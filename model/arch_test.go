package model

import (
	"errors"
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

func TestRopeTable(t *testing.T) {
	r := Rope{Theta: 10000, Dims: 8, Style: RopeNeoX, Scaling: RopeScaling{Type: "yarn", Factor: 4, OriginalContext: 64, BetaFast: 32, BetaSlow: 1, AttnFactor: 1.5}}
	tab, err := NewRopeTable(r, 16)
	if err != nil {
		t.Fatal(err)
	}
	inv, mscale, err := RopeFrequencies(r)
	if err != nil {
		t.Fatal(err)
	}
	if tab.MScale != mscale || len(tab.InvFreq) != len(inv) {
		t.Fatalf("table %v ×%v, frequencies %v ×%v", tab.InvFreq, tab.MScale, inv, mscale)
	}
	rows := tab.CosSinRows(5)
	cos, sin := make([]float32, 4), make([]float32, 4)
	for p := range 5 {
		tab.CosSin(p, cos, sin)
		for i := range 4 {
			if rows[2*(p*4+i)] != cos[i] || rows[2*(p*4+i)+1] != sin[i] {
				t.Fatalf("position %d pair %d: rows (%v, %v), CosSin (%v, %v)", p, i, rows[2*(p*4+i)], rows[2*(p*4+i)+1], cos[i], sin[i])
			}
		}
	}
	if tab.CosSinRows(1)[0] != 1.5 {
		t.Fatalf("cos at position 0 is %v, want the attention factor", tab.CosSinRows(1)[0])
	}
	for _, bad := range []struct {
		r    Rope
		want error
	}{{Rope{Theta: 1e4, Dims: 8, Style: "odd"}, ErrRopeStyle}, {Rope{Theta: 1e4, Dims: 8, Style: RopeNeoX, Scaling: RopeScaling{Type: "dynamic", Factor: 2}}, ErrRopeScaling}} {
		if _, err := NewRopeTable(bad.r, 16); !errors.Is(err, bad.want) {
			t.Errorf("%+v: error %v, want %v", bad.r, err, bad.want)
		}
	}
	if _, err := NewRopeTable(Rope{Theta: 1e4, Dims: 32, Style: RopeNeoX}, 16); err == nil {
		t.Error("32 rotated dims of a 16-wide head accepted")
	}
	if nope, err := NewRopeTable(Rope{}, 16); err != nil || nope.Dims != 0 || len(nope.InvFreq) != 0 {
		t.Errorf("NoPE: %+v, %v", nope, err)
	}
}

func TestScales(t *testing.T) {
	a := Arch{ResidualScale: 0.25}
	if s := a.Scales(); s != (Scales{Embed: 1, Residual: 0.25, Logit: 1}) {
		t.Fatalf("scales %+v", s)
	}
	if r := (&MoE{}).Routed(); r != 1 {
		t.Fatalf("routed scale of 0 is %v, want 1", r)
	}
	if r := (&MoE{RoutedScale: 2.5}).Routed(); r != 2.5 {
		t.Fatalf("routed scale %v, want 2.5", r)
	}
}
