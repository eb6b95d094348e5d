// Package kernel holds the CPU engine's compute kernels: matrix-vector and
// matrix-matrix products over weights in any tensor.Codec, and the small
// vector operations of a transformer forward pass.
//
// Contract. A weight is a tensor.Tensor viewed as a [rows, cols] matrix
// (leading dimensions fold into rows). MatVec computes y[o] = Σ_i W[o,i]·x[i]
// in float32 with the weights decoded exactly as tensor.Dequantize decodes
// them; the only difference from a naive "dequantize, then dot" loop is the
// order of float32 additions (8-lane partial sums, 16 in arm64's f32 dot;
// a codec with a side field, q8_2f, decodes rows with their matrix's
// column field, tensor.DecodeRows's values; blr runs as its two q1
// products, B·(A·x) (tensor.BLRStages), each exact;
// for block codecs the block scale multiplies a block's partial sum, and
// q4_0's -8 offset and q4_K's min are applied through Σx). MatMul decodes weight rows to float32
// exactly and accumulates each output in one float32 sum per token. This is
// the Exact mode, the numerical reference other backends compare against.
// The default mode is Int8, which trades exactness for speed on the block
// codecs' MatVec (see Int8); SetMode(Exact) restores it. SetLevel picks the
// instruction set (see Level).
//
// Every output element is computed by one goroutine in an order fixed by
// the call's shapes, so results are bit-for-bit reproducible whatever the
// worker count or scheduling. Different entry points (MatVec versus MatMul,
// MatMul with few versus many tokens) sum in different orders and may
// differ in the last bits.
//
// Implementation. The portable Go kernels (generic.go) are the reference
// and run everywhere (wasm included). On amd64, assembly kernels replace
// them at init according to the CPU (see Level: AVX2, AVX-512, AVX-512
// VNNI, AMX), on arm64 NEON ones (see Level: NEON, NEONDot; the dots of
// the common codecs, Int8 q8_0, q4_0, q4_K and q6_K with SDOT where the
// CPU has it); SetLevel forces a lower level, and -tags purego builds
// without them. Int8 mode at the AVX512VNNI level and above repacks
// q4_0, q8_0, q4_K and q6_K weights once per tensor, at first use, into
// 16-row int8 tiles that decode (one token) and prefill (panels of 8 or,
// with AMX, pairs of 16 tokens) share; q4_1, q5_0, q5_1, q5_K, iq4_nl and iq4_xs
// are packed the same way for prefill only (lowbit_pack.go).
// Kernels run in parallel on runtime.GOMAXPROCS(0) goroutines (read at
// each call; helpers are long-lived and started on demand); small
// products run inline on the caller. Kernels are safe for concurrent use. Length mismatches between
// the tensor and the slices are programming errors and panic.
package kernel

import (
	"fmt"
	"math"

	"github.com/cortiq/cortiq/tensor"
)

// MatVec computes y = W·x for a weight w of shape [rows, cols]:
// len(x) == cols, len(y) == rows.
func MatVec(y []float32, w *tensor.Tensor, x []float32) {
	MatVecRows(y, w, x, 0, matRows(w))
}

// matRows is the product of the leading dimensions (unlike
// tensor.Tensor.Rows it stays right when the last dimension is 0).
func matRows(w *tensor.Tensor) int {
	r := 1
	for _, d := range w.Shape[:max(0, len(w.Shape)-1)] {
		r *= d
	}
	return r
}

// MatVecRows computes the rows [row0, row0+nrows) of W·x into y[:nrows].
// For a stacked expert bank [E, out, in], expert e is row0 = e*out,
// nrows = out.
func MatVecRows(y []float32, w *tensor.Tensor, x []float32, row0, nrows int) {
	if w.Codec == tensor.BLR {
		checkMat(w, w.Cols(), row0, nrows)
		if len(x) != w.Cols() || len(y) < nrows {
			panic(fmt.Sprintf("kernel: MatVec %s %v: len(x)=%d len(y)=%d for %d rows", w.Name, w.Shape, len(x), len(y), nrows))
		}
		blrProduct(y, w, x, 1, row0, nrows)
		return
	}
	var qx *q8x
	m := [1]matvec{prepareMatVec(y, w, x, row0, nrows, &qx)}
	runMatVecs(m[:])
	putQ8x(qx)
}

// Product is one matrix product of a MatMuls call: Y = X·Wᵀ.
type Product struct {
	Y []float32
	W *tensor.Tensor
}

