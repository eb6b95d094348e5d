package diffusion

import "math"

// RandomDiTSpec is a DiT of config c whose blocks all share one block of
// random weights (uniform, unit-variance outputs for unit inputs): what the
// device benchmarks run at real shapes without a model on disk.
func RandomDiTSpec(c DiTConfig) *DiTSpec {
	D := c.Dim
	F := int(float64(D) / 3 * 8)
	hd := D / c.Heads
	rng := uint64(0x9e3779b97f4a7c15)
	rnd := func(n int, a float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			rng ^= rng << 13
			rng ^= rng >> 7
			rng ^= rng << 17
			x[i] = a * (float32(rng>>40)/float32(1<<24)*2 - 1)
		}
		return x
	}
	ones := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = 1
		}
		return x
	}
	wd, wf := float32(math.Sqrt(3/float64(D))), float32(math.Sqrt(3/float64(F)))
	blk := BlockSpec{Q: rnd(D*D, wd), K: rnd(D*D, wd), V: rnd(D*D, wd), O: rnd(D*D, wd),
		AttnNorm1: ones(D), AttnNorm2: ones(D), FFNNorm1: ones(D), FFNNorm2: ones(D),
		W1: rnd(F*D, wd), W3: rnd(F*D, wd), W2: rnd(D*F, wf)}
	if c.QKNorm {
		blk.QNorm, blk.KNorm = ones(hd), ones(hd)
	}
	patch := c.PatchSizes[0] * c.PatchSizes[0] * c.FPatchSizes[0] * c.InChannels
	s := &DiTSpec{Dim: D, Heads: c.Heads, HeadDim: hd, FFN: F, PatchDim: patch,
		Eps: c.NormEps, QKEps: 1e-5, FinalEps: 1e-6, FinalW: rnd(patch*D, wd), FinalB: rnd(patch, 0.1)}
	for range c.RefinerLayers {
		s.NoiseRefiner = append(s.NoiseRefiner, blk)
		s.ContextRefiner = append(s.ContextRefiner, blk)
	}
	for range c.Layers {
		s.Layers = append(s.Layers, blk)
	}
	return s
}

// RandomDiTInput is an evaluation of nImg image and capRows caption rows
// (each padded to a multiple of 32) with random rows, rotations of random
// angles and modulation vectors near the identity.
func RandomDiTInput(s *DiTSpec, nImg, capRows int, seed uint64) *DiTInput {
	pad := func(n int) int { return (n + 31) &^ 31 }
	rng := seed*0x9e3779b97f4a7c15 | 1
	u := func() float32 {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return float32(rng>>40)/float32(1<<24)*2 - 1
	}
	rows := func(n int) []float32 {
		x := make([]float32, n*s.Dim)
		for i := range x {
			x[i] = u()
		}
		return x
	}
	rope := func(n int) []float32 {
		x := make([]float32, n*s.HeadDim)
		for i := 0; i < len(x); i += 2 {
			a := float64(u()) * math.Pi
			x[i], x[i+1] = float32(math.Cos(a)), float32(math.Sin(a))
		}
		return x
	}
	mod := func() []float32 {
		m := make([]float32, 4*s.Dim)
		for i := range m {
			m[i] = 0.1 * u()
			if (i/s.Dim)%2 == 0 {
				m[i] += 1 // 1+scale
			}
		}
		return m
	}
	in := &DiTInput{ImgRows: pad(nImg), NImg: nImg, CapRows: pad(capRows)}
	in.Img, in.Cap = rows(in.ImgRows), rows(in.CapRows)
	in.ImgRope, in.CapRope = rope(in.ImgRows), rope(in.CapRows)
	m := mod()
	for range s.NoiseRefiner {
		in.NoiseMod = append(in.NoiseMod, m)
	}
	for range s.Layers {
		in.LayerMod = append(in.LayerMod, m)
	}
	in.FinalScale = m[:s.Dim]
	return in
}
