package shaders

import (
	"encoding/binary"
	"fmt"

	"github.com/cortiq/cortiq/tensor"
)

// DeviceCodec is how the kernels hold and read one weight codec: the one
// record a codec needs on the GPU side (with its WGSL prelude
// codec_<name>.wgsl). Backends lay weights out with Pack and size them with
// Block; the kernels' sources are assembled from the prelude.
type DeviceCodec struct {
	Codec tensor.Codec
	// Chunk is the elements one 16-byte load holds (fetchc); a matmul's
	// inner dimension must be a multiple of it.
	Chunk int
	// Planar codecs (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs,
	// mxfp4, tq1_0, tq2_0: GGUF's blocks are not 16-byte aligned) are held
	// as a quant plane of QBytes per block of Elems elements (a multiple
	// of 16 bytes: whole vec4<u32>s), then a scale plane of SBytes per
	// block (1: mxfp4's exponents, four per u32; 2: two f16 scales per
	// u32; 4 or 8: one or two u32 per block; 6: a u32 and an f16 (q5_0,
	// tq1_0), two blocks per three u32; padded to a whole u32) from u32
	// word soff (Pack's result).
	Planar bool
	QBytes int
	SBytes int
	Elems  int
	// Block is the bytes of one block on the device: GGUF's block padded
	// to 16 bytes for the padded codecs and q6_K, a planar codec's
	// QBytes+SBytes (its two planes), the codec's block otherwise.
	Block int
	// Pack lays whole blocks out for the device (dst reused when large
	// enough); soff is the scale plane's offset of a planar codec, 0 for
	// the others. Nil: the bytes as they are.
	Pack func(dst, src []byte) (data []byte, soff uint32, err error)
	// Grid is the code book an IQ codec's prelude reads, appended after
	// the tensor's blocks (its u32 word offset is the kernels' soff); nil
	// for the other codecs.
	Grid []byte
	// Side lays out the per-tensor side field of a codec that has one
	// (tensor.Codec.HasSide: q8_2f's column field) for the weight made of
	// the rows of ts in order, to follow its blocks from u32 word base (the
	// kernels' soff); nil for the other codecs. See Q82Tail.
	Side func(base uint32, ts []*tensor.Tensor) ([]byte, error)
	// Stages splits a weight of a codec run as two products (blr) into
	// them: y = b·(a·x), a and b in codecs the kernels read. Such a codec
	// has no prelude of its own and is not in Codecs; nil for the others.
	Stages func(t *tensor.Tensor) (a, b *tensor.Tensor, err error)

	padded  bool     // GGUF's blocks padded to 16 bytes (PadBlocks)
	prelude []string // the WGSL files of its prelude, in order
	// lut: the prelude looks its values up in a 16-entry code book
	// (var<private> kvals) through lut(i); the kernels that call
	// codec_init hold it in workgroup memory (see codecPreludeShared).
	lut bool
}

