//go:build amd64 && !purego

package kernel

import "github.com/cortiq/cortiq/tensor"

//go:noescape
func gemm6x16AVX2(w *float32, ldw int, xp *float32, k int, out *[96]float32)

const (
	gemmRows   = 6  // weight rows per register tile
	gemmTokens = 16 // tokens per packed panel

	gemmMinTokens = 10 // below this, MatMul uses the dot-product tile

	gemmChunkBytes = 2 << 20 // packed activations consumed per pass over the weights
)

// matmulAVX2 is the blocked product: x is packed into k-major panels of
// 16 tokens, weight rows are decoded six at a time and each decoded tile
// is run against every panel with a 6×16 register tile (broadcast
// formulation: no horizontal sums).
func matmulAVX2(y []float32, c tensor.Codec, data []byte, rb, rows, cols int, x []float32, n int) {
	if n < gemmMinTokens {
		// A padded 16-token panel would waste most of its work; the
		// 4-row × 2-token dot tile has no padding.
		matmulGeneric(y, c, data, rb, rows, cols, x, n)
		return
	}
	np := (n + gemmTokens - 1) / gemmTokens
	xpp := getScratch(np * cols * gemmTokens)
	defer scratchPool.Put(xpp)
	xp := *xpp
	parallelFor(np, max(1, (256<<10)/(cols*gemmTokens)), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			panel := xp[p*cols*gemmTokens : (p+1)*cols*gemmTokens]
			t0 := p * gemmTokens
			nt := min(gemmTokens, n-t0)
			if nt < gemmTokens {
				clear(panel)
			}
			for t := range nt {
				xt := x[(t0+t)*cols : (t0+t+1)*cols]
				for k, v := range xt {
					panel[k*gemmTokens+t] = v
				}
			}
		}
	})
	var direct []float32
	if c == tensor.F32 {
		direct, _ = f32View(data)
	}
	groups := (rows + gemmRows - 1) / gemmRows
	// Panels are consumed a chunk at a time so that the chunk stays in
	// cache while every row group streams over it; decoding a weight row
	// once per chunk is cheap next to 2·chunk flops per weight.
	chunk := max(1, (gemmChunkBytes/4)/(cols*gemmTokens))
	for p0 := 0; p0 < np; p0 += chunk {
		p1 := min(np, p0+chunk)
		grain := max(1, (64<<10)/max(1, gemmRows*cols*(p1-p0)*gemmTokens))
		parallelFor(groups, grain, func(lo, hi int) {
			sp := getScratch(gemmRows * cols)
			defer scratchPool.Put(sp)
			ws := *sp
			var out [gemmRows * gemmTokens]float32
			for g := lo; g < hi; g++ {
				r0 := g * gemmRows
				nr := min(gemmRows, rows-r0)
				var w []float32
				switch {
				case direct != nil && nr == gemmRows:
					w = direct[r0*cols : (r0+nr)*cols]
				case direct != nil:
					copy(ws, direct[r0*cols:(r0+nr)*cols])
					clear(ws[nr*cols:])
					w = ws
				default:
					for i := range nr {
						decodeRow(ws[i*cols:(i+1)*cols], c, data[(r0+i)*rb:(r0+i+1)*rb])
					}
					clear(ws[nr*cols:])
					w = ws
				}
				for p := p0; p < p1; p++ {
					gemm6x16AVX2(&w[0], cols, &xp[p*cols*gemmTokens], cols, &out)
					t0 := p * gemmTokens
					nt := min(gemmTokens, n-t0)
					for r := range nr {
						o := out[r*gemmTokens:]
						for t := range nt {
							y[(t0+t)*rows+r0+r] = o[t]
						}
					}
				}
			}
		})
	}
}
