package tensor

import "fmt"

// blr, the seed's binary low-rank weight: W ≈ U·diag(s)·V for a [out, in]
// matrix, U ∈ {±1}^(out×k), V ∈ {±1}^(k×in), s ∈ R^k, run as two products
// (V·x, then U·(s⊙·)) instead of one. The rank k is the weight's own (a
// multiple of 32), so the tensor has no rows of its own (ByteLen 0) and
// keeps both factors in its side field, each a q1 matrix (32 sign bits and
// an f16 scale per 32, seed.go):
//
//	A = diag(s)·V  [k, in]   q1, every block of row r scaled by s_r
//	B = U          [out, k]  q1, scale 1
//
// stored A's rows then B's, 6·(in+out) bytes per 32 of rank (1.5 bits per
// factor element). W = B·A: any bytes mean a weight, and each stage is a
// product the kernels already compute exactly in q1 (BLRStages).

// BLRRank is the rank of a blr tensor of shape [out, in] whose side field
// is n bytes, or an error saying why n bytes cannot be one.
func BLRRank(shape []int, n int64) (int, error) {
	if len(shape) != 2 {
		return 0, fmt.Errorf("a blr tensor is a matrix [out, in], not %v", shape)
	}
	out, in := int64(shape[0]), int64(shape[1])
	if out <= 0 || in <= 0 || in%32 != 0 || out > 1<<40 || in > 1<<40 {
		return 0, fmt.Errorf("blr %v: want rows of a positive multiple of 32 values", shape)
	}
	unit := 6 * (in + out) // bytes per 32 of rank
	if n <= 0 || n%unit != 0 || n/unit > (1<<31)/32 {
		return 0, fmt.Errorf("blr %v: %d bytes of factors are not a whole rank (%d bytes per 32)", shape, n, unit)
	}
	return int(n/unit) * 32, nil
}

// BLRStages returns the two products of a blr tensor t as q1 tensors
// aliasing t.Side: first a = diag(s)·V [k, in], then b = U [out, k]; t·x
// is b·(a·x).
func BLRStages(t *Tensor) (a, b *Tensor, err error) {
	if t.Codec != BLR {
		return nil, nil, fmt.Errorf("tensor %q is %s, not blr", t.Name, t.Codec)
	}
	if err := t.CheckSide(); err != nil {
		return nil, nil, err
	}
	k, _ := BLRRank(t.Shape, int64(len(t.Side)))
	out, in := t.Shape[0], t.Shape[1]
	n := k / 32 * 6 * in
	a = &Tensor{Name: t.Name + "[V]", Codec: Q1, Shape: []int{k, in}, Data: t.Side[:n:n]}
	b = &Tensor{Name: t.Name + "[U]", Codec: Q1, Shape: []int{out, k}, Data: t.Side[n:]}
	return a, b, nil
}

// decodeBLRRows is DecodeRows for blr: W[o, i] = Σ_r B[o, r]·A[r, i],
// summed in float32 over r in order.
func decodeBLRRows(dst []float32, t *Tensor, row0, n int) error {
	a, b, err := BLRStages(t)
	if err != nil {
		return err
	}
	k, in := a.Shape[0], a.Shape[1]
	af := make([]float32, k*in)
	if err := Dequantize(af, Q1, a.Data); err != nil {
		return err
	}
	rb, _ := Q1.RowBytes(k)
	bf := make([]float32, k)
	for r := range n {
		if err := Dequantize(bf, Q1, b.Data[(row0+r)*rb:(row0+r+1)*rb]); err != nil {
			return err
		}
		row := dst[r*in : (r+1)*in]
		clear(row)
		for j, u := range bf {
			for i, v := range af[j*in : (j+1)*in] {
				row[i] += u * v
			}
		}
	}
	return nil
}

