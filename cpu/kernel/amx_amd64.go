//go:build amd64 && !purego

package kernel

import (
	"encoding/binary"
	"sync"
	"unsafe"

	"github.com/cortiq/cortiq/tensor"
)

//go:noescape
func gemmQ4_0AMX(w0, w1 *byte, ap *byte, nb, npp int, acc *float32, cfg *[64]byte, scratch *byte)

//go:noescape
func quantRowAMX(x *float32, nb int, q *byte, d *byte)

//go:noescape
func gemmQ8_0AMX(w0, w1 *byte, ap *byte, nb, npp int, acc *float32, cfg *[64]byte, scratch *byte)

const (
	amxTokens  = 16    // tokens per AMX panel (a pair of them per call's step)
	amxPanelB  = 576   // panel bytes per block: 16×32 int8, 16 float32 scales
	amxScratch = 10240 // B slots 2×1 KiB, C slots 2×4 KiB (amx_amd64.s)
)

// amxConfig is the tile configuration (palette 1): tmm0-1 16×32 bytes
// (A: two panels), tmm2-3 8×64 (B: two weight groups), tmm4-7 16×64 (C).
var amxConfig = func() (c [64]byte) {
	c[0] = 1
	for i, t := range [][2]int{{16, 32}, {16, 32}, {8, 64}, {8, 64}, {16, 64}, {16, 64}, {16, 64}, {16, 64}} {
		binary.LittleEndian.PutUint16(c[16+2*i:], uint16(t[1]))
		c[48+i] = byte(t[0])
	}
	return
}()

// packAMXPanels quantizes the n token rows of x (as quantRow does) into
// pairs of panels of 16 tokens: per block the 16 tokens' 32 int8 (the
// A-tile layout), then their 16 float32 scales; tokens past n are zero.
func packAMXPanels(x []float32, n, cols int) *[]byte {
	nb, np := cols/32, 2*((n+2*amxTokens-1)/(2*amxTokens))
	size := np * nb * amxPanelB
	bp, _ := bytePool.Get().(*[]byte)
	if bp == nil || cap(*bp) < size {
		b := make([]byte, size)
		bp = &b
	}
	*bp = (*bp)[:size]
	xp := *bp
	// Panels past the tokens' are cleared whole, a partial one before its
	// rows are written; then the rows in parallel (at 16 threads, four
	// panels of a 64-token prompt would keep twelve workers idle).
	if n%amxTokens != 0 || n < np*amxTokens {
		clear(xp[n/amxTokens*nb*amxPanelB:])
	}
	parallelFor(n, 4, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			p, t := r/amxTokens, r%amxTokens
			panel := xp[p*nb*amxPanelB : (p+1)*nb*amxPanelB]
			_ = x[(r+1)*cols-1]
			quantRowAMX(&x[r*cols], nb, &panel[32*t], &panel[512+4*t])
		}
	})
	return bp
}

// amxBuf is a worker's accumulators and tile scratch, 64-byte aligned.
type amxBuf struct {
	mem     []byte
	acc     []float32
	scratch *byte
}

var amxBufPool sync.Pool

func getAMXBuf(pairs int) *amxBuf {
	b, _ := amxBufPool.Get().(*amxBuf)
	if b == nil || len(b.acc) < pairs*1024 {
		b = &amxBuf{mem: make([]byte, pairs*4096+amxScratch+64)}
		off := int(-uintptrOf(b.mem) & 63)
		b.acc = unsafe.Slice((*float32)(unsafe.Pointer(&b.mem[off])), pairs*1024)
		b.scratch = &b.mem[off+pairs*4096]
	}
	return b
}

// amxCodec is the AMX kernel's codec for a product's packed codec (q5_0
// is packed as q8_0), or false if AMX has no kernel for it.
func amxCodec(c tensor.Codec) (tensor.Codec, bool) {
	switch c {
	case tensor.Q4_0, tensor.Q8_0:
		return c, true
	case tensor.Q5_0:
		return tensor.Q8_0, true
	}
	return c, false
}

// runAMX is runTiles on AMX tiles, for products whose codecs all have
// an AMX kernel (amxCodec): the token rows are quantized once into
// panels, and every product's pairs of 16-row groups run as one
// parallel loop. It reports false (and does nothing) otherwise.
func runAMX(x []float32, n, cols int, ps []tileProduct) bool {
	total, bytes := 0, 0
	for _, p := range ps {
		if _, ok := amxCodec(p.c); !ok {
			return false
		}
		total += (p.pw.ng + 1) / 2
		bytes += p.pw.ng * p.pw.nb * i8Stride(p.c)
	}
	bp := packAMXPanels(x, n, cols)
	defer bytePool.Put(bp)
	xp := *bp
	nb, pairs := cols/32, (n+2*amxTokens-1)/(2*amxTokens)
	// A unit is a pair of 16-row groups against a span of the token
	// pairs: all of them (each weight read once) unless that leaves
	// fewer than four units a worker (many threads, few rows: a 896-row
	// product is 28 pairs of groups), then spans of fewer token pairs.
	spans := 1
	if nw := Workers(); total < 4*nw {
		spans = min(pairs, (4*nw+total-1)/total)
	}
	per := (pairs + spans - 1) / spans
	spans = (pairs + per - 1) / per
	parallelFor(total*spans, max(1, (16<<10)/max(1, bytes/total)), func(lo, hi int) {
		b := getAMXBuf(per)
		defer amxBufPool.Put(b)
		base := 0
		for _, p := range ps {
			c, _ := amxCodec(p.c)
			tile, gs := gemmQ8_0AMX, i8Stride(c)
			if c == tensor.Q4_0 {
				tile = gemmQ4_0AMX
			}
			np := (p.pw.ng + 1) / 2
			for u := max(lo-base, 0); u < min(hi-base, np*spans); u++ {
				gp, q0 := u/spans, u%spans*per
				npp := min(per, pairs-q0)
				g0 := 2 * gp
				g1 := min(g0+1, p.pw.ng-1) // an odd last group is computed twice, stored once
				tile(&p.pw.data[g0*nb*gs], &p.pw.data[g1*nb*gs], &xp[q0*2*nb*amxPanelB], nb, npp, &b.acc[0], &amxConfig, b.scratch)
				for q := q0; q < q0+npp; q++ {
					nt := min(2*amxTokens, n-q*2*amxTokens)
					for g := g0; g <= g1; g++ {
						r0 := g * i8Rows
						storeTile(p.y[q*2*amxTokens*p.rows:], r0, min(i8Rows, p.rows-r0), p.rows, b.acc[(q-q0)*1024+(g-g0)*512:], nt)
					}
				}
			}
			base += np * spans
		}
	})
	return true
}
