package shaders

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

// TestDeviceCodecs checks every GPU codec record against its layout: Pack
// gives whole device blocks (or a planar codec's two planes), padded blocks
// start on 16-byte boundaries, a load's chunk divides the block, and a
// partial block is refused.
func TestDeviceCodecs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range deviceCodecs {
		t.Run(d.Codec.String(), func(t *testing.T) {
			c := d.Codec
			if DeviceCodecOf(c) != d || !Supported(c) || ChunkOf(c) != d.Chunk {
				t.Fatal("lookup disagrees with the table")
			}
			if d.Stages != nil {
				// Run as two products in other codecs (blr): no layout or
				// prelude of its own, and not among the codecs kernels read.
				if !Staged(c) || slices.Contains(Codecs, c) || d.prelude != nil || d.Pack != nil || d.Chunk != 0 {
					t.Fatal("a staged codec with a layout of its own")
				}
				return
			}
			if d.Chunk <= 0 || (c.BlockLen() > 1 && c.BlockLen()%d.Chunk != 0 && d.Chunk%c.BlockLen() != 0) {
				t.Fatalf("chunk %d for blocks of %d elements", d.Chunk, c.BlockLen())
			}
			if (d.Grid != nil) != (tensor.GridBytes(c) != nil) || (d.Grid != nil && !d.padded) {
				t.Fatalf("grid %d bytes, padded %v", len(d.Grid), d.padded)
			}
			if d.padded && d.Block%16 != 0 {
				t.Fatalf("padded block of %d bytes", d.Block)
			}
			const n = 3
			bb := c.BlockBytes()
			src := make([]byte, n*bb)
			for i := range src {
				src[i] = byte(r.IntN(256))
			}
			if d.Pack == nil {
				if d.Block != bb || d.padded || d.Planar {
					t.Fatalf("unpacked codec with device block %d (GGUF %d)", d.Block, bb)
				}
				return
			}
			data, soff, err := d.Pack(nil, src)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case d.Planar:
				if d.QBytes%16 != 0 || d.Block != d.QBytes+d.SBytes || (d.SBytes != 1 && d.SBytes != 2 && d.SBytes != 4 && d.SBytes != 6 && d.SBytes != 8) ||
					d.Elems != c.BlockLen() || len(data) != n*d.QBytes+(d.SBytes*n+3)&^3 || int(soff) != n*d.QBytes/4 {
					t.Fatalf("planar: %d bytes, soff %d", len(data), soff)
				}
			case len(data) != n*d.Block || soff != 0:
				t.Fatalf("%d bytes, soff %d; want %d blocks of %d", len(data), soff, n, d.Block)
			}
			// dst is reused when large enough.
			again, _, err := d.Pack(make([]byte, 0, 2*len(data)), src)
			if err != nil || string(again) != string(data) {
				t.Fatalf("Pack into a reused buffer differs (%v)", err)
			}
			if bb > 1 {
				if _, _, err := d.Pack(nil, src[:len(src)-1]); err == nil {
					t.Fatal("a partial block accepted")
				}
			}
		})
	}
}

