//go:build amd64 && !purego

package kernel

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/cortiq/cortiq/tensor"
)

//go:noescape
func gemmQ4_0AMX(wp *byte, ap *byte, nb, np int, out *float32, cfg *[64]byte, scratch *[3072]byte)

//go:noescape
func gemmQ8_0AMX(wp *byte, ap *byte, nb, np int, out *float32, cfg *[64]byte, scratch *[3072]byte)

const (
	amxTokens = 16   // tokens per AMX panel
	amxPanelB = 1600 // panel bytes per block: 16×32 int8, 16 scales, a 16×16 int32 offset tile
)

// amxConfig is the tile configuration (palette 1): tmm0 16×64 bytes (C),
// tmm1 16×32 (A), tmm2 8×64 (B).
var amxConfig = func() (c [64]byte) {
	c[0] = 1
	for i, t := range [][2]int{{16, 64}, {16, 32}, {8, 64}} {
		binary.LittleEndian.PutUint16(c[16+2*i:], uint16(t[1]))
		c[48+i] = byte(t[0])
	}
	return
}()

// packAMXPanels quantizes the n token rows of x (as quantRow does) into
// panels of 16 tokens in the A-tile layout, with the offset tile for
// weights stored as w+o.
func packAMXPanels(x []float32, n, cols int, o int32) *[]byte {
	nb, np := cols/32, (n+amxTokens-1)/amxTokens
	size := np * nb * amxPanelB
	bp, _ := bytePool.Get().(*[]byte)
	if bp == nil || cap(*bp) < size {
		b := make([]byte, size)
		bp = &b
	}
	*bp = (*bp)[:size]
	xp := *bp
	parallelFor(np, 1, func(lo, hi int) {
		qx := q8xPool.Get().(*q8x)
		defer q8xPool.Put(qx)
		qx.q, qx.d, qx.hs = grow(qx.q, cols), grow(qx.d, nb), grow(qx.hs, 2*nb)
		for p := lo; p < hi; p++ {
			panel := xp[p*nb*amxPanelB : (p+1)*nb*amxPanelB]
			clear(panel)
			for t := range min(amxTokens, n-p*amxTokens) {
				quantRow(&x[(p*amxTokens+t)*cols], nb, &qx.q[0], &qx.d[0], &qx.hs[0])
				for b := range nb {
					blk := panel[b*amxPanelB : (b+1)*amxPanelB]
					copy(blk[32*t:32*t+32], i8Bytes(qx.q[32*b:32*b+32]))
					binary.LittleEndian.PutUint32(blk[512+4*t:], math.Float32bits(qx.d[b]))
					off := uint32(-o * (qx.hs[2*b] + qx.hs[2*b+1]))
					row := blk[576+64*t : 576+64*t+64]
					for i := 0; i < 64; i += 4 {
						binary.LittleEndian.PutUint32(row[i:], off)
					}
				}
			}
		}
	})
	return bp
}

var amxOutPool sync.Pool

// matmulAMX is matmulInt8 for q4_0 and q8_0 on AMX tiles; false if the
// codec has none.
func matmulAMX(y []float32, pw *packedW, c tensor.Codec, x []float32, n, rows, cols int) bool {
	tile, o := gemmQ8_0AMX, int32(128)
	switch c {
	case tensor.Q4_0:
		tile, o = gemmQ4_0AMX, 8
	case tensor.Q8_0:
	default:
		return false
	}
	bp := packAMXPanels(x, n, cols, o)
	defer bytePool.Put(bp)
	xp := *bp
	nb, gs, np := pw.nb, i8Stride(c), (n+amxTokens-1)/amxTokens
	parallelFor(pw.ng, max(1, (32<<10)/(nb*gs)), func(lo, hi int) {
		op, _ := amxOutPool.Get().(*[]float32)
		if op == nil || cap(*op) < np*256 {
			o := make([]float32, np*256)
			op = &o
		}
		defer amxOutPool.Put(op)
		out := (*op)[:np*256]
		var scratch [3072]byte
		for g := lo; g < hi; g++ {
			r0 := g * i8Rows
			nr := min(i8Rows, rows-r0)
			tile(&pw.data[g*nb*gs], &xp[0], nb, np, &out[0], &amxConfig, &scratch)
			storeTile(y, r0, nr, rows, out, n) // out: 16 float32 per token
		}
	})
	return true
}
