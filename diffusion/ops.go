package diffusion

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/tensor"
)

// The float32 building blocks of the CPU reference. Activations are row
// major [rows, width]; linear weights stay in their file codec and go
// through the CPU engine's kernels (exact float32 decoding).

// linear is y = x·Wᵀ + b for a [out, in] weight.
type linear struct {
	w    *tensor.Tensor
	b    []float32 // nil: no bias
	in   int
	out  int
	name string
}

// apply maps n rows of x [n, in] to a new [n, out].
func (l *linear) apply(x []float32, n int) []float32 {
	y := make([]float32, n*l.out)
	kernel.MatMul(y, l.w, x[:n*l.in], n)
	if l.b != nil {
		for t := range n {
			kernel.Add(y[t*l.out:(t+1)*l.out], l.b)
		}
	}
	return y
}

// tensorSource is where a component's tensors come from: a safetensors
// checkpoint, or a prefix of a CMF file.
type tensorSource interface {
	Has(name string) bool
	Tensor(name string) (*tensor.Tensor, error)
	Names() []string
}

var _ tensorSource = (*safetensors.Set)(nil)

// weights reads one component's tensors by name, checking shapes, and
// remembers which it used.
type weights struct {
	set  tensorSource
	dir  string // the name errors use
	used map[string]bool
	// quant, when set (q8_0, q4_0), re-encodes the matrices qlinear loads
	// whose rows are whole blocks.
	quant *tensor.Codec
}

func (w *weights) has(name string) bool { return w.set.Has(name) }

func (w *weights) tensor(name string, shape ...int) (*tensor.Tensor, error) {
	if !w.set.Has(name) {
		return nil, fmt.Errorf("%s: missing tensor %q", w.dir, name)
	}
	t, err := w.set.Tensor(name)
	if err != nil {
		return nil, err
	}
	if shape != nil && !sameShape(t.Shape, shape) {
		return nil, fmt.Errorf("%s: tensor %q has shape %v, the config implies %v", w.dir, name, t.Shape, shape)
	}
	if !t.Codec.Valid() || t.Codec == tensor.I32 {
		return nil, fmt.Errorf("%s: tensor %q: dtype %s is not a float weight", w.dir, name, t.Codec)
	}
	w.used[name] = true
	return t, nil
}

