package kernel

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/cortiq/cortiq/tensor"
)

// Mode selects the arithmetic MatVec and MatVecRows use for block-quantized
// weights.
type Mode int32

const (
	// Exact dots float32 activations with exactly dequantized weights
	// (the reference other backends compare against).
	Exact Mode = iota
	// Int8 quantizes the activation vector to int8 in blocks of 32 (scale
	// amax/127, as llama.cpp's q8_0 activations) and dots q8_0 and q4_0
	// weights in integer arithmetic, one float multiply-add per block.
	// It is the default: it reads a quarter of the activation bytes and
	// does a quarter of the multiplies, as llama.cpp does. The result
	// differs from Exact by the activation rounding (relative error around
	// 1e-3 of Σ|w·x|, 5e-3 of |y| on random data; see TestInt8Error).
	// Other codecs and MatMul with n >= 2 (MatMul with n == 1 is MatVec)
	// stay Exact. At the Generic level (wasm, builds without assembly)
	// q8_0 and q4_0 MatVec is Int8 too, in portable integer arithmetic
	// (swar.go) bit-identical to the reference loops, and nothing else
	// is. At the AVX512VNNI level q4_K and q6_K join them, and MatMul
	// (prefill) of those four codecs
	// is Int8 too, every token row quantized the same way; those weights
	// are repacked once per tensor into 16-row int8 tiles (held while the
	// tensor lives, about the size of the weight again, or until Unpack);
	// a tensor's data must not change after its first Int8 product. From
	// the AVX2 level, MatVec of q4_1, q5_0, q5_1, q2_K, q3_K, q4_K and
	// q6_K (below AVX512VNNI, where they have packed tiles), q5_K,
	// iq4_nl, iq4_xs and mxfp4 is Int8 too (lowbit_int8.go), and at
	// AVX512VNNI so is MatMul of all but mxfp4, q2_K and q3_K, on tiles
	// packed the same way (lowbit_pack.go: 5 to 8.5 bits a weight). On
	// arm64 (levels NEON and NEONDot) q8_0, q4_0, q4_K and q6_K MatVec and
	// MatMul are Int8 and no other codec: q8_0 and q4_0 MatVec
	// bit-identical to the portable integer loops, each token of a MatMul
	// to its MatVec. The command line maps
	// CORTIQ_KERNEL=exact to SetMode(Exact).
	Int8
)

var mode atomic.Int32

func init() { mode.Store(int32(Int8)) }

// SetMode sets the arithmetic of subsequent calls and returns the previous
// mode. It is safe to call concurrently, but a call in flight may use
// either mode.
func SetMode(m Mode) Mode { return Mode(mode.Swap(int32(m))) }

// CurrentMode reports the mode set by SetMode (Int8 by default).
func CurrentMode() Mode { return Mode(mode.Load()) }

func (m Mode) String() string {
	switch m {
	case Exact:
		return "exact"
	case Int8:
		return "int8"
	}
	return "mode(?)"
}

// q8x is an activation vector quantized for the Int8 kernels: q holds
// round(x/d) per 32-element block, d the block scales and s = d·Σq per
// block (for the q4_0 offset); c holds eight int32 per block whose sum is
// 8·Σq (the q4_0 offset in integer form: the first is 8·Σq, the rest 0).
// The 512-bit kernels read d8 (each d repeated 8 times) and the offsets
// o4 (first of eight −8·Σq) and o8 (first of eight −128·Σq).
type q8x struct {
	q      []int8
	d, s   []float32
	d8     []float32
	c      []int32
	o4, o8 []int32
	hs     []int32  // Σq over each half block (2 per block)
	o6     []int32  // −32 times hs, for q6_K
	sw     []uint64 // q laid out for the SWAR kernels (swar.go), when swOK
	swOK   bool
}

// quantRowImpl, when set, quantizes whole rows as quantBlock does
// (x: nb blocks; q, d: the outputs; sum: Σq of each half block).
var quantRowImpl func(x *float32, nb int, q *int8, d *float32, sum *int32)