// blrRank is the rank the encoder gives a [out, in] matrix: about one bit
// of factors per weight (k·(in+out) ≈ in·out), a multiple of 32, at least
// 32.
func blrRank(out, in int) int {
	return max(32, in*out/(in+out)/32*32)
}

// BLRFits reports whether the encoder factors a tensor of shape: a
// matrix with rows of a multiple of 32 whose rank (about one bit of
// factors per weight) is below both its dimensions, so the factors are
// smaller than the matrix.
func BLRFits(shape []int) bool {
	if len(shape) != 2 || shape[1]%32 != 0 || shape[0] <= 0 || shape[1] <= 0 {
		return false
	}
	k := blrRank(shape[0], shape[1])
	return k < shape[0] && k < shape[1]
}

// blrIters is the alternating-sign passes per rank-one term.
const blrIters = 8

// encodeBLR factors W (out×in, row-major) greedily, one rank-one sign
// term at a time on the residual R: v = sign(Rᵀu), u = sign(R·v), from u =
// the signs of R's largest column, blrIters times; s = uᵀRv/(out·in) (the
// least-squares scale, ≥ 0), rounded to f16; R −= s·u·vᵀ.
func encodeBLR(shape []int, w []float32) ([]byte, error) {
	if len(shape) != 2 || len(w) != shape[0]*shape[1] {
		return nil, fmt.Errorf("tensor: encode blr %v: %d values", shape, len(w))
	}
	out, in := shape[0], shape[1]
	k := blrRank(out, in)
	n := 6 * (in + out) * (k / 32)
	if _, err := BLRRank(shape, int64(n)); err != nil {
		return nil, fmt.Errorf("tensor: encode %w", err)
	}
	side := make([]byte, n)
	av := side[:k/32*6*in]
	bu := side[k/32*6*in:]
	res := make([]float64, len(w))
	for i, v := range w {
		res[i] = float64(v)
	}
	u := make([]float64, out)
	v := make([]float64, in)
	t := make([]float64, max(out, in))
	for r := range k {
		// Start from the signs of the residual's largest column.
		best, bestN := 0, -1.0
		for i := range in {
			var s float64
			for o := range out {
				s += res[o*in+i] * res[o*in+i]
			}
			if s > bestN {
				best, bestN = i, s
			}
		}
		for o := range out {
			u[o] = sgn(res[o*in+best])
		}
		for range blrIters {
			clear(t[:in])
			for o := range out {
				for i, x := range res[o*in : (o+1)*in] {
					t[i] += u[o] * x
				}
			}
			for i := range in {
				v[i] = sgn(t[i])
			}
			for o := range out {
				var s float64
				for i, x := range res[o*in : (o+1)*in] {
					s += x * v[i]
				}
				u[o] = sgn(s)
			}
		}
		var dot float64
		for o := range out {
			for i, x := range res[o*in : (o+1)*in] {
				dot += u[o] * x * v[i]
			}
		}
		s := float64(F16ToF32(F32ToF16(float32(max(0, dot/float64(out*in))))))
		// A's row r: q1 blocks of V's signs, scale s.
		row := av[r*in/32*6 : (r+1)*in/32*6]
		for b := range in / 32 {
			blk := row[6*b : 6*b+6]
			putF16(blk, 4, float32(s))
			for j := range 32 {
				if v[32*b+j] > 0 {
					blk[j/8] |= 1 << (j % 8)
				}
			}
		}
		// B's column r: U's signs (q1, scale 1 in every block).
		for o := range out {
			blk := bu[(o*k+r)/32*6:]
			if r%32 == 0 {
				putF16(blk, 4, 1)
			}
			if u[o] > 0 {
				blk[r%32/8] |= 1 << (r % 8)
			}
		}
		for o := range out {
			for i := range in {
				res[o*in+i] -= s * u[o] * v[i]
			}
		}
	}
	return side, nil
}

func sgn(x float64) float64 {
	if x < 0 {
		return -1
	}
	return 1
}