// deviceCodecs is the codec table of the GPU side, in Codecs' order.
var deviceCodecs = func() []*DeviceCodec {
	var out []*DeviceCodec
	alone := func(c tensor.Codec, chunk int) *DeviceCodec {
		return &DeviceCodec{Codec: c, Chunk: chunk, Block: c.BlockBytes(), prelude: []string{"codec_" + c.String()}}
	}
	// planarOf is a codec held as a quant plane and a scale plane (see
	// Planar): split lays one GGUF block out as its QBytes of quants and
	// SBytes of scales.
	planarOf := func(c tensor.Codec, chunk, elems, qBytes, sBytes int, split func(q, s, in []byte)) *DeviceCodec {
		d := alone(c, chunk)
		d.Planar, d.QBytes, d.SBytes, d.Elems, d.Block = true, qBytes, sBytes, elems, qBytes+sBytes
		bb := c.BlockBytes()
		d.Pack = func(dst, src []byte) ([]byte, uint32, error) {
			return repackPlanes(dst, src, bb, qBytes, sBytes, split)
		}
		return d
	}
	// planar is a planarOf of 32-element blocks that are an f16 scale,
	// then qBytes of quants (q8_0, q4_0, iq4_nl).
	planar := func(c tensor.Codec, chunk, qBytes int) *DeviceCodec {
		return planarOf(c, chunk, 32, qBytes, 2, func(q, s, in []byte) {
			copy(q, in[2:])
			copy(s, in[:2])
		})
	}
	iq4nl := planar(tensor.IQ4_NL, 32, 16)
	iq4nl.lut = true
	// mxfp4: the e8m0 exponent, then 16 bytes of e2m1 nibbles.
	mxfp4 := planarOf(tensor.MXFP4, 32, 32, 16, 1, func(q, s, in []byte) {
		copy(q, in[1:17])
		s[0] = in[0]
	})
	mxfp4.lut = true
	// iq4_xs: the first 8 bytes of a super-block (d, the scales' high
	// bits, their low nibbles) are its scale-plane entry, the 128 nibble
	// bytes its quants, one vec4<u32> per 32-element sub-block.
	iq4xs := planarOf(tensor.IQ4_XS, 32, 256, 128, 8, func(q, s, in []byte) {
		copy(q, in[8:136])
		copy(s, in[:8])
	})
	iq4xs.lut = true
	// q4_1: d and m (one u32) per block; q5_1: d, m and the fifth bits
	// (two u32); q5_0: the fifth bits, then d (6 bytes).
	q41 := planarOf(tensor.Q4_1, 32, 32, 16, 4, func(q, s, in []byte) {
		copy(q, in[4:20])
		copy(s, in[:4])
	})
	q51 := planarOf(tensor.Q5_1, 32, 32, 16, 8, func(q, s, in []byte) {
		copy(q, in[8:24])
		copy(s, in[:8])
	})
	q50 := planarOf(tensor.Q5_0, 32, 32, 16, 6, func(q, s, in []byte) {
		copy(q, in[6:22])
		copy(s[0:4], in[2:6])
		copy(s[4:6], in[0:2])
	})
	// tq2_0: the 2-bit codes regrouped so a u32 holds 16 consecutive
	// elements (tq2Codes), then d. tq1_0: the 48 bytes of five digits,
	// then the 4 bytes of four digits and d (6 bytes, as q5_0's).
	tq2 := planarOf(tensor.TQ2_0, 32, 256, 64, 2, func(q, s, in []byte) {
		tq2Codes(q, func(p int) byte { return in[32*(p/128)+p%32] >> (2 * ((p % 128) / 32)) & 3 })
		copy(s, in[64:66])
	})
	tq1 := planarOf(tensor.TQ1_0, 32, 256, 48, 6, func(q, s, in []byte) {
		copy(q, in[:48])
		copy(s, in[48:54])
	})
	// padded is a codec read as padded GGUF blocks (codec_blocks.wgsl);
	// whole reads its words itself, else codec_chunk<chunk> assembles
	// fetchc from its fetch4.
	padded := func(c tensor.Codec, chunk int, whole bool) *DeviceCodec {
		d := &DeviceCodec{Codec: c, Chunk: chunk, Block: DeviceBlockBytes(c), Grid: tensor.GridBytes(c), padded: true}
		d.Pack = func(dst, src []byte) ([]byte, uint32, error) {
			data, err := PadBlocks(dst, src, c)
			return data, 0, err
		}
		switch {
		case whole:
			d.prelude = []string{"codec_blocks", "codec_" + c.String()}
		default:
			d.prelude = []string{"codec_blocks", "codec_" + c.String(), fmt.Sprintf("codec_chunk%d", chunk)}
		}
		return d
	}
	q4k := alone(tensor.Q4_K, 32)
	q4k.Pack = func(dst, src []byte) ([]byte, uint32, error) {
		data, err := RepackQ4_K(dst, src)
		return data, 0, err
	}
	q6k := alone(tensor.Q6_K, 16)
	q6k.Block = Q6KDeviceBlock
	q6k.Pack = func(dst, src []byte) ([]byte, uint32, error) {
		data, err := PadQ6_K(dst, src)
		return data, 0, err
	}
	out = append(out, alone(tensor.F32, 4), alone(tensor.F16, 8), planar(tensor.Q8_0, 16, 32), planar(tensor.Q4_0, 32, 16), q4k, q6k,
		q50, q41, q51, padded(tensor.Q5_K, 32, true),
		padded(tensor.Q3_K, 16, true), padded(tensor.Q2_K, 16, true), iq4nl, iq4xs,
		mxfp4, tq1, tq2,
		padded(tensor.IQ2_XXS, 32, false), padded(tensor.IQ2_XS, 16, false), padded(tensor.IQ2_S, 16, false),
		padded(tensor.IQ3_XXS, 32, false), padded(tensor.IQ3_S, 32, false), padded(tensor.IQ1_S, 32, false), padded(tensor.IQ1_M, 16, false),
		padded(tensor.Q8_ROW, 32, false), padded(tensor.Q4_TILED, 32, false), padded(tensor.Q4TP, 32, false), padded(tensor.Q2TP, 32, false),
		padded(tensor.Q1, 32, false), padded(tensor.Q1G, 32, false), padded(tensor.Q1T, 32, false))
	q82 := padded(tensor.Q8_2F, 32, true)
	q82.Side = Q82Tail
	out = append(out, q82, &DeviceCodec{Codec: tensor.BLR, Stages: tensor.BLRStages})
	return out
}()