// q8xPool recycles quantized activations: decode quantizes one per
// product group, and must not allocate per token.
var q8xPool = sync.Pool{New: func() any { return new(q8x) }}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// quantizeX quantizes x into a pooled q8x; release it with putQ8x.
func quantizeX(x []float32) *q8x {
	nb := len(x) / 32
	qx := q8xPool.Get().(*q8x)
	qx.q = grow(qx.q, len(x))
	qx.d, qx.s, qx.d8 = grow(qx.d, nb), grow(qx.s, nb), grow(qx.d8, 8*nb)
	qx.c, qx.o4, qx.o8 = grow(qx.c, 8*nb), grow(qx.o4, 8*nb), grow(qx.o8, 8*nb)
	qx.hs, qx.o6 = grow(qx.hs, 2*nb), grow(qx.o6, 2*nb)
	qx.swOK = false
	clear(qx.c)
	clear(qx.o4)
	clear(qx.o8)
	if quantRowImpl != nil && nb > 0 {
		quantRowImpl(&x[0], nb, &qx.q[0], &qx.d[0], &qx.hs[0])
	} else {
		for b := range nb {
			q := (*[32]int8)(qx.q[32*b:])
			qx.d[b], _ = quantBlock(q, (*[32]float32)(x[32*b:]))
			var lo, hi int32
			for i := range 16 {
				lo += int32(q[i])
				hi += int32(q[16+i])
			}
			qx.hs[2*b], qx.hs[2*b+1] = lo, hi
		}
	}
	for b := range nb {
		d, sum := qx.d[b], qx.hs[2*b]+qx.hs[2*b+1]
		qx.o6[2*b], qx.o6[2*b+1] = -32*qx.hs[2*b], -32*qx.hs[2*b+1]
		qx.s[b] = d * float32(sum)
		d8 := (*[8]float32)(qx.d8[8*b:])
		for i := range d8 {
			d8[i] = d
		}
		qx.c[8*b] = 8 * sum
		qx.o4[8*b] = -8 * sum
		qx.o8[8*b] = -128 * sum
	}
	return qx
}

// quantBlock rounds one block of 32 activations to int8 with the scale
// amax/127 and returns the scale and Σq.
func quantBlock(q *[32]int8, xb *[32]float32) (d float32, sum int32) {
	var amax float32
	for _, v := range xb {
		amax = max(amax, math.Float32frombits(math.Float32bits(v)&0x7fffffff))
	}
	d = amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	for i, v := range xb {
		// |v·id| <= 127.5 rounds into int8 range; half rounds to even, as
		// the SIMD conversions do.
		r := int32(math.RoundToEven(float64(v * id)))
		q[i] = int8(r)
		sum += r
	}
	return d, sum
}

func putQ8x(qx *q8x) {
	if qx != nil {
		q8xPool.Put(qx)
	}
}

// int8Kernel computes y[i] = row_i · x for len(y) rows with the activation
// quantized; nil when the codec has no Int8 kernel.
type int8Kernel func(y []float32, data []byte, rb int, qx *q8x)

// int8Kernels is the Int8 dispatch table. Only SIMD kernels go in it: the
// portable integer loops (genericInt8Kernels, the reference for tests) are
// no faster than Exact. A level without SIMD kernels for q8_0 and q4_0
// runs swarInt8Kernels (swar.go) instead, bit-identical to those loops
// and faster than Exact (prepareMatVec).
var int8Kernels [len(genericInt8Kernels)]int8Kernel

var genericInt8Kernels = [tensor.NumCodecs]int8Kernel{
	tensor.Q8_0: int8RowsGeneric(dotQ8_0Int8),
	tensor.Q4_0: int8RowsGeneric(dotQ4_0Int8),
	// q4_K and q6_K: lowbit_int8.go
}

func int8RowsGeneric(dot func(row []byte, qx *q8x) float32) int8Kernel {
	return func(y []float32, data []byte, rb int, qx *q8x) {
		for i := range y {
			y[i] = dot(data[i*rb:(i+1)*rb], qx)
		}
	}
}

func dotQ8_0Int8(row []byte, qx *q8x) float32 {
	var s float32
	for b := range qx.d {
		blk := row[34*b : 34*b+34]
		xq := qx.q[32*b : 32*b+32]
		var isum int32
		for i := range 32 {
			isum += int32(int8(blk[2+i])) * int32(xq[i])
		}
		s += f16Table[uint16(blk[0])|uint16(blk[1])<<8] * qx.d[b] * float32(isum)
	}
	return s
}

func dotQ4_0Int8(row []byte, qx *q8x) float32 {
	var s float32
	for b := range qx.d {
		blk := row[18*b : 18*b+18]
		xq := qx.q[32*b : 32*b+32]
		var isum int32
		for i := range 16 {
			isum += int32(blk[2+i]&0xf)*int32(xq[i]) + int32(blk[2+i]>>4)*int32(xq[i+16])
		}
		dw := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
		s += dw * (qx.d[b]*float32(isum) - 8*qx.s[b])
	}
	return s
}
