//go:build amd64 && !purego

package kernel

import (
	"sync"

	"github.com/cortiq/cortiq/tensor"
)

//go:noescape
func gemmQ4_0VNNI(wp *byte, xp *byte, nb int, out *[128]float32)

//go:noescape
func gemmQ8_0VNNI(wp *byte, xp *byte, nb int, out *[128]float32)

//go:noescape
func quantPanelRow(x *float32, nb int, dst *byte)

//go:noescape
func gemmQ4_KVNNI(wp *byte, xp *byte, nb int, out *[128]float32)

//go:noescape
func gemvQ4_KVNNI(wp *byte, xq *int8, xd *float32, xs *float32, nb int, out *[16]float32)

//go:noescape
func gemmQ6_KVNNI(wp *byte, xp *byte, nb int, out *[128]float32)

//go:noescape
func gemvQ6_KVNNI(wp *byte, xq *int8, xd *float32, xo *int32, nb int, out *[16]float32)

//go:noescape
func quantRow(x *float32, nb int, q *int8, d *float32, sum *int32)

//go:noescape
func gemvQ4_0VNNI(wp *byte, xq *int8, xd *float32, xo *int32, nb int, out *[16]float32)

//go:noescape
func gemvQ8_0VNNI(wp *byte, xq *int8, xd *float32, xo *int32, nb int, out *[16]float32)

// runPacked computes the 16-row groups [lo, hi) of a packed matvec.
func runPacked(m *matvec, lo, hi int) {
	nb, gs := m.pw.nb, i8Stride(m.codec)
	var out [16]float32
	for g := lo; g < hi; g++ {
		wp := &m.pw.data[(m.g0+g)*nb*gs]
		switch m.codec {
		case tensor.Q4_0:
			gemvQ4_0VNNI(wp, &m.qx.q[0], &m.qx.d[0], &m.qx.o4[0], nb, &out)
		case tensor.Q8_0:
			gemvQ8_0VNNI(wp, &m.qx.q[0], &m.qx.d[0], &m.qx.o8[0], nb, &out)
		case tensor.Q4_K:
			gemvQ4_KVNNI(wp, &m.qx.q[0], &m.qx.d[0], &m.qx.s[0], nb, &out)
		case tensor.Q6_K:
			gemvQ6_KVNNI(wp, &m.qx.q[0], &m.qx.d[0], &m.qx.o6[0], nb, &out)
		}
		storeTile(m.y, g*i8Rows, min(i8Rows, len(m.y)-g*i8Rows), 0, out[:], 1)
	}
}

//go:noescape
func storeRows16(y *float32, ldy int, out *float32, nt int)

// storeTile copies the results of a tile of nr rows (<= 16) for nt tokens
// (out: 16 float32 per token) to y at row r0 of the first token, ldy
// apart: whole rows in one call rather than a memmove per token, which
// cost a fifth of the tile kernels' time in prefill.
func storeTile(y []float32, r0, nr, ldy int, out []float32, nt int) {
	if nt == 0 {
		return
	}
	if nr == i8Rows {
		_ = y[r0+(nt-1)*ldy+15] // bounds: the last row the assembly writes
		_ = out[16*nt-1]
		storeRows16(&y[r0], ldy, &out[0], nt)
		return
	}
	for t := range nt {
		copy(y[r0+t*ldy:r0+t*ldy+nr], out[16*t:16*t+nr])
	}
}

// Int8-mode prefill (level AVX512VNNI): MatMul of q4_0 and q8_0 weights
// quantizes every token row as decode's MatVec does (int8 per 32-block)
// and runs integer 16-row × 8-token tiles (gemm_int8_amd64.s) over
// weights repacked once per tensor into the tiles' layout.

var bytePool sync.Pool

// packPanels quantizes the n token rows of x into panels of 8 tokens.
func packPanels(x []float32, n, cols int) *[]byte {
	nb, np := cols/32, (n+i8Tokens-1)/i8Tokens
	size := np * nb * i8PanelB
	bp, _ := bytePool.Get().(*[]byte)
	if bp == nil || cap(*bp) < size {
		b := make([]byte, size)
		bp = &b
	}
	*bp = (*bp)[:size]
	xp := *bp
	parallelFor(np, 1, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			panel := xp[p*nb*i8PanelB : (p+1)*nb*i8PanelB]
			if p == np-1 && n%i8Tokens != 0 {
				clear(panel) // tokens past n: zero quads, scales and offsets
			}
			for t := range min(i8Tokens, n-p*i8Tokens) {
				quantPanelRow(&x[(p*i8Tokens+t)*cols], nb, &panel[4*t])
			}
		}
	})
	return bp
}

// matmulInt8 computes MatMul in Int8 mode where a tile kernel exists;
// it reports false (and does nothing) otherwise.
func matmulInt8(y []float32, w *tensor.Tensor, x []float32, n, rows, cols, rb int) bool {
	var tile func(wp, xp *byte, nb int, out *[128]float32)
	switch w.Codec {
	case tensor.Q4_0:
		tile = gemmQ4_0VNNI
	case tensor.Q8_0:
		tile = gemmQ8_0VNNI
	case tensor.Q4_K:
		tile = gemmQ4_KVNNI
	case tensor.Q6_K:
		tile = gemmQ6_KVNNI
	default:
		if tile = lowbitTile(w.Codec); tile == nil {
			return false
		}
	}
	if cols%32 != 0 || cols == 0 || rows == 0 {
		return false
	}
	pw := packedOf(w, rb, rows, cols)
	ac := w.Codec
	if ac == tensor.Q5_0 {
		ac = tensor.Q8_0 // packed as q8_0
	}
	if level >= AMX && matmulAMX(y, pw, ac, x, n, rows, cols) {
		return true
	}
	bp := packPanels(x, n, cols)
	defer bytePool.Put(bp)
	xp := *bp
	nb, gs, np := pw.nb, i8Stride(w.Codec), (n+i8Tokens-1)/i8Tokens
	parallelFor(pw.ng, max(1, (32<<10)/(nb*gs)), func(lo, hi int) {
		var out [128]float32
		for g := lo; g < hi; g++ {
			r0 := g * i8Rows
			nr := min(i8Rows, rows-r0)
			for p := range np {
				tile(&pw.data[g*nb*gs], &xp[p*nb*i8PanelB], nb, &out)
				storeTile(y, p*i8Tokens*rows+r0, nr, rows, out[:], min(i8Tokens, n-p*i8Tokens))
			}
		}
	})
	return true
}
