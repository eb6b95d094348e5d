//go:build amd64 && !purego

package kernel

import "github.com/cortiq/cortiq/tensor"

//go:noescape
func gemm6x16AVX2(w *float32, ldw int, xp *float32, k int, out *[96]float32)

const (
	gemmRows   = 6  // weight rows per register tile
	gemmTokens = 16 // tokens per packed panel

	gemmMinTokens = 10 // below this, MatMul uses the dot-product tile

	// A super-group of rows is decoded to float32 at once (about this
	// many bytes, so that it stays in the L2 cache) and run against every
	// panel; the panel is consumed gemmKC columns at a time (16 KiB, L1),
	// so each panel chunk serves all the row tiles of the super-group
	// while it is hot.
	gemmSuperBytes = 384 << 10
	gemmKC         = 256
)

// matmulAVX2 is the blocked product: x is packed into k-major panels of
// 16 tokens; weight rows are decoded a super-group at a time, and each
// 6-row tile is run against each panel with a 6×16 register tile
// (broadcast formulation: no horizontal sums). Every output is one
// float32 accumulation in column order, however the loops are blocked.
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
	// Super-group height: what fits gemmSuperBytes, but small enough
	// that every worker gets a few.
	sg := gemmRows * max(1, gemmSuperBytes/(gemmRows*cols*4))
	sg = min(sg, gemmRows*max(1, (rows+4*Workers()*gemmRows-1)/(4*Workers()*gemmRows)))
	nsg := (rows + sg - 1) / sg
	parallelFor(nsg, 1, func(lo, hi int) {
		sp := getScratch(sg * cols)
		defer scratchPool.Put(sp)
		tp := getScratch(sg / gemmRows * gemmRows * gemmTokens)
		defer scratchPool.Put(tp)
		ws, tiles := *sp, *tp
		for s := lo; s < hi; s++ {
			r0 := s * sg
			nr := min(sg, rows-r0)
			ng := (nr + gemmRows - 1) / gemmRows
			var w []float32
			switch {
			case direct != nil && nr == ng*gemmRows:
				w = direct[r0*cols : (r0+nr)*cols]
			case direct != nil:
				copy(ws, direct[r0*cols:(r0+nr)*cols])
				w = ws[:ng*gemmRows*cols]
			default:
				for i := range nr {
					decodeRow(ws[i*cols:(i+1)*cols], c, data[(r0+i)*rb:(r0+i+1)*rb])
				}
				w = ws[:ng*gemmRows*cols]
			}
			clear(w[nr*cols:]) // padding rows of the last tile
			for p := range np {
				clear(tiles[:ng*gemmRows*gemmTokens])
				panel := xp[p*cols*gemmTokens:]
				for k0 := 0; k0 < cols; k0 += gemmKC {
					kc := min(gemmKC, cols-k0)
					for g := range ng {
						gemm6x16AVX2(&w[g*gemmRows*cols+k0], cols, &panel[k0*gemmTokens], kc, (*[gemmRows * gemmTokens]float32)(tiles[g*gemmRows*gemmTokens:]))
					}
				}
				t0 := p * gemmTokens
				nt := min(gemmTokens, n-t0)
				for t := range nt {
					yt := y[(t0+t)*rows+r0 : (t0+t)*rows+r0+nr]
					for r := range yt {
						yt[r] = tiles[r*gemmTokens+t]
					}
				}
			}
		}
	})
}
