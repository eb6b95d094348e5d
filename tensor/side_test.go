package tensor

import (
	"encoding/binary"
	"math"
	"math/rand"
	"strings"
	"testing"
)

// TestQ82F: q8_2f round-trips a [2, 3, 128] bank (two matrices, each its
// own column field) with int8 precision, even with an outlier column; the
// decode is (d·q)·c exactly; the rows alone are refused by Dequantize and
// Quantize, and a missing or short side field is an error naming the
// tensor.
func TestQ82F(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	shape := []int{2, 3, 128}
	x := make([]float32, 2*3*128)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if i%128 == 5 {
			x[i] *= 40 // an outlier column
		}
	}
	x[7] = 0
	data, side, err := EncodeTensor(Q8_2F, shape, x)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 6*2*66 || len(side) != 2*2*128 {
		t.Fatalf("%d bytes of rows, %d of side", len(data), len(side))
	}
	if n, _ := StoredLen(Q8_2F, shape); n != int64(len(data)+len(side)) {
		t.Fatalf("StoredLen %d", n)
	}
	w := &Tensor{Name: "w", Codec: Q8_2F, Shape: shape, Data: data, Side: side}
	y := make([]float32, len(x))
	if err := DequantizeTensor(y, w); err != nil {
		t.Fatal(err)
	}
	var num, den float64
	for i := range x {
		num += float64((x[i] - y[i]) * (x[i] - y[i]))
		den += float64(x[i] * x[i])
	}
	if rel := math.Sqrt(num / den); rel > 0.01 {
		t.Errorf("relative error %.4f", rel)
	}
	if y[7] != 0 {
		t.Errorf("zero decodes as %g", y[7])
	}
	// Element (matrix 1, row 2, column 70) by hand.
	row := data[(3+2)*132:]
	blk := row[66:]
	d := F16ToF32(binary.LittleEndian.Uint16(blk[64:]))
	c := F16ToF32(binary.LittleEndian.Uint16(side[2*(128+70):]))
	if want := float32(d*float32(int8(blk[6]))) * c; y[5*128+70] != want {
		t.Errorf("element decodes %g, want %g", y[5*128+70], want)
	}
	part := make([]float32, 2*128)
	if err := DecodeRows(part, w, 2, 2); err != nil {
		t.Fatal(err)
	}
	for i, v := range part {
		if v != y[2*128+i] {
			t.Fatalf("DecodeRows(2, 2)[%d] = %g, want %g", i, v, y[2*128+i])
		}
	}
	if err := Dequantize(make([]float32, 128), Q8_2F, data[:132]); err == nil {
		t.Error("Dequantize decoded q8_2f rows without their column field")
	}
	if err := Quantize(make([]byte, 132), Q8_2F, x[:128]); err == nil {
		t.Error("Quantize encoded q8_2f rows without a column field")
	}
	bad := *w
	bad.Side = nil
	if err := DecodeRows(part, &bad, 0, 2); err == nil || !strings.Contains(err.Error(), `"w"`) || !strings.Contains(err.Error(), "side") {
		t.Errorf("no side field: %v", err)
	}
	bad.Side = side[:10]
	if err := DequantizeTensor(y, &bad); err == nil {
		t.Error("a short side field was accepted")
	}
	if _, err := SideLen(Q8_2F, []int{128}); err == nil {
		t.Error("a 1-D q8_2f tensor was accepted")
	}
	if !Encodes(Q8_2F) || !Q8_2F.HasSide() || Q8_0.HasSide() {
		t.Error("codec table")
	}
}

