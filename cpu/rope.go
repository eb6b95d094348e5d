package cpu

import "github.com/cortiq/cortiq/model"

// applyRope rotates every head of x (heads*headDim values) for position pos
// by t (model.NewRopeTable: the frequencies every backend shares); cos and
// sin are scratch of t.Dims/2 values.
func applyRope(t *model.RopeTable, x []float32, heads, headDim, pos int, cos, sin []float32) {
	if t.Dims == 0 {
		return
	}
	half := t.Dims / 2
	t.CosSin(pos, cos, sin)
	for h := range heads {
		v := x[h*headDim : h*headDim+t.Dims]
		if t.Style == model.RopeNeoX {
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