// Codecs lists the weight codecs the kernels read directly (a staged
// codec, run as two products in other codecs, is not among them).
var Codecs = func() []tensor.Codec {
	var out []tensor.Codec
	for _, d := range deviceCodecs {
		if d.Stages == nil {
			out = append(out, d.Codec)
		}
	}
	return out
}()

// Staged reports whether codec c runs as two products (DeviceCodec.Stages).
func Staged(c tensor.Codec) bool {
	d := DeviceCodecOf(c)
	return d != nil && d.Stages != nil
}

// DeviceCodecOf is codec c's record, or nil when no kernel reads c.
func DeviceCodecOf(c tensor.Codec) *DeviceCodec {
	for _, d := range deviceCodecs {
		if d.Codec == c {
			return d
		}
	}
	return nil
}

// Supported reports whether the kernels read codec c directly.
func Supported(c tensor.Codec) bool { return DeviceCodecOf(c) != nil }

// Padded reports whether codec c is held on the device as GGUF's blocks,
// each padded to a whole number of 16-byte words (PadBlocks).
func Padded(c tensor.Codec) bool {
	d := DeviceCodecOf(c)
	return d != nil && d.padded
}

// ChunkOf is the number of elements of codec c one 16-byte load holds; a
// matmul's inner dimension must be a multiple of it (0 for a codec no
// kernel reads).
func ChunkOf(c tensor.Codec) int {
	if d := DeviceCodecOf(c); d != nil {
		return d.Chunk
	}
	return 0
}

// DeviceBlockBytes is the bytes of one block of a padded codec (or q6_K)
// on the device: BlockBytes rounded up to 16.
func DeviceBlockBytes(c tensor.Codec) int { return (c.BlockBytes() + 15) &^ 15 }

// GridTail is the code book the IQ codecs' preludes read: the device
// buffer of such a weight is its padded blocks, then these bytes from u32
// word soff. Nil for the other codecs.
func GridTail(c tensor.Codec) []byte { return tensor.GridBytes(c) }

func codecPrelude(c tensor.Codec) (string, error) { return prelude(c, false) }

// codecPreludeShared is codecPrelude for the kernels that call
// codec_init(thread, threads) from uniform control flow before their first
// fetch (matvec, matmul, the expert kernels): a code-book codec's 16 values
// are then read from workgroup memory, one bank each, instead of a private
// array (per-thread local memory, where a warp's different indices cost a
// transaction each). On the H200 iq4_nl read from a private array decoded
// at 203 tok/s where q5_0, read the same way without one, ran at 698.
func codecPreludeShared(c tensor.Codec) (string, error) { return prelude(c, true) }

// lutPrivate and lutShared give a code-book prelude its lut(i) and
// codec_init; noInit is codec_init for the other codecs.
const (
	lutPrivate = `fn lut(i: u32) -> f32 {
    return kvals[i];
}`
	lutShared = `var<workgroup> lutw: array<f32, 16>;

fn codec_init(l: u32, n: u32) {
    for (var i = l; i < 16u; i += n) {
        lutw[i] = kvals[i];
    }
    workgroupBarrier();
}

fn lut(i: u32) -> f32 {
    return lutw[i & 15u];
}`
	noInit = "fn codec_init(l: u32, n: u32) {}"
)

func prelude(c tensor.Codec, shared bool) (string, error) {
	d := DeviceCodecOf(c)
	if d == nil {
		return "", fmt.Errorf("shaders: no kernel reads %s weights", c)
	}
	src := ""
	for i, f := range d.prelude {
		if i > 0 {
			src += "\n"
		}
		src += read(f)
	}
	switch {
	case d.lut && shared:
		src += "\n" + lutShared + "\n"
	case d.lut:
		src += "\n" + lutPrivate + "\n"
	case shared:
		src += "\n" + noInit + "\n"
	}
	return src, nil
}

// LUTBytes is the workgroup memory the kernels that call codec_init hold
// for codec c's code book (0 for the codecs without one).
func LUTBytes(c tensor.Codec) int {
	if d := DeviceCodecOf(c); d != nil && d.lut {
		return 64
	}
	return 0
}