// FuzzSplitStored: any shape and bytes either split into rows and side
// that decode, or fail with an error; never a panic.
func FuzzSplitStored(f *testing.F) {
	f.Add(uint8(Q8_2F), uint16(2), uint16(64), make([]byte, 2*66+2*64))
	f.Add(uint8(Q8_2F), uint16(1), uint16(128), make([]byte, 2*66+2*128))
	f.Add(uint8(Q8_2F), uint16(3), uint16(64), make([]byte, 5))
	f.Add(uint8(Q8_0), uint16(2), uint16(32), make([]byte, 68))
	f.Add(uint8(BLR), uint16(96), uint16(128), make([]byte, 6*224))
	f.Add(uint8(BLR), uint16(3), uint16(32), make([]byte, 6*35*2))
	f.Add(uint8(BLR), uint16(3), uint16(32), make([]byte, 6*35+1))
	f.Fuzz(func(t *testing.T, codec uint8, rows, cols uint16, b []byte) {
		c := Codec(codec)
		if !c.Valid() || c == I32 {
			return
		}
		shape := []int{int(rows), int(cols)}
		data, side, err := SplitStored(c, shape, b)
		if err != nil {
			return
		}
		w := &Tensor{Name: "f", Codec: c, Shape: shape, Data: data, Side: side}
		if err := w.CheckSide(); err != nil {
			t.Fatalf("split gives a bad side: %v", err)
		}
		dst := make([]float32, int(rows)*int(cols))
		if err := DequantizeTensor(dst, w); err != nil {
			t.Fatalf("split tensor does not decode: %v", err)
		}
	})
}

// TestBLR: blr factors a [96, 128] matrix at rank 32 (its one bit per
// weight), decodes as B·A of its two q1 stages, beats the zero matrix by
// a margin a rank-32 sign fit allows, and refuses what is not a whole rank,
// a vector, or rows of other widths; Dequantize and Quantize refuse it.
func TestBLR(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	shape := []int{96, 128}
	x := make([]float32, 96*128)
	// A low-rank matrix plus noise: the fit has structure to find.
	for r := range 8 {
		u, v := make([]float32, 96), make([]float32, 128)
		for i := range u {
			u[i] = float32(rng.NormFloat64())
		}
		for i := range v {
			v[i] = float32(rng.NormFloat64()) / float32(r+1)
		}
		for o := range 96 {
			for i := range 128 {
				x[o*128+i] += u[o] * v[i]
			}
		}
	}
	for i := range x {
		x[i] += 0.1 * float32(rng.NormFloat64())
	}
	data, side, err := EncodeTensor(BLR, shape, x)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 0 {
		t.Fatalf("%d bytes of rows", len(data))
	}
	k, err := BLRRank(shape, int64(len(side)))
	if err != nil || k != 32 {
		t.Fatalf("rank %d, %v", k, err)
	}
	w := &Tensor{Name: "w", Codec: BLR, Shape: shape, Data: data, Side: side}
	y := make([]float32, len(x))
	if err := DequantizeTensor(y, w); err != nil {
		t.Fatal(err)
	}
	var num, den float64
	for i := range x {
		num += float64((x[i] - y[i]) * (x[i] - y[i]))
		den += float64(x[i] * x[i])
	}
	if rel := math.Sqrt(num / den); rel > 0.5 {
		t.Errorf("relative error %.3f", rel)
	}
	a, b, err := BLRStages(w)
	if err != nil || a.Codec != Q1 || b.Codec != Q1 || a.Shape[0] != 32 || a.Shape[1] != 128 || b.Shape[0] != 96 || b.Shape[1] != 32 {
		t.Fatalf("stages %v %v, %v", a, b, err)
	}
	af, bf := make([]float32, 32*128), make([]float32, 96*32)
	Dequantize(af, Q1, a.Data)
	Dequantize(bf, Q1, b.Data)
	for _, o := range []int{0, 37, 95} {
		for _, i := range []int{0, 64, 127} {
			var s float32
			for r := range 32 {
				s += bf[o*32+r] * af[r*128+i]
			}
			if y[o*128+i] != s {
				t.Errorf("W[%d,%d] = %g, B·A = %g", o, i, y[o*128+i], s)
			}
		}
	}
	for _, bad := range []struct {
		shape []int
		n     int64
	}{{shape, int64(len(side)) - 6}, {shape, 0}, {[]int{128}, 6 * 128}, {[]int{96, 100}, 6 * 196}, {[]int{2, 96, 128}, int64(len(side))}} {
		if err := CheckStored(BLR, bad.shape, bad.n); err == nil {
			t.Errorf("blr %v in %d bytes accepted", bad.shape, bad.n)
		}
	}
	if err := Dequantize(nil, BLR, nil); err == nil {
		t.Error("Dequantize decoded blr")
	}
	if err := Quantize(nil, BLR, nil); err == nil {
		t.Error("Quantize encoded blr")
	}
}
