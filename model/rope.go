package model

import (
	"errors"
	"fmt"
	"math"
)

// ErrRopeScaling is wrapped by RopeFrequencies' error for a scaling type it
// does not know.
var ErrRopeScaling = errors.New("rope scaling not supported")

// RopeFrequencies returns the inverse frequency of each rotated pair of a
// rotary embedding (r.Dims/2 values) and the factor cos and sin are
// multiplied by (YaRN's attention factor, 1 otherwise), computed the way
// transformers computes them: float32 powers of the base, then the scaling
// rule. Every backend uploads this one table, so that they rotate alike. A
// NoPE layer (Dims 0) gives no frequencies and factor 1.
func RopeFrequencies(r Rope) (invFreq []float32, mscale float32, err error) {
	if r.Dims == 0 {
		return nil, 1, nil
	}
	if r.Dims < 0 || r.Dims%2 != 0 {
		return nil, 0, fmt.Errorf("rope dims %d", r.Dims)
	}
	if r.Theta <= 0 || math.IsNaN(r.Theta) || math.IsInf(r.Theta, 0) {
		return nil, 0, fmt.Errorf("rope theta %v", r.Theta)
	}
	half := r.Dims / 2
	// transformers: base ** (arange(0, dim, 2).float() / dim) in float32.
	pos := make([]float32, half)
	inv := make([]float32, half)
	for i := range half {
		e := float32(2*i) / float32(r.Dims)
		pos[i] = float32(math.Pow(r.Theta, float64(e)))
		inv[i] = 1 / pos[i]
	}
	mscale = 1
	s := &r.Scaling
	switch s.Type {
	case "", "default", "none":
	case "linear":
		for i := range inv {
			inv[i] /= float32(s.Factor)
		}
	case "llama3":
		// transformers' _compute_llama3_parameters.
		lowWavelen := float64(s.OriginalContext) / s.LowFreqFactor
		highWavelen := float64(s.OriginalContext) / s.HighFreqFactor
		for i, f := range inv {
			wavelen := 2 * math.Pi / float64(f)
			switch {
			case wavelen > lowWavelen:
				inv[i] = f / float32(s.Factor)
			case wavelen < highWavelen:
			default:
				smooth := (float64(s.OriginalContext)/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
				inv[i] = float32((1-smooth)*float64(f)/s.Factor + smooth*float64(f))
			}
		}
	case "yarn":
		// transformers' _compute_yarn_parameters: a linear ramp between
		// the extrapolated (1/pos) and interpolated (1/(factor*pos))
		// frequencies over the correction range [low, high], floored and
		// ceiled unless NoTruncate.
		if s.Factor <= 0 || s.OriginalContext <= 0 {
			return nil, 0, fmt.Errorf("yarn factor %v over %d positions", s.Factor, s.OriginalContext)
		}
		dim := float64(r.Dims)
		corr := func(rot float64) float64 {
			return dim * math.Log(float64(s.OriginalContext)/(rot*2*math.Pi)) / (2 * math.Log(r.Theta))
		}
		low, high := corr(s.BetaFast), corr(s.BetaSlow)
		if !s.NoTruncate {
			low, high = math.Floor(low), math.Ceil(high)
		}
		low, high = math.Max(low, 0), math.Min(high, dim-1)
		if low == high {
			high += 0.001
		}
		// torch: (arange(half, float32) - low) / (high - low), the Python
		// floats taken as float32 scalars.
		lo32, span32 := float32(low), float32(high-low)
		factor := float32(s.Factor)
		for i := range inv {
			ramp := (float32(i) - lo32) / span32
			ramp = min(max(ramp, 0), 1)
			extra := 1 - ramp
			interp := 1 / (factor * pos[i])
			inv[i] = interp*(1-extra) + inv[i]*extra
		}
		if s.AttnFactor > 0 {
			mscale = float32(s.AttnFactor)
		}
	default:
		return nil, 0, fmt.Errorf("%w: %q", ErrRopeScaling, s.Type)
	}
	return inv, mscale, nil
}

// ErrRopeStyle is wrapped by NewRopeTable's error for a rope style it does
// not know.
var ErrRopeStyle = errors.New("rope style not supported")

// RopeTable is one attention layer's rotary embedding as every backend
// applies it, derived once from the layer's Rope: the inverse frequency of
// each rotated pair and the factor cos and sin are multiplied by. Backends
// differ only in where they rotate (the CPU per position, the GPU kernels
// from the CosSinRows table), never in the numbers.
type RopeTable struct {
	Dims    int       // rotated dims per head; 0 = NoPE
	Style   RopeStyle // which pairs rotate
	InvFreq []float32 // Dims/2 inverse frequencies (RopeFrequencies)
	MScale  float32   // cos and sin are multiplied by this (YaRN's attention factor, else 1)
}

// NewRopeTable checks r against a head of headDim values (rotated dims even
// and at most headDim, a known style, a known scaling) and derives its
// table. A NoPE layer (Dims 0) gives an empty table that rotates nothing.
// An unknown style wraps ErrRopeStyle, an unknown scaling ErrRopeScaling.
func NewRopeTable(r Rope, headDim int) (*RopeTable, error) {
	t := &RopeTable{Dims: r.Dims, Style: r.Style, MScale: 1}
	if r.Dims == 0 {
		return t, nil
	}
	if r.Dims < 0 || r.Dims > headDim || r.Dims%2 != 0 {
		return nil, fmt.Errorf("rope dims %d for head dim %d", r.Dims, headDim)
	}
	switch r.Style {
	case RopeNeoX, RopeInterleaved:
	default:
		return nil, fmt.Errorf("%w: %q", ErrRopeStyle, r.Style)
	}
	inv, mscale, err := RopeFrequencies(r)
	if err != nil {
		return nil, err
	}
	t.InvFreq, t.MScale = inv, mscale
	return t, nil
}

// CosSin fills cos and sin (Dims/2 values each) for position pos: the angle
// float32(pos)·invFreq rounded to float32 as the reference does, the
// trigonometry in float64 (float32 and GPU sin/cos are too coarse for
// parity), times MScale.
func (t *RopeTable) CosSin(pos int, cos, sin []float32) {
	for i, f := range t.InvFreq {
		a := float64(float32(pos) * f)
		cos[i] = float32(math.Cos(a)) * t.MScale
		sin[i] = float32(math.Sin(a)) * t.MScale
	}
}

// CosSinRows is CosSin for positions 0..n-1 in one slice, (cos, sin)
// interleaved per rotated pair, position after position: the table device
// backends upload (Dims·n values).
func (t *RopeTable) CosSinRows(n int) []float32 {
	half := len(t.InvFreq)
	out := make([]float32, 2*half*n)
	cos, sin := make([]float32, half), make([]float32, half)
	for p := range n {
		t.CosSin(p, cos, sin)
		for i := range half {
			out[2*(p*half+i)] = cos[i]
			out[2*(p*half+i)+1] = sin[i]
		}
	}
	return out
}

// Scales are an Arch's multipliers with "0 means 1" decided: an arch
// written without a field (0) multiplies by 1. Backends read these, never
// the raw fields.
type Scales struct {
	Embed    float32 // embeddings are multiplied by this
	Residual float32 // branch outputs before the residual add
	Logit    float32 // logits (before the final softcap)
}

// Scales returns a's multipliers, 0 read as 1.
func (a *Arch) Scales() Scales {
	return Scales{Embed: orOne(a.EmbedScale), Residual: orOne(a.ResidualScale), Logit: orOne(a.LogitScale)}
}

// Routed is the multiplier of the routed experts' output, RoutedScale with
// 0 read as 1.
func (m *MoE) Routed() float32 { return orOne(m.RoutedScale) }

func orOne(v float32) float32 {
	if v == 0 {
		return 1
	}
	return v
}
