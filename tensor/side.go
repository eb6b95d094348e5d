package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Codecs with a per-tensor side field. Most codecs are rows of blocks that
// carry their own scales; the seed's q8_2f also scales every column, by a
// field one value per column that no block can hold. Its tensors keep the
// row layout every loader and kernel addresses (Data, ByteLen, Row) and add
// the field as Tensor.Side: a container stores the rows, then the side
// (StoredLen bytes in all, one checksum), and every decode of the tensor
// goes through DecodeRows, which applies it.
//
// q8_2f: blocks of 64, 66 bytes: 64 int8 q (element j is byte j), the f16
// d at byte 64. Side: for each matrix of the tensor (Matrices: one for a
// 2-D weight, one per expert of a [E, out, in] bank), cols f16 column
// scales c. x[o, i] = d·q·c_i, evaluated (d·q)·c_i: d·q is exact in
// float32 (11 × 8 significant bits), so the product has one rounding and
// the device's (q·c_i)·d is the same float32 number. A product is
// Q·(c⊙x) with the block scales: the column field prescales the
// activations, the seed's "xs, prescaled by the column scale".
//
// blr (blr.go) uses the side field for a whole weight: it has no rows, and
// its side holds its two factor matrices.

// HasSide reports whether codec c carries a per-tensor side field
// (Tensor.Side) besides its rows.
func (c Codec) HasSide() bool { return c == Q8_2F || c == BLR }

// Matrices is the number of [rows, cols] matrices a tensor of shape holds:
// the product of the dimensions before the last two (1 for a vector or a
// matrix).
func Matrices(shape []int) int {
	n := 1
	for i := 0; i+2 < len(shape); i++ {
		n *= shape[i]
	}
	return n
}

// SideLen is the bytes of codec c's side field for a tensor of shape: for
// q8_2f one f16 column scale per column of each matrix; 0 for the codecs
// without one.
func SideLen(c Codec, shape []int) (int64, error) {
	if !c.HasSide() {
		return 0, nil
	}
	if c == BLR {
		return 0, fmt.Errorf("tensor: a blr tensor's side field is as long as its rank makes it (CheckStored)")
	}
	if len(shape) < 2 {
		return 0, fmt.Errorf("tensor: a %s tensor needs two or more dimensions, not %v", c, shape)
	}
	if _, err := ByteLen(c, shape); err != nil {
		return 0, err
	}
	return 2 * int64(shape[len(shape)-1]) * int64(Matrices(shape)), nil
}

// StoredLen is the bytes a container stores for a tensor of codec c and
// shape: its rows (ByteLen), then its side field (SideLen).
func StoredLen(c Codec, shape []int) (int64, error) {
	n, err := ByteLen(c, shape)
	if err != nil {
		return 0, err
	}
	s, err := SideLen(c, shape)
	return n + s, err
}

// CheckStored reports whether n bytes are what a container stores for a
// tensor of codec c and shape: StoredLen, or for blr, whose side field is
// as long as its rank makes it, a whole rank (BLRRank).
func CheckStored(c Codec, shape []int, n int64) error {
	if c == BLR {
		_, err := BLRRank(shape, n)
		return err
	}
	want, err := StoredLen(c, shape)
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("%d bytes, %s %v needs %d", n, c, shape, want)
	}
	return nil
}

// SplitStored splits b, a tensor's bytes as a container stores them
// (CheckStored), into its rows and its side field (nil for codecs without
// one). Both alias b.
func SplitStored(c Codec, shape []int, b []byte) (data, side []byte, err error) {
	if err := CheckStored(c, shape, int64(len(b))); err != nil {
		return nil, nil, fmt.Errorf("tensor: %w", err)
	}
	n, _ := ByteLen(c, shape)
	if !c.HasSide() {
		return b, nil, nil
	}
	return b[:n:n], b[n:], nil
}