// sameShape compares shapes, ignoring leading 1s (a [1, dim] pad token is a
// [dim] vector).
func sameShape(a, b []int) bool {
	for len(a) > 0 && a[0] == 1 && len(a) > len(b) {
		a = a[1:]
	}
	for len(b) > 0 && b[0] == 1 && len(b) > len(a) {
		b = b[1:]
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// floats decodes a tensor to float32.
func (w *weights) floats(name string, shape ...int) ([]float32, error) {
	t, err := w.tensor(name, shape...)
	if err != nil {
		return nil, err
	}
	out := make([]float32, t.Elements())
	if err := tensor.Dequantize(out, t.Codec, t.Data); err != nil {
		return nil, fmt.Errorf("%s: tensor %q: %w", w.dir, name, err)
	}
	return out, nil
}

// linear loads NAME.weight [out, in] and, when bias is set, NAME.bias.
func (w *weights) linear(name string, out, in int, bias bool) (*linear, error) {
	t, err := w.tensor(name+".weight", out, in)
	if err != nil {
		return nil, err
	}
	l := &linear{w: t, in: in, out: out, name: name}
	if bias {
		if l.b, err = w.floats(name+".bias", out); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// qlinear is linear, re-encoded with w.quant when set and the rows fit.
func (w *weights) qlinear(name string, out, in int, bias bool) (*linear, error) {
	l, err := w.linear(name, out, in, bias)
	if err != nil || w.quant == nil || in%w.quant.BlockLen() != 0 {
		return l, err
	}
	src := make([]float32, out*in)
	if err := tensor.Dequantize(src, l.w.Codec, l.w.Data); err != nil {
		return nil, fmt.Errorf("%s: tensor %q: %w", w.dir, name+".weight", err)
	}
	n, err := tensor.ByteLen(*w.quant, []int{out, in})
	if err != nil {
		return nil, err
	}
	q := make([]byte, n)
	if err := tensor.Quantize(q, *w.quant, src); err != nil {
		return nil, err
	}
	l.w = &tensor.Tensor{Name: l.w.Name, Codec: *w.quant, Shape: []int{out, in}, Data: q}
	return l, nil
}

// f32Tensor wraps float32 values as an F32 tensor (no copy).
func f32Tensor(name string, v []float32, shape ...int) *tensor.Tensor {
	var b []byte
	if len(v) > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
	}
	return &tensor.Tensor{Name: name, Codec: tensor.F32, Shape: shape, Data: b}
}

// rmsNormRows normalizes each row of x [n, width] in place (weight may be
// nil).
func rmsNormRows(x []float32, n, width int, w []float32, eps float32) {
	for t := range n {
		r := x[t*width : (t+1)*width]
		kernel.RMSNorm(r, r, w, eps, false)
	}
}

// layerNormRows is LayerNorm without affine parameters, in place.
func layerNormRows(x []float32, n, width int, eps float64) {
	for t := range n {
		r := x[t*width : (t+1)*width]
		var s float64
		for _, v := range r {
			s += float64(v)
		}
		mean := s / float64(width)
		var ss float64
		for _, v := range r {
			d := float64(v) - mean
			ss += d * d
		}
		inv := 1 / math.Sqrt(ss/float64(width)+eps)
		for i, v := range r {
			r[i] = float32((float64(v) - mean) * inv)
		}
	}
}

// groupNorm normalizes an HWC image x [pixels, C] over groups of C/groups
// channels and all pixels (statistics in float64), then applies the affine
// weight and bias per channel, in place.
func groupNorm(x []float32, pixels, C, groups int, w, b []float32, eps float64) {
	cg := C / groups
	mean := make([]float64, groups)
	inv := make([]float64, groups)
	parallel(groups, func(lo, hi int) {
		for g := lo; g < hi; g++ {
			var s float64
			for p := range pixels {
				for _, v := range x[p*C+g*cg : p*C+(g+1)*cg] {
					s += float64(v)
				}
			}
			m := s / float64(pixels*cg)
			var ss float64
			for p := range pixels {
				for _, v := range x[p*C+g*cg : p*C+(g+1)*cg] {
					d := float64(v) - m
					ss += d * d
				}
			}
			mean[g] = m
			inv[g] = 1 / math.Sqrt(ss/float64(pixels*cg)+eps)
		}
	})
	parallel(pixels, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			r := x[p*C : (p+1)*C]
			for c := range C {
				g := c / cg
				r[c] = float32((float64(r[c])-mean[g])*inv[g])*w[c] + b[c]
			}
		}
	})
}

// silu is x·sigmoid(x) in place.
func silu(x []float32) { kernel.SiLU(x) }

// attention is softmax(q·kᵀ·scale)·v for one head: q [nq, hd] with row
// stride qs, k and v [nk, hd] with row strides ks, vs; out [nq, hd] with
// row stride os. No mask: every query sees every key. Keys and values are
// gathered once into weight matrices so that both products run on the CPU
// engine's matrix kernels, a block of queries at a time.
func attention(out []float32, os int, q []float32, qs int, k []float32, ks int, v []float32, vs int, nq, nk, hd int, scale float32) {
	kc := make([]float32, nk*hd) // [nk, hd]
	vt := make([]float32, hd*nk) // [hd, nk]
	for j := range nk {
		copy(kc[j*hd:(j+1)*hd], k[j*ks:j*ks+hd])
		for d := range hd {
			vt[d*nk+j] = v[j*vs+d]
		}
	}
	kw := f32Tensor("attention.k", kc, nk, hd)
	vw := f32Tensor("attention.vt", vt, hd, nk)
	block := max(1, min(nq, (16<<20)/(4*nk)))
	qb := make([]float32, block*hd)
	sc := make([]float32, block*nk)
	ob := make([]float32, block*hd)
	for i0 := 0; i0 < nq; i0 += block {
		n := min(block, nq-i0)
		for i := range n {
			copy(qb[i*hd:(i+1)*hd], q[(i0+i)*qs:(i0+i)*qs+hd])
		}
		kernel.MatMul(sc, kw, qb, n)
		parallel(n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				r := sc[i*nk : (i+1)*nk]
				kernel.Scale(r, scale)
				kernel.Softmax(r)
			}
		})
		kernel.MatMul(ob, vw, sc, n)
		for i := range n {
			copy(out[(i0+i)*os:(i0+i)*os+hd], ob[i*hd:(i+1)*hd])
		}
	}
}

// parallel calls fn over [0, n) in contiguous chunks on GOMAXPROCS
// goroutines. Each index is handled by exactly one call, so results do not
// depend on the worker count.
func parallel(n int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	chunk := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, min(lo+chunk, n))
	}
	wg.Wait()
}