// MatMuls computes several products of the same activations x (n rows),
// as MatMul(p.Y, p.W, x, n) for each p, with identical results. For one
// token the products run as a single parallel pass, with x quantized once
// in Int8 mode: decode issues many small products (q, k and v; gate and
// up), and each separate call costs a synchronization of the workers.
func MatMuls(x []float32, n int, ps ...Product) {
	for i, p := range ps {
		if p.W.Codec == tensor.BLR && n == 1 {
			// Two products in turn: the others together, then it.
			rest := append(append([]Product(nil), ps[:i]...), ps[i+1:]...)
			MatMuls(x, n, rest...)
			observe(p.W, x, n)
			MatVec(p.Y, p.W, x)
			return
		}
	}
	if n == 1 {
		for _, p := range ps {
			observe(p.W, x, n)
		}
	}
	if n != 1 {
		if n > 1 && int8MatMuls && CurrentMode() == Int8 && len(ps) > 0 {
			cols := ps[0].W.Cols()
			if len(x) >= n*cols && allFinite(x[:n*cols]) && matmulsInt8(x, n, ps) {
				for _, p := range ps {
					observe(p.W, x, n)
				}
				return
			}
		}
		for _, p := range ps {
			MatMul(p.Y, p.W, x, n)
		}
		return
	}
	var qx *q8x
	var buf [8]matvec
	ms := buf[:0]
	if len(ps) > len(buf) {
		ms = make([]matvec, 0, len(ps))
	}
	ms = ms[:len(ps)]
	for i, p := range ps {
		ms[i] = prepareMatVec(p.Y, p.W, x, 0, matRows(p.W), &qx)
	}
	runMatVecs(ms)
	putQ8x(qx)
}

// matvec is one matrix-vector product ready to run: rows are processed in
// units of mvUnit, so that the rows a kernel sees together (and so its
// arithmetic) do not depend on how the work is split.
type matvec struct {
	y    []float32
	data []byte
	rb   int
	x    []float32
	aux  []float32
	k    rowsKernel
	qx   *q8x
	k8   int8Kernel // used instead of k when set

	// Packed Int8 decode (used instead of k8 when pw is set): units are
	// 16-row groups, from group g0 of the packed weight.
	pw    *packedW
	g0    int
	codec tensor.Codec
}

const mvUnit = 4 // rows per unit of work (the Int8 kernels' row tile)

// prepareMatVec checks a product and picks its kernel; *qx caches the
// quantized activations across the products of one MatMuls call.
func prepareMatVec(y []float32, w *tensor.Tensor, x []float32, row0, nrows int, qx **q8x) matvec {
	cols := w.Cols()
	rb := checkMat(w, cols, row0, nrows)
	if len(x) != cols || len(y) < nrows {
		panic(fmt.Sprintf("kernel: MatVec %s %v: len(x)=%d len(y)=%d for %d rows of %d", w.Name, w.Shape, len(x), len(y), nrows, cols))
	}
	m := matvec{y: y[:nrows], data: w.Data[row0*rb : (row0+nrows)*rb], rb: rb, x: x}
	if w.Codec.HasSide() {
		m.k, m.aux = matvecKernel(w.Codec), sideField(w, row0, nrows)
		return m
	}
	if CurrentMode() == Int8 && cols > 0 && allFinite(x) {
		if packedDecode && packable(w.Codec) && row0%i8Rows == 0 && cols%32 == 0 {
			if *qx == nil {
				*qx = quantizeX(x)
			}
			m.qx, m.pw, m.g0, m.codec = *qx, packedOf(w, rb, matRows(w), cols), row0/i8Rows, w.Codec
			return m
		}
		if int(w.Codec) < len(int8Kernels) && int8Kernels[w.Codec] != nil {
			if *qx == nil {
				*qx = quantizeX(x)
			}
			m.k8, m.qx = int8Kernels[w.Codec], *qx
			return m
		}
		if int(w.Codec) < len(swarInt8Kernels) && swarInt8Kernels[w.Codec] != nil && cols%32 == 0 {
			// A level without SIMD int8 kernels (Generic): the portable
			// ones (swar.go), bit-identical to the reference loops.
			if *qx == nil {
				*qx = quantizeX(x)
			}
			if !(*qx).swOK {
				(*qx).packSWAR()
			}
			m.k8, m.qx = swarInt8Kernels[w.Codec], *qx
			return m
		}
	}
	m.k = matvecKernel(w.Codec)
	m.aux = prepareX(w.Codec, x)
	return m
}

func (m *matvec) units() int {
	if m.pw != nil {
		return (len(m.y) + i8Rows - 1) / i8Rows
	}
	return (len(m.y) + mvUnit - 1) / mvUnit
}

// run computes the rows of units [lo, hi).
func (m *matvec) run(lo, hi int) {
	if m.pw != nil {
		runPacked(m, lo, hi)
		return
	}
	r0, r1 := lo*mvUnit, min(hi*mvUnit, len(m.y))
	if m.k8 != nil {
		m.k8(m.y[r0:r1], m.data[r0*m.rb:r1*m.rb], m.rb, m.qx)
		return
	}
	m.k(m.y[r0:r1], m.data[r0*m.rb:r1*m.rb], m.rb, m.x, m.aux)
}

