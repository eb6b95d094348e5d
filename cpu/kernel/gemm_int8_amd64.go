//go:build amd64 && !purego

package kernel

import (
	"fmt"
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
func gemmQ4_KSVNNI(wp *byte, xp *byte, nb int, out *[128]float32)

//go:noescape
func gemvQ4_KSVNNI(wp *byte, xq *int8, xd *float32, xs *float32, nb int, out *[16]float32)

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
			gemvQ4_KSVNNI(wp, &m.qx.q[0], &m.qx.d[0], &m.qx.s[0], nb, &out)
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
	if n%i8Tokens != 0 {
		clear(xp[(np-1)*nb*i8PanelB:]) // tokens past n: zero quads, scales and offsets
	}
	// The rows in parallel, not the panels (at 16 threads a 64-token
	// prompt is eight panels).
	parallelFor(n, 4, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			p, t := r/i8Tokens, r%i8Tokens
			quantPanelRow(&x[r*cols], nb, &xp[p*nb*i8PanelB+4*t])
		}
	})
	return bp
}

// tileKernel is the Int8 tile kernel of codec c (nil if none).
func tileKernel(c tensor.Codec) func(wp, xp *byte, nb int, out *[128]float32) {
	switch c {
	case tensor.Q4_0:
		return gemmQ4_0VNNI
	case tensor.Q8_0:
		return gemmQ8_0VNNI
	case tensor.Q4_K:
		return gemmQ4_KSVNNI
	case tensor.Q6_K:
		return gemmQ6_KVNNI
	}
	return lowbitTile(c)
}

// matmulInt8 computes MatMul in Int8 mode where a tile kernel exists;
// it reports false (and does nothing) otherwise.
func matmulInt8(y []float32, w *tensor.Tensor, x []float32, n, rows, cols, rb int) bool {
	if tileKernel(w.Codec) == nil || cols%32 != 0 || cols == 0 || rows == 0 {
		return false
	}
	tp := [1]tileProduct{{y, rows, packedOf(w, rb, rows, cols), w.Codec}}
	runInt8(x, n, cols, tp[:])
	return true
}

// tileProduct is one product of runTiles.
type tileProduct struct {
	y    []float32
	rows int
	pw   *packedW
	c    tensor.Codec
}

// matmulsInt8 computes MatMuls of n >= 2 tokens in Int8 mode when every
// product has a tile kernel: the token rows are quantized once for all
// of them and their 16-row groups run as one parallel loop, each as
// matmulInt8 would compute it (on AMX tiles when the level has them and
// every product's codec does). It reports false (and does nothing)
// otherwise.
func matmulsInt8(x []float32, n int, ps []Product) bool {
	if len(ps) < 2 || len(ps) > 8 {
		return false
	}
	cols := ps[0].W.Cols()
	for _, p := range ps {
		if tileKernel(p.W.Codec) == nil || p.W.Cols() != cols || matRows(p.W) == 0 {
			return false
		}
	}
	if cols%32 != 0 || cols == 0 {
		return false
	}
	var buf [8]tileProduct
	tp := buf[:0]
	for _, p := range ps {
		rows := matRows(p.W)
		rb := checkMat(p.W, cols, 0, rows)
		if len(p.Y) < n*rows {
			panic(fmt.Sprintf("kernel: MatMuls %s %v: len(y)=%d for %d tokens", p.W.Name, p.W.Shape, len(p.Y), n))
		}
		tp = append(tp, tileProduct{p.Y, rows, packedOf(p.W, rb, rows, cols), p.W.Codec})
	}
	runInt8(x, n, cols, tp)
	return true
}

// runInt8 runs the products ps (at most 8) on the level's tiles: at AMX,
// the whole pairs of 16-token panels on AMX tiles where every codec has
// them (runAMX), the tokens left over (fewer than 32, where AMX would
// compute padding) on the VNNI tiles, whose results are the same bit for
// bit; below AMX, or for other codecs, all on the VNNI tiles.
func runInt8(x []float32, n, cols int, ps []tileProduct) {
	if na := n &^ (2*amxTokens - 1); level >= AMX && na > 0 && runAMX(x, na, cols, ps) {
		if na == n {
			return
		}
		var buf [8]tileProduct
		rest := buf[:len(ps)]
		for i, p := range ps {
			rest[i] = p
			rest[i].y = p.y[na*p.rows:]
		}
		x, n, ps = x[na*cols:], n-na, rest
	}
	runTiles(x, n, cols, ps)
}

// runTiles quantizes the n token rows of x into panels and runs the tile
// kernels over every 16-row group of the products, as one parallel loop.
func runTiles(x []float32, n, cols int, ps []tileProduct) {
	bp := packPanels(x, n, cols)
	defer bytePool.Put(bp)
	xp := *bp
	nb, np := cols/32, (n+i8Tokens-1)/i8Tokens
	total, bytes := 0, 0
	for _, p := range ps {
		total += p.pw.ng
		bytes += p.pw.ng * nb * i8Stride(p.c)
	}
	parallelFor(total, max(1, (32<<10)/max(1, bytes/total)), func(lo, hi int) {
		var out [128]float32
		base := 0
		for _, p := range ps {
			tile, gs := tileKernel(p.c), i8Stride(p.c)
			for g := max(lo-base, 0); g < min(hi-base, p.pw.ng); g++ {
				r0 := g * i8Rows
				nr := min(i8Rows, p.rows-r0)
				for q := range np {
					tile(&p.pw.data[g*nb*gs], &xp[q*nb*i8PanelB], nb, &out)
					storeTile(p.y, q*i8Tokens*p.rows+r0, nr, p.rows, out[:], min(i8Tokens, n-q*i8Tokens))
				}
			}
			base += p.pw.ng
		}
	})
}
