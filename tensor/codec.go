// Package tensor names the weight encodings (codecs) the engine understands and
// describes a weight tensor as raw encoded bytes plus a shape.
//
// Layout contract, shared by every backend: a tensor of shape [d0, ..., dn-1]
// is row-major with the last dimension innermost. A 2-D weight is [out, in]
// (PyTorch order): row o holds the weights that produce output o, and y = W·x
// means y[o] = Σ_i W[o,i]·x[i]. Block codecs (q8_0, q4_0, q4_K, q6_K) encode
// each row independently, so the innermost dimension must be a multiple of the
// codec's block length. Block layouts are byte-for-byte those of GGUF, so GGUF
// weights are used as they are. Besides the codecs above, every GGUF block
// type llama.cpp's quantize recipes write (q4_1 … mxfp4 below) is a codec,
// decoded bit-for-bit as ggml decodes it.
package tensor

import "fmt"

// Codec is the encoding of a tensor's elements.
type Codec uint8

const (
	F32  Codec = 0
	F16  Codec = 1
	BF16 Codec = 2
	Q8_0 Codec = 3 // blocks of 32: f16 scale + 32 int8
	Q4_0 Codec = 4 // blocks of 32: f16 scale + 16 bytes of nibbles (q-8)*d
	Q4_K Codec = 5 // super-blocks of 256 (GGUF layout, 144 bytes)
	Q6_K Codec = 6 // super-blocks of 256 (GGUF layout, 210 bytes)
	I32  Codec = 7 // plain int32 (indices, never a weight)

	// The rest of GGUF's block types, byte-for-byte ggml's layouts and
	// decoded as ggml decodes them (lowbit.go, iquant.go).
	Q4_1    Codec = 8  // blocks of 32: f16 d, f16 m, nibbles; x = d·q + m
	Q5_0    Codec = 9  // blocks of 32: f16 d, 32 high bits, nibbles; x = d·(q-16)
	Q5_1    Codec = 10 // blocks of 32: f16 d, f16 m, 32 high bits, nibbles; x = d·q + m
	Q2_K    Codec = 11 // super-blocks of 256 (84 bytes)
	Q3_K    Codec = 12 // super-blocks of 256 (110 bytes)
	Q5_K    Codec = 13 // super-blocks of 256 (176 bytes)
	IQ4_NL  Codec = 14 // blocks of 32: f16 d, nibbles into a 16-value code book
	IQ4_XS  Codec = 15 // super-blocks of 256 (136 bytes)
	IQ3_XXS Codec = 16 // super-blocks of 256 (98 bytes)
	IQ3_S   Codec = 17 // super-blocks of 256 (110 bytes)
	IQ2_XXS Codec = 18 // super-blocks of 256 (66 bytes)
	IQ2_XS  Codec = 19 // super-blocks of 256 (74 bytes)
	IQ2_S   Codec = 20 // super-blocks of 256 (82 bytes)
	IQ1_S   Codec = 21 // super-blocks of 256 (50 bytes)
	IQ1_M   Codec = 22 // super-blocks of 256 (56 bytes)
	TQ1_0   Codec = 23 // super-blocks of 256 (54 bytes): ternary, base-3 packed
	TQ2_0   Codec = 24 // super-blocks of 256 (66 bytes): ternary, 2 bits each
	MXFP4   Codec = 25 // blocks of 32: e8m0 exponent, 16 bytes of e2m1 nibbles

	// The seed engine's own codecs (seed.go; docs/cmf.md specifies them).
	Q8_ROW   Codec = 26 // blocks of 64: 64 int8, f32 scale
	Q4_TILED Codec = 27 // tiles of 32: f16 scale, 16 bytes of paired nibbles
	Q4TP     Codec = 28 // blocks of 64: two 16-byte nibble strides, f16 d, two ladder rungs
	Q2TP     Codec = 29 // blocks of 64: two 8-byte 2-bit plane chunks, f16 d, two rungs (rung 0 is zero)
	Q1       Codec = 30 // tiles of 32: sign bits, f16 scale
	Q1G      Codec = 31 // groups of 128: sign plane, f16 scale
	Q1T      Codec = 32 // blocks of 64: ternary base, f16 d, four int8 overlay entries
	// Q8_2F is the seed's int8 codec with a column field: blocks of 64
	// (64 int8, f16 d) and a per-matrix side field of f16 column scales
	// (Tensor.Side; side.go). x = d·q·c_col.
	Q8_2F Codec = 33
	// BLR is the seed's binary low-rank weight, W = U·diag(s)·V with ±1
	// factors of rank k, run as two products (blr.go): no rows of its own
	// (ByteLen 0); the side field holds both factors as q1 matrices.
	BLR Codec = 34

	// NumCodecs bounds the codec numbers: tables indexed by codec have this
	// length.
	NumCodecs = 35
)