// CheckSide reports whether t.Side is the side field its codec and shape
// imply (nil for a codec without one), naming the tensor.
func (t *Tensor) CheckSide() error {
	if t.Codec == BLR {
		if len(t.Data) != 0 {
			return fmt.Errorf("tensor %q: blr holds %d bytes of rows, want none", t.Name, len(t.Data))
		}
		if _, err := BLRRank(t.Shape, int64(len(t.Side))); err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		return nil
	}
	s, err := SideLen(t.Codec, t.Shape)
	if err != nil {
		return fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if int64(len(t.Side)) != s {
		if s > 0 && len(t.Side) == 0 {
			return fmt.Errorf("tensor %q: %s %v has no side field (its %d bytes of column scales)", t.Name, t.Codec, t.Shape, s)
		}
		return fmt.Errorf("tensor %q: %d bytes of side field, %s %v needs %d", t.Name, len(t.Side), t.Codec, t.Shape, s)
	}
	return nil
}

// ColumnField decodes matrix m's column scales of a q8_2f tensor into
// dst (t.Cols() values).
func ColumnField(dst []float32, t *Tensor, m int) error {
	if err := t.CheckSide(); err != nil {
		return err
	}
	cols := t.Cols()
	if t.Codec != Q8_2F || m < 0 || m >= Matrices(t.Shape) || len(dst) != cols {
		return fmt.Errorf("tensor %q: no column field %d of %d values (%s %v)", t.Name, m, len(dst), t.Codec, t.Shape)
	}
	for i := range dst {
		dst[i] = F16ToF32(binary.LittleEndian.Uint16(t.Side[2*(m*cols+i):]))
	}
	return nil
}

// MatrixSide is the side field of matrix m of t (a [E, out, in] bank's
// expert m), for a view of that matrix alone; nil for a codec without one.
func MatrixSide(t *Tensor, m int) []byte {
	if t.Codec != Q8_2F || len(t.Side) == 0 {
		return nil
	}
	n := len(t.Side) / Matrices(t.Shape)
	return t.Side[m*n : (m+1)*n]
}

// DecodeRows decodes rows [row0, row0+n) of t's matrix view (leading
// dimensions folded into rows) into dst (n·cols values): what the tensor
// means, its side field applied. It is Dequantize on those rows for the
// codecs without a side field.
func DecodeRows(dst []float32, t *Tensor, row0, n int) error {
	cols, rows := t.Cols(), t.Rows()
	rb, err := t.Codec.RowBytes(cols)
	if err != nil {
		return fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if row0 < 0 || n < 0 || row0+n > rows || len(dst) != n*cols || len(t.Data) < (row0+n)*rb {
		return fmt.Errorf("tensor %q: rows [%d, %d) of %s %v into %d values (%d bytes of data)", t.Name, row0, row0+n, t.Codec, t.Shape, len(dst), len(t.Data))
	}
	if !t.Codec.HasSide() {
		if err := Dequantize(dst, t.Codec, t.Data[row0*rb:(row0+n)*rb]); err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		return nil
	}
	if err := t.CheckSide(); err != nil {
		return err
	}
	if t.Codec == BLR {
		return decodeBLRRows(dst, t, row0, n)
	}
	per := rows / Matrices(t.Shape) // rows of one matrix
	for r := range n {
		row := row0 + r
		side := t.Side[2*cols*(row/per):]
		decodeQ82Row(dst[r*cols:(r+1)*cols], t.Data[row*rb:(row+1)*rb], side)
	}
	return nil
}

// DequantizeTensor decodes every element of t (DecodeRows over all rows).
func DequantizeTensor(dst []float32, t *Tensor) error {
	return DecodeRows(dst, t, 0, t.Rows())
}

func decodeQ82Row(dst []float32, row, side []byte) {
	for b := 0; b < len(dst)/64; b++ {
		blk := row[66*b : 66*b+66]
		d := f16At(blk, 64)
		for j := range 64 {
			c := F16ToF32(binary.LittleEndian.Uint16(side[2*(64*b+j):]))
			dst[64*b+j] = float32(d*float32(int8(blk[j]))) * c
		}
	}
}

// EncodeTensor encodes src, the elements of a tensor of shape, in codec
// c: its rows and, for a codec with a side field, the side. For the other
// codecs it is Quantize.
func EncodeTensor(c Codec, shape []int, src []float32) (data, side []byte, err error) {
	n, err := ByteLen(c, shape)
	if err != nil {
		return nil, nil, err
	}
	data = make([]byte, n)
	if !c.HasSide() {
		return data, nil, Quantize(data, c, src)
	}
	if c == BLR {
		side, err := encodeBLR(shape, src)
		return data, side, err
	}
	s, err := SideLen(c, shape)
	if err != nil {
		return nil, nil, err
	}
	t := Tensor{Shape: shape}
	cols, rows := t.Cols(), t.Rows()
	if len(src) != rows*cols {
		return nil, nil, fmt.Errorf("tensor: encode %s %v: %d values", c, shape, len(src))
	}
	side = make([]byte, s)
	per := rows / Matrices(shape)
	rb := cols / 64 * 66
	cf := make([]float32, cols)
	for m := range Matrices(shape) {
		w := src[m*per*cols : (m+1)*per*cols]
		q82Field(cf, w, per, cols)
		for i, v := range cf {
			binary.LittleEndian.PutUint16(side[2*(m*cols+i):], F32ToF16(v))
			cf[i] = F16ToF32(F32ToF16(v))
		}
		for r := range per {
			encQ82Row(data[(m*per+r)*rb:(m*per+r+1)*rb], w[r*cols:(r+1)*cols], cf)
		}
	}
	return data, side, nil
}

// q8_2fMinField bounds a column scale from below: a normal f16.
const q8_2fMinField = 1.0 / 16384

// q82Field chooses the column field of a [rows, cols] matrix w: c_i =
// sqrt(amax_i / mean amax), amax_i the largest magnitude of column i. It
// halves (in the log) the spread of the columns' ranges, so a block's
// int8 grid is not set by one outlier column alone, while the activations'
// own scale stays with x (the seed's SmoothQuant-style prescale, with the
// migration strength 1/2 taken from the weights alone). A dead column
// keeps 1.
func q82Field(c, w []float32, rows, cols int) {
	clear(c)
	for r := range rows {
		for i, v := range w[r*cols : (r+1)*cols] {
			c[i] = max(c[i], abs32(v))
		}
	}
	var sum float64
	live := 0
	for _, a := range c {
		if a > 0 && !math.IsInf(float64(a), 0) {
			sum += float64(a)
			live++
		}
	}
	for i, a := range c {
		switch {
		case live == 0 || a == 0 || math.IsInf(float64(a), 0) || math.IsNaN(float64(a)):
			c[i] = 1
		default:
			c[i] = float32(min(65504, max(q8_2fMinField, math.Sqrt(float64(a)/(sum/float64(live))))))
		}
	}
}

// encQ82Row encodes one row x under the (f16-exact) column field c:
// per block d = amax(x/c)/127, q = round(x/c/d).
func encQ82Row(dst []byte, x, c []float32) {
	var y [64]float32
	for b := 0; b < len(x)/64; b++ {
		for j := range 64 {
			y[j] = x[64*b+j] / c[64*b+j]
		}
		blk := dst[66*b : 66*b+66]
		d := putF16(blk, 64, amaxOf(y[:])/127)
		for j, v := range y {
			blk[j] = byte(int8(nearestCode(v, d, 127, 254) - 127))
		}
	}
}
