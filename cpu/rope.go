package cpu

import (
	"fmt"
	"math"

	"github.com/cortiq/cortiq/model"
)

// ropeTable is one layer's rotary embedding: the inverse frequency of every
// rotated pair, computed the way transformers computes it (float32 powers of
// the base, then the scaling rule), and the cos/sin multiplier (YaRN's
// attention factor, 1 otherwise).
type ropeTable struct {
	dims    int // rotated dims per head; 0 = NoPE
	style   model.RopeStyle
	invFreq []float32 // dims/2
	mscale  float32
}

func newRopeTable(r *model.Rope, headDim int) (*ropeTable, error) {
	t := &ropeTable{dims: r.Dims, style: r.Style, mscale: 1}
	if r.Dims == 0 {
		return t, nil
	}
	if r.Dims > headDim || r.Dims%2 != 0 {
		return nil, fmt.Errorf("rope dims %d for head dim %d", r.Dims, headDim)
	}
	switch r.Style {
	case model.RopeNeoX, model.RopeInterleaved:
	default:
		return nil, fmt.Errorf("unknown rope style %q", r.Style)
	}
	if r.Theta <= 0 {
		return nil, fmt.Errorf("rope theta %v", r.Theta)
	}
	half := r.Dims / 2
	t.invFreq = make([]float32, half)
	for i := range half {
		// transformers: 1.0 / (base ** (arange(0, dim, 2).float() / dim)) in float32.
		e := float32(2*i) / float32(r.Dims)
		p := float32(math.Pow(r.Theta, float64(e)))
		t.invFreq[i] = 1 / p
	}
	s := &r.Scaling
	switch s.Type {
	case "", "default", "none":
	case "linear":
		for i := range t.invFreq {
			t.invFreq[i] /= float32(s.Factor)
		}
	case "llama3":
		// transformers' _compute_llama3_parameters.
		lowWavelen := float64(s.OriginalContext) / s.LowFreqFactor
		highWavelen := float64(s.OriginalContext) / s.HighFreqFactor
		for i, f := range t.invFreq {
			wavelen := 2 * math.Pi / float64(f)
			switch {
			case wavelen > lowWavelen:
				t.invFreq[i] = f / float32(s.Factor)
			case wavelen < highWavelen:
			default:
				smooth := (float64(s.OriginalContext)/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
				t.invFreq[i] = float32((1-smooth)*float64(f)/s.Factor + smooth*float64(f))
			}
		}
	case "yarn":
		// transformers' _compute_yarn_parameters (truncate=true).
		dim := float64(r.Dims)
		corr := func(rot float64) float64 {
			return dim * math.Log(float64(s.OriginalContext)/(rot*2*math.Pi)) / (2 * math.Log(r.Theta))
		}
		low := math.Max(math.Floor(corr(s.BetaFast)), 0)
		high := math.Min(math.Ceil(corr(s.BetaSlow)), dim-1)
		if low == high {
			high += 0.001
		}
		for i, f := range t.invFreq {
			ramp := float32((float64(i) - low) / (high - low))
			ramp = min(max(ramp, 0), 1)
			extra := 1 - ramp
			interp := f / float32(s.Factor)
			t.invFreq[i] = interp*(1-extra) + f*extra
		}
		if s.AttnFactor > 0 {
			t.mscale = float32(s.AttnFactor)
		}
	default:
		return nil, fmt.Errorf("rope scaling %q not supported", s.Type)
	}
	return t, nil
}

// apply rotates every head of x (heads*headDim values) for position pos.
func (t *ropeTable) apply(x []float32, heads, headDim, pos int, cos, sin []float32) {
	if t.dims == 0 {
		return
	}
	half := t.dims / 2
	for i, f := range t.invFreq {
		a := float32(pos) * f
		cos[i] = float32(math.Cos(float64(a))) * t.mscale
		sin[i] = float32(math.Sin(float64(a))) * t.mscale
	}
	for h := range heads {
		v := x[h*headDim : h*headDim+t.dims]
		if t.style == model.RopeNeoX {
			for i := range half {
				x0, x1 := v[i], v[i+half]
				v[i] = x0*cos[i] - x1*sin[i]
				v[i+half] = x1*cos[i] + x0*sin[i]
			}
		} else {
			for i := range half {
				x0, x1 := v[2*i], v[2*i+1]
				v[2*i] = x0*cos[i] - x1*sin[i]
				v[2*i+1] = x1*cos[i] + x0*sin[i]
			}
		}
	}
}

// RopeFrequencies returns the inverse frequency of each rotated pair
// (r.Dims/2 values) and the factor cos and sin are multiplied by, exactly as
// this backend computes them, so that other backends can upload the same
// table. A NoPE layer (Dims 0) gives no frequencies.
func RopeFrequencies(r model.Rope, headDim int) (invFreq []float32, mscale float32, err error) {
	t, err := newRopeTable(&r, headDim)
	if err != nil {
		return nil, 0, err
	}
	return append([]float32(nil), t.invFreq...), t.mscale, nil
}
