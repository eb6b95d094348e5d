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
	// Planar codecs (q8_0, q4_0: GGUF's 34- and 18-byte blocks are not
	// 4-byte aligned) are held as a quant plane of QBytes per block, then
	// a scale plane of the blocks' f16 scales (two per u32, padded to a
	// whole u32) from u32 word soff (Pack's result).
	Planar bool
	QBytes int
	// Block is the bytes of one block on the device: GGUF's block padded
	// to 16 bytes for the padded codecs and q6_K, the codec's block
	// otherwise (a planar codec's two planes hold as much).
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
}

// deviceCodecs is the codec table of the GPU side, in Codecs' order.
var deviceCodecs = func() []*DeviceCodec {
	var out []*DeviceCodec
	alone := func(c tensor.Codec, chunk int) *DeviceCodec {
		return &DeviceCodec{Codec: c, Chunk: chunk, Block: c.BlockBytes(), prelude: []string{"codec_" + c.String()}}
	}
	planar := func(c tensor.Codec, chunk, qBytes int) *DeviceCodec {
		d := alone(c, chunk)
		d.Planar, d.QBytes = true, qBytes
		bb := c.BlockBytes()
		d.Pack = func(dst, src []byte) ([]byte, uint32, error) { return repackPlanar(dst, src, bb, qBytes) }
		return d
	}
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
		case c == tensor.Q5_0:
			d.prelude = []string{"codec_" + c.String()}
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
		padded(tensor.Q5_0, 32, true), padded(tensor.Q4_1, 32, true), padded(tensor.Q5_1, 32, true), padded(tensor.Q5_K, 32, true),
		padded(tensor.Q3_K, 16, true), padded(tensor.Q2_K, 16, true), padded(tensor.IQ4_NL, 32, true), padded(tensor.IQ4_XS, 32, false),
		padded(tensor.MXFP4, 32, true), padded(tensor.TQ1_0, 32, false), padded(tensor.TQ2_0, 32, false),
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

func codecPrelude(c tensor.Codec) (string, error) {
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
	return src, nil
}

// RepackQ8_0 converts GGUF q8_0 bytes (34-byte blocks: f16 scale, 32 int8)
// into the device layout: a quant plane of nblocks*32 bytes, then the scale
// plane of the f16 scales (two per u32, padded to a whole u32). It returns
// the layout and the scale plane's offset in u32 units.
func RepackQ8_0(src []byte) ([]byte, uint32, error) { return repackPlanar(nil, src, 34, 32) }

// RepackQ4_0 is RepackQ8_0 for q4_0 (18-byte blocks: f16 scale, 16 bytes
// of nibbles).
func RepackQ4_0(src []byte) ([]byte, uint32, error) { return repackPlanar(nil, src, 18, 16) }

// repackPlanar splits blocks of blockBytes (an f16 scale, then qBytes of
// quants) into the quant plane and the scale plane; dst is reused when
// large enough.
func repackPlanar(dst, src []byte, blockBytes, qBytes int) ([]byte, uint32, error) {
	if len(src)%blockBytes != 0 {
		return nil, 0, fmt.Errorf("shaders: %d bytes is not a whole number of %d-byte blocks", len(src), blockBytes)
	}
	n := len(src) / blockBytes
	qlen := n * qBytes // a multiple of 4: 16 or 32 per block
	slen := (n*2 + 3) &^ 3
	if cap(dst) < qlen+slen {
		dst = make([]byte, qlen+slen)
	}
	out := dst[:qlen+slen]
	for b := 0; b < n; b++ {
		blk := src[b*blockBytes : (b+1)*blockBytes]
		copy(out[b*qBytes:(b+1)*qBytes], blk[2:])
		out[qlen+2*b] = blk[0]
		out[qlen+2*b+1] = blk[1]
	}
	clear(out[qlen+2*n:])
	return out, uint32(qlen / 4), nil
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
