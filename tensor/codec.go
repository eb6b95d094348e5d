// Package tensor names the weight encodings (codecs) the engine understands and
// describes a weight tensor as raw encoded bytes plus a shape.
//
// Layout contract, shared by every backend: a tensor of shape [d0, ..., dn-1]
// is row-major with the last dimension innermost. A 2-D weight is [out, in]
// (PyTorch order): row o holds the weights that produce output o, and y = W·x
// means y[o] = Σ_i W[o,i]·x[i]. Block codecs (q8_0, q4_0, q4_K, q6_K) encode
// each row independently, so the innermost dimension must be a multiple of the
// codec's block length. Block layouts are byte-for-byte those of GGUF, so GGUF
// weights are used as they are.
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
type Tensor struct {
	Name  string
	Codec Codec
	Shape []int
	Data  []byte
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
