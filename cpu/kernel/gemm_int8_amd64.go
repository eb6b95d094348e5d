//go:build amd64 && !purego

package kernel

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"unsafe"
	"weak"

	"github.com/cortiq/cortiq/tensor"
)

//go:noescape
func gemmQ4_0VNNI(wp *byte, xp *byte, nb int, out *[128]float32)

//go:noescape
func gemmQ8_0VNNI(wp *byte, xp *byte, nb int, out *[128]float32)

// Int8-mode prefill (level AVX512VNNI): MatMul of q4_0 and q8_0 weights
// quantizes every token row as decode's MatVec does (int8 per 32-block)
// and runs integer 16-row × 8-token tiles (gemm_int8_amd64.s) over
// weights repacked once per tensor into the tiles' layout.

const (
	i8Rows   = 16  // weight rows per tile (int32 lanes)
	i8Tokens = 8   // tokens per panel
	i8PanelB = 352 // panel bytes per block: 256 quads, 8 scales, 8+8 offsets
)

// i8Stride is the bytes per block of one 16-row group of packed weights.
func i8Stride(c tensor.Codec) int {
	if c == tensor.Q4_0 {
		return 256 + 64
	}
	return 512 + 64
}

// packedW is a weight repacked for the int8 tiles: group g (rows
// 16g..16g+15, zero-padded) block b at (g·nb + b)·stride.
type packedW struct {
	src    uintptr // &Data[0] when packed, to notice a changed tensor
	data   []byte
	nb, ng int
}

// packCache maps a weight to its packed form for as long as the tensor
// lives: prefill reads each weight many times, and repacking costs about
// as much as one pass over the weights.
var packCache sync.Map // weak.Pointer[tensor.Tensor] → *packedW

func packedOf(w *tensor.Tensor, rb, rows, cols int) *packedW {
	key := weak.Make(w)
	src := uintptr(unsafe.Pointer(&w.Data[0]))
	if v, ok := packCache.Load(key); ok {
		if p := v.(*packedW); p.src == src && p.nb == cols/32 && p.ng == (rows+i8Rows-1)/i8Rows {
			return p
		}
	}
	p := packWeights(w.Codec, w.Data, rb, rows, cols)
	p.src = src
	if _, loaded := packCache.Swap(key, p); !loaded {
		runtime.AddCleanup(w, func(k weak.Pointer[tensor.Tensor]) { packCache.Delete(k) }, key)
	}
	return p
}

func packWeights(c tensor.Codec, data []byte, rb, rows, cols int) *packedW {
	nb, ng, gs := cols/32, (rows+i8Rows-1)/i8Rows, i8Stride(c)
	p := &packedW{data: make([]byte, ng*nb*gs), nb: nb, ng: ng}
	parallelFor(ng, max(1, 64<<10/(nb*gs)), func(lo, hi int) {
		for g := lo; g < hi; g++ {
			for r := range i8Rows {
				row := g*i8Rows + r
				if row >= rows {
					break // padding stays zero: weight 0, scale 0
				}
				src := data[row*rb : (row+1)*rb]
				for b := range nb {
					dst := p.data[(g*nb+b)*gs : (g*nb+b+1)*gs]
					if c == tensor.Q4_0 {
						blk := src[18*b : 18*b+18]
						for q := range 4 {
							copy(dst[64*q+4*r:64*q+4*r+4], blk[2+4*q:6+4*q])
						}
						binary.LittleEndian.PutUint32(dst[256+4*r:], math.Float32bits(f16Table[uint16(blk[0])|uint16(blk[1])<<8]))
						continue
					}
					blk := src[34*b : 34*b+34]
					for q := range 8 {
						v := binary.LittleEndian.Uint32(blk[2+4*q:])
						binary.LittleEndian.PutUint32(dst[64*q+4*r:], v^0x80808080)
					}
					binary.LittleEndian.PutUint32(dst[512+4*r:], math.Float32bits(f16Table[uint16(blk[0])|uint16(blk[1])<<8]))
				}
			}
		}
	})
	return p
}

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
		var q [32]int8
		for p := lo; p < hi; p++ {
			panel := xp[p*nb*i8PanelB : (p+1)*nb*i8PanelB]
			for t := range i8Tokens {
				tok := p*i8Tokens + t
				for b := range nb {
					blk := panel[b*i8PanelB : (b+1)*i8PanelB]
					var d float32
					var sum int32
					if tok < n {
						d, sum = quantBlock(&q, (*[32]float32)(x[tok*cols+32*b:]))
					} else {
						q = [32]int8{}
					}
					for k := range 8 {
						copy(blk[32*k+4*t:32*k+4*t+4], unsafe.Slice((*byte)(unsafe.Pointer(&q[4*k])), 4))
					}
					binary.LittleEndian.PutUint32(blk[256+4*t:], math.Float32bits(d))
					binary.LittleEndian.PutUint32(blk[288+4*t:], uint32(-8*sum))
					binary.LittleEndian.PutUint32(blk[320+4*t:], uint32(-128*sum))
				}
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
	default:
		return false
	}
	if cols%32 != 0 || cols == 0 || rows == 0 {
		return false
	}
	pw := packedOf(w, rb, rows, cols)
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
				for t := range min(i8Tokens, n-p*i8Tokens) {
					tok := p*i8Tokens + t
					copy(y[tok*rows+r0:tok*rows+r0+nr], out[16*t:16*t+nr])
				}
			}
		}
	})
	return true
}
