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

// Packed weights for the int8 tiles of the AVX512VNNI level (the tile
// kernels are in gemm_int8_amd64.s; the packing is portable Go).

const (
	i8Rows   = 16  // weight rows per tile (int32 lanes)
	i8Tokens = 8   // tokens per panel
	i8PanelB = 448 // panel bytes per block: 256 quads, 8 scales, 8+8 offsets, 8 d·Σq, 8+8 q6_K offsets
)

// i8Stride is the bytes per block of one 16-row group of packed weights:
// the 16 rows' 32 weights (64 bytes a column quad), then their scales,
// float32 except q4_0's and q8_0's, which keep their float16 (as many
// bytes as the GGUF blocks: decode streams them once per token).
func i8Stride(c tensor.Codec) int {
	switch c {
	case tensor.Q4_0:
		return 256 + 32
	case tensor.Q4_K:
		return 296 // 256 + 32 a block, 64 a super-block of 8 (gemmQ4_KSVNNI)
	case tensor.Q6_K:
		return 424 // 256 + 128 + 32 a block, 64 a super-block of 8 (gemmQ6_KVNNI)
	}
	switch {
	case lut4Codec(c):
		return 256 + 64
	case c == tensor.Q4_1:
		return 256 + 64 + 64
	case q5Codec(c):
		return 256 + 64 + 64 + 64
	}
	return 512 + 32 // q8_0, and q5_0 widened to q8_0
}

// packable reports whether the int8 tiles take codec c.
func packable(c tensor.Codec) bool {
	return c == tensor.Q4_0 || c == tensor.Q8_0 || c == tensor.Q4_K || c == tensor.Q6_K
}

// q6Values decodes the 256 unsigned values (0..63) of a q6_K block.
func q6Values(dst *[256]byte, blk []byte) {
	for n := range 2 {
		ql := blk[64*n : 64*n+64]
		qh := blk[128+32*n : 128+32*n+32]
		v := dst[128*n : 128*n+128]
		for l := range 32 {
			h := qh[l]
			v[l] = ql[l]&0xf | (h&3)<<4
			v[l+32] = ql[l+32]&0xf | (h>>2&3)<<4
			v[l+64] = ql[l]>>4 | (h>>4&3)<<4
			v[l+96] = ql[l+32]>>4 | (h>>6&3)<<4
		}
	}
}

// packedW is a weight repacked for the int8 tiles: group g (rows
// 16g..16g+15, zero-padded) block b at (g·nb + b)·stride.
type packedW struct {
	src    uintptr // &Data[0] when packed, to notice a changed tensor
	data   []byte
	nb, ng int
}

// hugeWeights makes packed weights ask for transparent huge pages
// (allocWeights).
var hugeWeights = true

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func i8Bytes(q []int8) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&q[0])), len(q)) }

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

// Unpack drops w's packed int8 tiles, if any; the next Int8 product
// that needs them packs w again. Their memory (mapped outside the Go heap
// on Linux) returns to the system at the next garbage collection.
func Unpack(w *tensor.Tensor) {
	if w != nil {
		packCache.Delete(weak.Make(w))
	}
}

func packWeights(c tensor.Codec, data []byte, rb, rows, cols int) *packedW {
	nb, ng, gs := cols/32, (rows+i8Rows-1)/i8Rows, i8Stride(c)
	// One block of slack: the AMX q4_0 tiles read one block ahead.
	p := &packedW{nb: nb, ng: ng}
	if p.data = allocWeights(p, ng*nb*gs, gs); p.data == nil {
		p.data = make([]byte, (ng*nb+1)*gs)[:ng*nb*gs]
	}
	parallelFor(ng, max(1, 64<<10/(nb*gs)), func(lo, hi int) {
		for g := lo; g < hi; g++ {
			var q6 [256]byte
			for r := range i8Rows {
				row := g*i8Rows + r
				if row >= rows {
					break // padding stays zero: weight 0, scale 0
				}
				src := data[row*rb : (row+1)*rb]
				for b := range nb {
					dst := p.data[(g*nb+b)*gs : (g*nb+b+1)*gs]
					if lowbitPackable(c) {
						packLowbitBlock(c, dst, src, r, b)
						continue
					}
					if c == tensor.Q6_K {
						sb := src[210*(b/8) : 210*(b/8)+210]
						e0 := 32 * (b % 8)
						hdr := p.data[(g*nb+b-b%8)*gs:]
						dst := hdr[64+416*(b%8) : 64+416*(b%8+1)]
						if e0 == 0 {
							q6Values(&q6, sb)
							binary.LittleEndian.PutUint32(hdr[4*r:], math.Float32bits(f16Table[binary.LittleEndian.Uint16(sb[208:])]))
						}
						for i := range 16 {
							lo, hi := q6[e0+i], q6[e0+16+i]
							dst[64*(i/4)+4*r+i%4] = lo&0xf | (hi&0xf)<<4
							dst[256+4*r+i%4] |= (lo >> 4) << (2 * uint(i/4))
							dst[256+64+4*r+i%4] |= (hi >> 4) << (2 * uint(i/4))
						}
						dst[384+r], dst[400+r] = sb[192+e0/16], sb[192+e0/16+1]
						continue
					}
					if c == tensor.Q4_K {
						// Sub-block b%8 of super-block b/8: nibble half
						// (b%8)%2 of the 32 bytes of chunk (b%8)/2,
						// re-paired as q4_0 pairs elements i and 16+i;
						// the super-block's header holds d and dmin
						// (float16), each sub-block its sc and m bytes.
						sb := src[144*(b/8) : 144*(b/8)+144]
						sub := b % 8
						hdr := p.data[(g*nb+b-sub)*gs:]
						dst := hdr[64+288*sub : 64+288*(sub+1)]
						qs := sb[16+32*(sub/2) : 16+32*(sub/2)+32]
						sh := 4 * uint(sub%2)
						for i := range 16 {
							dst[64*(i/4)+4*r+i%4] = (qs[i]>>sh)&0xf | ((qs[16+i]>>sh)&0xf)<<4
						}
						sc, m := tensor.Q4KScaleMin(sub, sb[4:16])
						dst[256+r], dst[272+r] = sc, m
						if sub == 0 {
							copy(hdr[2*r:2*r+2], sb[0:2])
							copy(hdr[32+2*r:32+2*r+2], sb[2:4])
						}
						continue
					}
					if c == tensor.Q4_0 {
						blk := src[18*b : 18*b+18]
						for q := range 4 {
							binary.LittleEndian.PutUint32(dst[64*q+4*r:], binary.LittleEndian.Uint32(blk[2+4*q:]))
						}
						copy(dst[256+2*r:256+2*r+2], blk[:2])
						continue
					}
					blk := src[34*b : 34*b+34]
					for q := range 8 {
						v := binary.LittleEndian.Uint32(blk[2+4*q:])
						binary.LittleEndian.PutUint32(dst[64*q+4*r:], v^0x80808080)
					}
					copy(dst[512+2*r:512+2*r+2], blk[:2])
				}
			}
		}
	})
	return p
}
