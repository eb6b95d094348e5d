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
		if got := math.Float32frombits(binary.LittleEndian.Uint32(blk[352+12:])); got != d*float32(sum) {
			t.Errorf("block %d: d·Σq %g, want %g", b, got, d*float32(sum))
		}
		var lo int32
		for _, v := range q[:16] {
			lo += int32(v)
		}
		if got := int32(binary.LittleEndian.Uint32(blk[384+12:])); got != -32*lo {
			t.Errorf("block %d: q6_K offset %d, want %d", b, got, -32*lo)
		}
		if got := int32(binary.LittleEndian.Uint32(blk[416+12:])); got != -32*(sum-lo) {
			t.Errorf("block %d: q6_K offset %d, want %d", b, got, -32*(sum-lo))
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
	hs := make([]int32, 2*nb)
	quantRow(&x[0], nb, &q[0], &d[0], &hs[0])
	for b := range nb {
		var wq [32]int8
		wd, ws := quantBlock(&wq, (*[32]float32)(x[32*b:]))
		var lo int32
		for _, v := range wq[:16] {
			lo += int32(v)
		}
		if [32]int8(q[32*b:]) != wq || d[b] != wd || hs[2*b] != lo || hs[2*b+1] != ws-lo {
			t.Fatalf("block %d: %v %g %d %d, want %v %g %d %d", b, q[32*b:32*b+32], d[b], hs[2*b], hs[2*b+1], wq, wd, lo, ws-lo)
		}
	}
}