// TestPlanarLayouts decodes each planar codec's device layout as its
// prelude does (element e from the quant plane at e's offset, its scales
// from the plane at soff) and holds every element to the codec's own
// decoding of the GGUF bytes, exactly.
func TestPlanarLayouts(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	u32 := func(b []byte, word int) uint32 { return binary.LittleEndian.Uint32(b[4*word:]) }
	f16 := func(h uint32) float32 { return tensor.F16ToF32(uint16(h)) }
	half := func(b []byte, soff, blk int) uint32 { return u32(b, soff+blk/2) >> (16 * uint(blk&1)) & 0xFFFF }
	nib := func(b []byte, e int) uint32 { // element e of a 16-byte-per-32 nibble plane
		j := e % 32
		return uint32(b[16*(e/32)+j%16]) >> (4 * uint(j/16)) & 0xF
	}
	iq4 := []float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	fp4 := []float32{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
	dec := map[tensor.Codec]func(b []byte, soff, e int) float32{
		tensor.IQ4_NL: func(b []byte, soff, e int) float32 { return iq4[nib(b, e)] * f16(half(b, soff, e/32)) },
		tensor.MXFP4: func(b []byte, soff, e int) float32 {
			x := u32(b, soff+e/128) >> (8 * uint(e/32%4)) & 0xFF
			var s float32
			if x < 2 {
				s = math.Float32frombits(0x00200000 << x)
			} else {
				s = math.Float32frombits((x - 1) << 23)
			}
			return fp4[nib(b, e)] * s
		},
		tensor.IQ4_XS: func(b []byte, soff, e int) float32 {
			h, l := u32(b, soff+2*(e/256)), u32(b, soff+2*(e/256)+1)
			s := uint(e%256) / 32
			ls := l>>(4*s)&0xF | (h>>(16+2*s)&3)<<4
			return iq4[nib(b, e)] * (f16(h) * float32(int32(ls)-32))
		},
		tensor.Q4_1: func(b []byte, soff, e int) float32 {
			dm := u32(b, soff+e/32)
			return float32(nib(b, e))*f16(dm) + f16(dm>>16)
		},
		tensor.Q5_1: func(b []byte, soff, e int) float32 {
			dm, qh := u32(b, soff+2*(e/32)), u32(b, soff+2*(e/32)+1)
			return float32(nib(b, e)|(qh>>uint(e%32)&1)<<4)*f16(dm) + f16(dm>>16)
		},
		tensor.Q5_0: func(b []byte, soff, e int) float32 {
			o := 4*soff + 6*(e/32)
			qh, d := binary.LittleEndian.Uint32(b[o:]), uint32(binary.LittleEndian.Uint16(b[o+4:]))
			return float32(int32(nib(b, e)|(qh>>uint(e%32)&1)<<4)-16) * f16(d)
		},
	}
	dec[tensor.TQ2_0] = func(b []byte, soff, e int) float32 {
		q := u32(b, e/16) >> (2 * uint((e%16)/4)) >> (8 * uint(e%4)) & 3
		return float32(int32(q)-1) * f16(half(b, soff, e/256))
	}
	dec[tensor.TQ1_0] = func(b []byte, soff, e int) float32 {
		blk, p := e/256, e%256
		var v byte
		var n int
		switch {
		case p < 160:
			v, n = b[48*blk+p%32], p/32
		case p < 240:
			v, n = b[48*blk+32+(p-160)%16], (p-160)/16
		default:
			v, n = b[4*soff+6*blk+(p-240)%4], (p-240)/4
		}
		for range n {
			v *= 3
		}
		return float32(int32(uint16(v)*3>>8)-1) * f16(uint32(binary.LittleEndian.Uint16(b[4*soff+6*blk+4:])))
	}
	for _, d := range deviceCodecs {
		if !d.Planar || d.Codec == tensor.Q8_0 || d.Codec == tensor.Q4_0 {
			continue
		}
		t.Run(d.Codec.String(), func(t *testing.T) {
			c := d.Codec
			f, ok := dec[c]
			if !ok {
				t.Fatal("no reference decoder for this planar codec")
			}
			const nb = 5
			x := make([]float32, nb*c.BlockLen())
			for i := range x {
				x[i] = float32(r.NormFloat64()) * float32(1+i%7)
			}
			src := make([]byte, nb*c.BlockBytes())
			if err := tensor.Quantize(src, c, x); err != nil {
				t.Fatal(err)
			}
			// Random bytes in the quants too (every code, every digit).
			for b := 0; b < nb; b += 2 {
				for i := range c.BlockBytes() {
					if keep := scaleByte(c, i); !keep {
						src[b*c.BlockBytes()+i] = byte(r.IntN(256))
					}
				}
			}
			want := make([]float32, len(x))
			if err := tensor.Dequantize(want, c, src); err != nil {
				t.Fatal(err)
			}
			data, soff, err := d.Pack(nil, src)
			if err != nil {
				t.Fatal(err)
			}
			for e := range want {
				if got := f(data, int(soff), e); got != want[e] {
					t.Fatalf("element %d: %g from the device layout, %g from GGUF's", e, got, want[e])
				}
			}
		})
	}
}

// scaleByte reports whether byte i of a block of codec c holds a scale
// (left as quantized so the values stay finite).
func scaleByte(c tensor.Codec, i int) bool {
	switch c {
	case tensor.IQ4_NL:
		return i < 2
	case tensor.MXFP4:
		return i < 1
	case tensor.IQ4_XS:
		return i < 2
	case tensor.Q4_1, tensor.Q5_1:
		return i < 4
	case tensor.Q5_0:
		return i < 2
	case tensor.TQ2_0:
		return i >= 64
	case tensor.TQ1_0:
		return i >= 52
	}
	return true
}
