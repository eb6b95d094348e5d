package cpu

import (
	"fmt"
	"math"

	"github.com/cortiq/cortiq/model"
)

// ropeTable is one layer's rotary embedding: the inverse frequency of every
// rotated pair and the cos/sin multiplier, from model.RopeFrequencies.
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
	inv, mscale, err := model.RopeFrequencies(*r)
	if err != nil {
		return nil, err
	}
	t.invFreq, t.mscale = inv, mscale
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
