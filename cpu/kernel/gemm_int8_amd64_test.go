//go:build amd64 && !purego

package kernel

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// TestQuantPanelRow checks the panel quantizer against quantBlock bit for
// bit: scales, int8 values (ties to even included), offsets.
func TestQuantPanelRow(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	r := rand.New(rand.NewPCG(9, 9))
	const nb = 7
	x := make([]float32, 32*nb)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	clear(x[32:64]) // an all-zero block
	for i := range 32 {
		x[64+i] = float32(i-16) * 0.5 // exact halves: d = 8/127, ties
		x[96+i] = float32(i%5-2) * 127
	}
	x[160] = 1e30
	panel := make([]byte, nb*i8PanelB)
	quantPanelRow(&x[0], nb, &panel[4*3])
	for b := range nb {
		var q [32]int8
		d, sum := quantBlock(&q, (*[32]float32)(x[32*b:]))
		blk := panel[b*i8PanelB:]
		for i := range 32 {
			if got := int8(blk[32*(i/4)+12+i%4]); got != q[i] {
				t.Fatalf("block %d element %d: %d, want %d", b, i, got, q[i])
			}
		}
		if got := math.Float32frombits(binary.LittleEndian.Uint32(blk[256+12:])); got != d {
			t.Errorf("block %d: scale %g, want %g", b, got, d)
		}
		if got := int32(binary.LittleEndian.Uint32(blk[288+12:])); got != -8*sum {
			t.Errorf("block %d: offset %d, want %d", b, got, -8*sum)
		}
		if got := int32(binary.LittleEndian.Uint32(blk[320+12:])); got != -128*sum {
			t.Errorf("block %d: offset %d, want %d", b, got, -128*sum)
		}
	}
}

// TestQuantRow checks the row quantizer against quantBlock bit for bit.
func TestQuantRow(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	r := rand.New(rand.NewPCG(10, 10))
	const nb = 9
	x := make([]float32, 32*nb)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	clear(x[32:64])
	for i := range 32 {
		x[64+i] = float32(i-16) * 0.5
	}
	x[100] = -3e38
	q := make([]int8, 32*nb)
	d := make([]float32, nb)
	sum := make([]int32, nb)
	quantRow(&x[0], nb, &q[0], &d[0], &sum[0])
	for b := range nb {
		var wq [32]int8
		wd, ws := quantBlock(&wq, (*[32]float32)(x[32*b:]))
		if [32]int8(q[32*b:]) != wq || d[b] != wd || sum[b] != ws {
			t.Fatalf("block %d: %v %g %d, want %v %g %d", b, q[32*b:32*b+32], d[b], sum[b], wq, wd, ws)
		}
	}
}
