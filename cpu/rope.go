package cpu

import (
	"slices"

	"github.com/cortiq/cortiq/model"
)

// rotate rotates every head of x (heads*headDim values) for one position
// by t (model.NewRopeTable: the frequencies every backend shares), given
// that position's cos and sin (t.Dims/2 values each, t.CosSin).
func rotate(t *model.RopeTable, x []float32, heads, headDim int, cos, sin []float32) {
	if t.Dims == 0 {
		return
	}
	half := t.Dims / 2
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

// ropeRows is a step's cos and sin rows for one table: positions
// pos..pos+n-1, t.Dims/2 values each, position after position.
type ropeRows struct {
	t        *model.RopeTable
	pos, n   int
	cos, sin []float32
}

// ropeFor returns the cos and sin rows of positions s.pos..s.pos+n-1 for
// table t, computed once per step for every layer whose table is equal
// to t (each layer has its own; most models' are all equal). The session
// forgets them when the next step starts, in runLayers.
func (s *Session) ropeFor(t *model.RopeTable, n int) ([]float32, []float32) {
	half := t.Dims / 2
	for i := range s.rope {
		if r := &s.rope[i]; r.pos == s.pos && r.n == n && sameRope(r.t, t) {
			return r.cos, r.sin
		}
	}
	if len(s.rope) < cap(s.rope) {
		s.rope = s.rope[:len(s.rope)+1]
	} else {
		s.rope = append(s.rope, ropeRows{})
	}
	r := &s.rope[len(s.rope)-1]
	r.t, r.pos, r.n = t, s.pos, n
	r.cos, r.sin = grow(r.cos, n*half), grow(r.sin, n*half)
	pos, cos, sin := s.pos, r.cos, r.sin
	parallelTokens(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			t.CosSin(pos+i, cos[i*half:(i+1)*half], sin[i*half:(i+1)*half])
		}
	})
	return r.cos, r.sin
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// sameRope reports whether two tables give the same cos and sin.
func sameRope(a, b *model.RopeTable) bool {
	return a == b || a.Dims == b.Dims && a.MScale == b.MScale && slices.Equal(a.InvFreq, b.InvFreq)
}
