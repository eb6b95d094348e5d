package kernel

import (
	"encoding/binary"
	"fmt"

	"github.com/cortiq/cortiq/tensor"
)

// Codecs with a per-tensor side field (tensor.Tensor.Side: q8_2f's column
// scales) run the exact path of lowbit.go with the field applied: each
// row decoded exactly as tensor.DecodeRows decodes it ((d·q)·c), then one
// float32 dot product. The field travels to the row kernel as aux.

func init() {
	genericKernels[tensor.Q8_2F], matvecKernels[tensor.Q8_2F] = q82Rows, q82Rows
}

// q82Rows is the rows kernel of q8_2f: aux is the matrix's column field.
func q82Rows(y []float32, data []byte, rb int, x, aux []float32) {
	n := len(x)
	var w []float32
	if p, ok := rowBufs.Get().(*[]float32); ok && cap(*p) >= n {
		w = (*p)[:n]
	} else {
		w = make([]float32, n)
	}
	for i := range y {
		decodeQ82(w, data[i*rb:(i+1)*rb], aux)
		y[i] = Dot(w, x)
	}
	rowBufs.Put(&w)
}

// decodeQ82 decodes one q8_2f row under column field c, as
// tensor.DecodeRows does.
func decodeQ82(dst []float32, row []byte, c []float32) {
	for b := 0; b < len(dst)/64; b++ {
		blk := row[66*b : 66*b+66]
		d := tensor.F16ToF32(binary.LittleEndian.Uint16(blk[64:]))
		for j := range 64 {
			dst[64*b+j] = float32(d*float32(int8(blk[j]))) * c[64*b+j]
		}
	}
}

// sideField decodes the column field of the matrix holding rows [row0,
// row0+nrows) of w, a tensor whose codec has a side field; the rows must
// lie in one matrix (a [E, out, in] bank is multiplied an expert at a
// time). A malformed side field is a programming error (loaders check it,
// tensor.Tensor.CheckSide) and panics, as length mismatches do.
func sideField(w *tensor.Tensor, row0, nrows int) []float32 {
	per := matRows(w) / tensor.Matrices(w.Shape)
	m := 0
	if per > 0 {
		m = row0 / per
		if nrows > 0 && (row0+nrows-1)/per != m {
			panic(fmt.Sprintf("kernel: weight %s %v: rows [%d,%d) cross matrices of its column field", w.Name, w.Shape, row0, row0+nrows))
		}
	}
	c := make([]float32, w.Cols())
	if err := tensor.ColumnField(c, w, m); err != nil {
		panic("kernel: " + err.Error())
	}
	return c
}

// matmulSide is MatMul for a codec with a side field: groups of rows
// decoded with the field, then matmulTile.
func matmulSide(y []float32, w *tensor.Tensor, x []float32, n, rows, cols int) {
	if cols == 0 {
		clear(y[:n*rows])
		return
	}
	per := rows / tensor.Matrices(w.Shape)
	rb, _ := w.Codec.RowBytes(cols)
	fields := make([][]float32, tensor.Matrices(w.Shape))
	for m := range fields {
		fields[m] = sideField(w, m*per, per)
	}
	groups := (rows + mmGroup - 1) / mmGroup
	grain := max(1, (64<<10)/max(1, mmGroup*cols*n))
	parallelFor(groups, grain, func(lo, hi int) {
		sp := getScratch(mmGroup * cols)
		defer scratchPool.Put(sp)
		buf := *sp
		for g := lo; g < hi; g++ {
			r0 := g * mmGroup
			nr := min(mmGroup, rows-r0)
			for i := range nr {
				r := r0 + i
				decodeQ82(buf[i*cols:(i+1)*cols], w.Data[r*rb:(r+1)*rb], fields[r/per])
			}
			matmulTile(y, buf[:nr*cols], cols, x, n, rows, r0, nr)
		}
	})
}

// blrProduct computes rows [row0, row0+nrows) of W·X for n tokens of a blr
// weight w (y[t·nrows+o]), as its two products (tensor.BLRStages): T =
// A·X, then B·T, each with the exact q1 kernels.
func blrProduct(y []float32, w *tensor.Tensor, x []float32, n, row0, nrows int) {
	a, b, err := tensor.BLRStages(w)
	if err != nil {
		panic("kernel: " + err.Error())
	}
	k, out := a.Shape[0], b.Shape[0]
	t := make([]float32, n*k)
	if n == 1 {
		MatVec(t, a, x)
		MatVecRows(y, b, t, row0, nrows)
		return
	}
	MatMul(t, a, x, n)
	if row0 == 0 && nrows == out {
		MatMul(y, b, t, n)
		return
	}
	for i := range n {
		MatVecRows(y[i*nrows:(i+1)*nrows], b, t[i*k:(i+1)*k], row0, nrows)
	}
}
