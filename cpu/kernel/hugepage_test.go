package kernel

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"weak"

	"github.com/cortiq/cortiq/tensor"
)

// TestPackedHugePages checks that packed weights large enough to be
// mapped for huge pages (allocWeights) give the same products, bit for
// bit, as packed weights on the heap, at every level (decode and
// prefill), and that the mapping is huge-page aligned.
func TestPackedHugePages(t *testing.T) {
	defer SetMode(SetMode(Int8))
	r := rand.New(rand.NewPCG(5, 5))
	forEachImpl(t, func(t *testing.T) {
		for _, c := range []tensor.Codec{tensor.Q4_0, tensor.Q8_0, tensor.Q4_K, tensor.Q6_K} {
			const rows, cols, n = 4104, 2048, 3 // > 4 MiB packed; a partial last group
			w := benchWeight(c, rows, cols)
			x := randX(r, n*cols)
			run := func(huge bool) (dec, pre []float32, p *packedW) {
				defer func(h bool) { hugeWeights = h }(hugeWeights)
				hugeWeights = huge
				Unpack(w)
				dec, pre = make([]float32, rows), make([]float32, n*rows)
				MatVec(dec, w, x[:cols])
				MatMul(pre, w, x, n)
				if v, ok := packCache.Load(weak.Make(w)); ok {
					p = v.(*packedW)
				}
				return dec, pre, p
			}
			d0, p0, _ := run(false)
			d1, p1, pw := run(true)
			Unpack(w)
			name := fmt.Sprintf("%s %dx%d", c, rows, cols)
			for i := range d0 {
				if d0[i] != d1[i] {
					t.Fatalf("%s: decode row %d: %g on huge pages, %g on the heap", name, i, d1[i], d0[i])
				}
			}
			for i := range p0 {
				if p0[i] != p1[i] {
					t.Fatalf("%s: prefill element %d: %g on huge pages, %g on the heap", name, i, p1[i], p0[i])
				}
			}
			if pw != nil && runtime.GOOS == "linux" {
				if a := uintptrOf(pw.data) & (2<<20 - 1); a != 0 {
					t.Errorf("%s: packed weights at offset %#x in their huge page", name, a)
				}
			}
		}
	})
}