// RepackQ8_0 converts GGUF q8_0 bytes (34-byte blocks: f16 scale, 32 int8)
// into the device layout: a quant plane of nblocks*32 bytes, then the scale
// plane of the f16 scales (two per u32, padded to a whole u32). It returns
// the layout and the scale plane's offset in u32 units.
func RepackQ8_0(src []byte) ([]byte, uint32, error) { return DeviceCodecOf(tensor.Q8_0).Pack(nil, src) }

// RepackQ4_0 is RepackQ8_0 for q4_0 (18-byte blocks: f16 scale, 16 bytes
// of nibbles).
func RepackQ4_0(src []byte) ([]byte, uint32, error) { return DeviceCodecOf(tensor.Q4_0).Pack(nil, src) }

// repackPlanes splits blocks of blockBytes into the quant plane (qBytes a
// block) and the scale plane (sBytes a block, padded to a whole u32), each
// block laid out by split; dst is reused when large enough. It returns the
// layout and the scale plane's offset in u32 words.
func repackPlanes(dst, src []byte, blockBytes, qBytes, sBytes int, split func(q, s, in []byte)) ([]byte, uint32, error) {
	if len(src)%blockBytes != 0 {
		return nil, 0, fmt.Errorf("shaders: %d bytes is not a whole number of %d-byte blocks", len(src), blockBytes)
	}
	n := len(src) / blockBytes
	qlen := n * qBytes // a multiple of 16
	slen := (n*sBytes + 3) &^ 3
	if cap(dst) < qlen+slen {
		dst = make([]byte, qlen+slen)
	}
	out := dst[:qlen+slen]
	for b := 0; b < n; b++ {
		split(out[b*qBytes:(b+1)*qBytes], out[qlen+b*sBytes:qlen+(b+1)*sBytes], src[b*blockBytes:(b+1)*blockBytes])
	}
	clear(out[qlen+n*sBytes:])
	return out, uint32(qlen / 4), nil
}

// tq2Codes writes the 2-bit codes code(p) of a 256-element super-block as
// the device holds them: u32 word i (bytes 4i..4i+3) holds elements
// 16i..16i+15, element 16i+4m+k in bits 2m..2m+1 of byte k, so a shift
// and a mask give four consecutive elements one per byte (codec_tq2_0.wgsl).
func tq2Codes(q []byte, code func(p int) byte) {
	clear(q[:64])
	for p := 0; p < 256; p++ {
		q[4*(p/16)+p%4] |= code(p) << (2 * ((p % 16) / 4))
	}
}

// Q82Tail is the column field of a q8_2f weight made of the rows of ts in
// order (a fused q/k/v, a bank's experts), laid out for
// codec_q8_2f.wgsl from u32 word base (a multiple of 4): the row length,
// then one u32 per row, the word where that row's column scales start, then
// each matrix's scales as the file holds them (f16, two a word), every
// field on a 16-byte boundary so a kernel reads eight scales with one load.
// Each tensor's rows take the field of their matrix (tensor.Matrices).
func Q82Tail(base uint32, ts []*tensor.Tensor) ([]byte, error) {
	if len(ts) == 0 || base%4 != 0 {
		return nil, fmt.Errorf("shaders: q8_2f side field at word %d of %d tensors", base, len(ts))
	}
	cols := ts[0].Cols()
	rows, fields := 0, 0
	for _, t := range ts {
		if t.Codec != tensor.Q8_2F || t.Cols() != cols || cols%64 != 0 {
			return nil, fmt.Errorf("shaders: %s (%s %v) cannot join a q8_2f weight of %d columns", t.Name, t.Codec, t.Shape, cols)
		}
		if err := t.CheckSide(); err != nil {
			return nil, fmt.Errorf("shaders: %w", err)
		}
		rows += t.Rows()
		fields += tensor.Matrices(t.Shape)
	}
	head := (1 + rows + 3) &^ 3 // words, to a 16-byte boundary
	fw := cols / 2              // words of one field (a multiple of 32)
	out := make([]byte, 4*(head+fields*fw))
	le := binary.LittleEndian
	le.PutUint32(out, uint32(cols))
	row, field := 0, 0
	for _, t := range ts {
		nm := tensor.Matrices(t.Shape)
		per := t.Rows() / nm
		for m := range nm {
			at := head + field*fw
			copy(out[4*at:4*(at+fw)], t.Side[2*m*cols:2*(m+1)*cols])
			for range per {
				le.PutUint32(out[4*(1+row):], base+uint32(at))
				row++
			}
			field++
		}
	}
	return out, nil
}