// runMatVecs runs the products as one parallel loop over their units.
func runMatVecs(ms []matvec) {
	total, bytes := 0, 0
	for i := range ms {
		total += ms[i].units()
		bytes += len(ms[i].data)
	}
	if total == 0 {
		return
	}
	// Split so that each chunk reads at least ~64 KiB of weights, less
	// when that would leave workers idle (at 16 threads a 896-row product
	// is 7 such chunks): at least 8 chunks a worker, down to 8 KiB.
	grain := max(1, min(64<<10, max(8<<10, bytes/(8*Workers())))/max(1, bytes/total))
	parallelRun(total, grain, nil, ms)
}

// runUnits runs the units [lo, hi) of the products ms, numbered across
// them in order.
func runUnits(ms []matvec, lo, hi int) {
	base := 0
	for i := range ms {
		u := ms[i].units()
		if a, b := max(lo-base, 0), min(hi-base, u); a < b {
			ms[i].run(a, b)
		}
		base += u
	}
}

// MatMul computes Y = X·Wᵀ for n activation rows: x[t*cols:(t+1)*cols]
// gives y[t*rows:(t+1)*rows]. Each weight row is decoded once per block
// of tokens, so this is far cheaper per token than n MatVec calls.
func MatMul(y []float32, w *tensor.Tensor, x []float32, n int) {
	rows, cols := matRows(w), w.Cols()
	rb := checkMat(w, cols, 0, rows)
	if n < 0 || len(x) < n*cols || len(y) < n*rows {
		panic(fmt.Sprintf("kernel: MatMul %s %v: len(x)=%d len(y)=%d for %d tokens", w.Name, w.Shape, len(x), len(y), n))
	}
	observe(w, x, n)
	switch n {
	case 0:
		return
	case 1:
		MatVec(y[:rows], w, x[:cols])
		return
	}
	if w.Codec == tensor.BLR {
		blrProduct(y, w, x, n, 0, rows)
		return
	}
	if w.Codec.HasSide() {
		matmulSide(y, w, x, n, rows, cols)
		return
	}
	if int8MatMul != nil && CurrentMode() == Int8 && allFinite(x[:n*cols]) && int8MatMul(y, w, x, n, rows, cols, rb) {
		return
	}
	matmul(y, w.Codec, w.Data[:rows*rb], rb, rows, cols, x, n)
}

// allFinite reports whether x holds no NaN or infinity. An activation that
// does takes the exact float path, where it reaches the output as it is:
// quantized to int8 it would come out as ordinary numbers, and a broken
// model would generate garbage instead of stopping at the layer that broke
// (the engine names it). The scan costs about a copy of x, little next to
// the weights a product streams.
func allFinite(x []float32) bool { return AllFinite(x) }

// AllFinite reports whether x holds no NaN or infinity (SIMD where the
// level has it: about the cost of a copy of x).
func AllFinite(x []float32) bool {
	n := simdLen(len(x)) &^ 31
	if n > 0 && !allFiniteSIMD(&x[0], n) {
		return false
	}
	for _, v := range x[n:] {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return false
		}
	}
	return true
}

// packedDecode makes Int8-mode MatVec of q4_0 and q8_0 run on the packed
// weights (level AVX512VNNI), with runPacked.
var packedDecode bool

// int8MatMuls makes MatMuls of n >= 2 tokens call matmulsInt8 (level
// AVX512VNNI): the products share the quantized tokens and one parallel
// loop. matmulsInt8 reports whether it handled them, with the results of
// separate MatMul calls. (A direct call, not a function value, so that
// decode's variadic products stay on the caller's stack.)
var int8MatMuls bool

// int8MatMul is the Int8-mode MatMul of the current level (nil if none);
// it reports whether it handled the product.
var int8MatMul func(y []float32, w *tensor.Tensor, x []float32, n, rows, cols, rb int) bool

func checkMat(w *tensor.Tensor, cols, row0, nrows int) int {
	rb, err := w.Codec.RowBytes(cols)
	if err != nil || !w.Codec.Valid() || w.Codec == tensor.I32 {
		panic(fmt.Sprintf("kernel: weight %s %v: codec %s: %v", w.Name, w.Shape, w.Codec, err))
	}
	rows := matRows(w)
	if row0 < 0 || nrows < 0 || row0+nrows > rows || len(w.Data) < rows*rb {
		panic(fmt.Sprintf("kernel: weight %s %v (%s, %d bytes): rows [%d,%d) out of range", w.Name, w.Shape, w.Codec, len(w.Data), row0, row0+nrows))
	}
	return rb
}