var codecInfo = [...]struct {
	name       string
	blockLen   int // elements per block
	blockBytes int // bytes per block
}{
	F32:  {"f32", 1, 4},
	F16:  {"f16", 1, 2},
	BF16: {"bf16", 1, 2},
	Q8_0: {"q8_0", 32, 34},
	Q4_0: {"q4_0", 32, 18},
	Q4_K: {"q4_K", 256, 144},
	Q6_K: {"q6_K", 256, 210},
	I32:  {"i32", 1, 4},

	Q4_1:    {"q4_1", 32, 20},
	Q5_0:    {"q5_0", 32, 22},
	Q5_1:    {"q5_1", 32, 24},
	Q2_K:    {"q2_K", 256, 84},
	Q3_K:    {"q3_K", 256, 110},
	Q5_K:    {"q5_K", 256, 176},
	IQ4_NL:  {"iq4_nl", 32, 18},
	IQ4_XS:  {"iq4_xs", 256, 136},
	IQ3_XXS: {"iq3_xxs", 256, 98},
	IQ3_S:   {"iq3_s", 256, 110},
	IQ2_XXS: {"iq2_xxs", 256, 66},
	IQ2_XS:  {"iq2_xs", 256, 74},
	IQ2_S:   {"iq2_s", 256, 82},
	IQ1_S:   {"iq1_s", 256, 50},
	IQ1_M:   {"iq1_m", 256, 56},
	TQ1_0:   {"tq1_0", 256, 54},
	TQ2_0:   {"tq2_0", 256, 66},
	MXFP4:   {"mxfp4", 32, 17},

	Q8_ROW:   {"q8_row", 64, 68},
	Q4_TILED: {"q4_tiled", 32, 18},
	Q4TP:     {"q4tp", 64, 36},
	Q2TP:     {"q2tp", 64, 20},
	Q1:       {"q1", 32, 6},
	Q1G:      {"q1g", 128, 18},
	Q1T:      {"q1t", 64, 28},
	Q8_2F:    {"q8_2f", 64, 66},
	BLR:      {"blr", 1, 0},
}

// Valid reports whether c is a codec this build knows.
func (c Codec) Valid() bool { return int(c) < len(codecInfo) }

func (c Codec) String() string {
	if !c.Valid() {
		return fmt.Sprintf("codec(%d)", uint8(c))
	}
	return codecInfo[c].name
}

// BlockLen is the number of elements one block encodes (1 for plain codecs).
func (c Codec) BlockLen() int { return codecInfo[c].blockLen }

// BlockBytes is the encoded size of one block.
func (c Codec) BlockBytes() int { return codecInfo[c].blockBytes }

// Quantized reports whether c is a block-quantized codec.
func (c Codec) Quantized() bool { return c.Valid() && codecInfo[c].blockLen > 1 }

// ParseCodec maps a name such as "q8_0" back to its codec.
func ParseCodec(name string) (Codec, error) {
	for i, ci := range codecInfo {
		if ci.name == name {
			return Codec(i), nil
		}
	}
	return 0, fmt.Errorf("tensor: unknown codec %q", name)
}

// RowBytes is the encoded size of n consecutive elements (one row).
// It fails when n is not a whole number of blocks.
func (c Codec) RowBytes(n int) (int, error) {
	if !c.Valid() {
		return 0, fmt.Errorf("tensor: unknown codec %d", uint8(c))
	}
	bl := codecInfo[c].blockLen
	if n < 0 || n%bl != 0 {
		return 0, fmt.Errorf("tensor: row of %d elements is not a multiple of the %s block (%d)", n, c, bl)
	}
	return n / bl * codecInfo[c].blockBytes, nil
}

// Tensor is one named weight: its codec, its shape and its encoded bytes.
// Data may alias a memory-mapped file; treat it as read-only.
//
// Data holds the rows (ByteLen bytes, row r at Row(r)), so that any row
// range decodes alone. A codec with a per-tensor side field (HasSide:
// q8_2f's column scales) also needs Side, SideLen bytes, which Data's rows
// mean nothing without: decode such a tensor with DecodeRows, never with
// Dequantize on its rows (which refuses it).
type Tensor struct {
	Name  string
	Codec Codec
	Shape []int
	Data  []byte
	Side  []byte // the codec's per-tensor side field; nil for codecs without one
}

// Elements is the product of the shape's dimensions.
func (t *Tensor) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Rows and Cols view the tensor as a matrix: the innermost dimension is Cols,
// every other dimension folds into Rows.
func (t *Tensor) Cols() int {
	if len(t.Shape) == 0 {
		return 1
	}
	return t.Shape[len(t.Shape)-1]
}

func (t *Tensor) Rows() int {
	c := t.Cols()
	if c == 0 {
		return 0
	}
	return t.Elements() / c
}

// ByteLen is the encoded size the shape and codec imply.
func ByteLen(c Codec, shape []int) (int64, error) {
	if len(shape) == 0 {
		return c.rowBytes64(1)
	}
	rows := int64(1)
	for _, d := range shape[:len(shape)-1] {
		if d < 0 {
			return 0, fmt.Errorf("tensor: negative dimension in %v", shape)
		}
		if d > 0 && rows > (1<<40)/int64(d) {
			return 0, fmt.Errorf("tensor: shape %v is too large", shape)
		}
		rows *= int64(d)
	}
	rb, err := c.rowBytes64(shape[len(shape)-1])
	if err != nil {
		return 0, err
	}
	if rb != 0 && rows > (1<<50)/rb {
		return 0, fmt.Errorf("tensor: shape %v is too large", shape)
	}
	return rows * rb, nil
}

func (c Codec) rowBytes64(n int) (int64, error) {
	if n > 1<<40 {
		return 0, fmt.Errorf("tensor: row of %d elements is too large", n)
	}
	rb, err := c.RowBytes(n)
	return int64(rb), err
}

// Row returns the encoded bytes of row r of a matrix view.
func (t *Tensor) Row(r int) []byte {
	rb, _ := t.Codec.RowBytes(t.Cols())
	return t.Data[r*rb : (r+1)*rb]
}
