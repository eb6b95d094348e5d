// Package quant holds calibrated quantization: the input Gram matrices of a
// model's linear layers over calibration text (Calibrate), GPTQ on them
// (GPTQ), and the error measure the codecs are compared by (KL).
//
// GPTQ (Frantar et al., 2022) quantizes a weight matrix W [rows, cols]
// column by column, each time spreading the column's rounding error over the
// columns not yet quantized in proportion to the inverse Hessian of the
// layer's squared output error, H = 2·XᵀX over the calibration inputs X:
//
//	H += λ·I, λ = Damp·mean(diag H)       (dead columns: H_ii = 1, W_:i = 0)
//	U = chol(H⁻¹)ᵀ  (upper, H⁻¹ = UᵀU)
//	for each column k in order: q = Q(w_k); e = (w_k − q)/U_kk; w_j −= e·U_kj (j > k)
//
// Q is the target codec's rounding under its block scales: a block's
// scales are fixed (by the codec's round-to-nearest encoder on the current,
// error-fed weights) when the sweep reaches the block's first column, then
// every column is re-coded alone (tensor.SetElem). With ActOrder the
// columns go in order of decreasing H_ii and the scales are fixed up front
// from the original weights (static groups), so the stored blocks keep
// their natural column order. Rows are independent given U and run in
// parallel; each row's arithmetic is fixed, so the bytes are reproducible.
package quant

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"

	"github.com/cortiq/cortiq/tensor"
)

// Options tunes GPTQ.
type Options struct {
	// Damp is the relative damping added to H's diagonal (0 means 0.01).
	Damp float64
	// ActOrder quantizes columns in order of decreasing H_ii.
	ActOrder bool
}

// Gram is a linear layer's accumulated input statistics: H = Σ x·xᵀ over N
// input rows of Cols values (row-major, Cols×Cols).
type Gram struct {
	Cols int
	N    int
	H    []float64
}

// NewGram is an empty Gram matrix for inputs of cols values.
func NewGram(cols int) *Gram { return &Gram{Cols: cols, H: make([]float64, cols*cols)} }

// Add accumulates n input rows from x (n·Cols values).
func (g *Gram) Add(x []float32, n int) {
	c := g.Cols
	for t := range n {
		row := x[t*c : (t+1)*c]
		for i, xi := range row {
			if xi == 0 {
				continue
			}
			h := g.H[i*c : (i+1)*c]
			a := float64(xi)
			for j := i; j < c; j++ {
				h[j] += a * float64(row[j])
			}
		}
	}
	g.N += n
}

// full returns H as a symmetric matrix (Add fills the upper triangle).
func (g *Gram) full() []float64 {
	c := g.Cols
	h := make([]float64, c*c)
	for i := range c {
		for j := i; j < c; j++ {
			v := g.H[i*c+j]
			h[i*c+j], h[j*c+i] = v, v
		}
	}
	return h
}

// GPTQ quantizes w (rows×cols float32, row-major) to codec c with the
// calibration statistics g and returns the encoded bytes (rows whole
// blocks of c). c must be one tensor.SetElem supports.
func GPTQ(w []float32, rows, cols int, g *Gram, c tensor.Codec, opts Options) ([]byte, error) {
	if !tensor.CanSetElem(c) {
		return nil, fmt.Errorf("quant: gptq: codec %s has no per-element rounding", c)
	}
	if g.Cols != cols || len(w) != rows*cols {
		return nil, fmt.Errorf("quant: gptq: %d×%d weights, Gram matrix of %d columns", rows, cols, g.Cols)
	}
	rb, err := c.RowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("quant: gptq: %w", err)
	}
	damp := opts.Damp
	if damp == 0 {
		damp = 0.01
	}
	h := g.full()
	dead := make([]bool, cols)
	for i := range cols {
		if h[i*cols+i] == 0 {
			h[i*cols+i], dead[i] = 1, true
		}
	}
	perm := make([]int, cols)
	for i := range perm {
		perm[i] = i
	}
	if opts.ActOrder {
		sort.SliceStable(perm, func(a, b int) bool { return h[perm[a]*cols+perm[a]] > h[perm[b]*cols+perm[b]] })
	}
	hp := make([]float64, cols*cols)
	var mean float64
	for i := range cols {
		mean += h[i*cols+i]
		for j := range cols {
			hp[i*cols+j] = h[perm[i]*cols+perm[j]]
		}
	}
	mean /= float64(cols)
	var u []float64
	for try, lam := 0, damp*mean; ; try, lam = try+1, lam*10 {
		a := append([]float64(nil), hp...)
		for i := range cols {
			a[i*cols+i] += lam
		}
		if u, err = invChol(a, cols); err == nil {
			break
		}
		if try == 5 {
			return nil, fmt.Errorf("quant: gptq: the damped Hessian is not positive definite")
		}
	}
	out := make([]byte, rows*rb)
	bl, bb := c.BlockLen(), c.BlockBytes()
	workers := max(1, min(runtime.GOMAXPROCS(0), rows))
	var wg sync.WaitGroup
	next := make(chan int, rows)
	for r := range rows {
		next <- r
	}
	close(next)
	errs := make([]error, workers)
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float64, cols)
			blk := make([]float32, bl)
			for r := range next {
				if err := gptqRow(out[r*rb:(r+1)*rb], w[r*cols:(r+1)*cols], row, blk, dead, perm, u, c, bl, bb, opts.ActOrder); err != nil {
					errs[k] = err
				}
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// gptqRow runs the sweep over one row (see the package comment).
func gptqRow(dst []byte, w []float32, row []float64, blk []float32, dead []bool, perm []int, u []float64, c tensor.Codec, bl, bb int, static bool) error {
	cols := len(w)
	for k, p := range perm {
		row[k] = float64(w[p])
		if dead[p] {
			row[k] = 0
		}
	}
	fix := func(b int, val func(i int) float32) error {
		for i := range bl {
			blk[i] = val(b*bl + i)
		}
		return tensor.Quantize(dst[b*bb:(b+1)*bb], c, blk)
	}
	if static {
		for b := range cols / bl {
			if err := fix(b, func(i int) float32 {
				if dead[i] {
					return 0
				}
				return w[i]
			}); err != nil {
				return err
			}
		}
	}
	for k, p := range perm {
		if !static && p%bl == 0 {
			// perm is the identity: columns p.. are positions p..
			if err := fix(p/bl, func(i int) float32 { return float32(row[i]) }); err != nil {
				return err
			}
		}
		q, _ := tensor.SetElem(c, dst[p/bl*bb:(p/bl+1)*bb], p%bl, float32(row[k]))
		e := (row[k] - float64(q)) / u[k*cols+k]
		uk := u[k*cols:]
		for j := k + 1; j < cols; j++ {
			row[j] -= e * uk[j]
		}
	}
	return nil
}

// invChol returns the upper Cholesky factor U of a⁻¹ (a⁻¹ = UᵀU), a
// symmetric positive definite n×n matrix (overwritten).
func invChol(a []float64, n int) ([]float64, error) {
	if err := cholesky(a, n); err != nil {
		return nil, err
	}
	// a holds L (lower). a⁻¹ = L⁻ᵀ L⁻¹: invert L, then form the product.
	li := make([]float64, n*n)
	for i := range n {
		li[i*n+i] = 1 / a[i*n+i]
		for j := 0; j < i; j++ {
			var s float64
			for k := j; k < i; k++ {
				s += a[i*n+k] * li[k*n+j]
			}
			li[i*n+j] = -s / a[i*n+i]
		}
	}
	inv := make([]float64, n*n)
	for i := range n {
		for j := i; j < n; j++ {
			var s float64
			for k := j; k < n; k++ {
				s += li[k*n+i] * li[k*n+j]
			}
			inv[i*n+j], inv[j*n+i] = s, s
		}
	}
	if err := cholesky(inv, n); err != nil {
		return nil, err
	}
	u := make([]float64, n*n)
	for i := range n {
		for j := i; j < n; j++ {
			u[i*n+j] = inv[j*n+i]
		}
	}
	return u, nil
}

// cholesky factors a in place into its lower triangle L (a = L·Lᵀ).
func cholesky(a []float64, n int) error {
	for j := range n {
		s := a[j*n+j]
		for k := range j {
			s -= a[j*n+k] * a[j*n+k]
		}
		if !(s > 0) {
			return errors.New("quant: matrix is not positive definite")
		}
		d := math.Sqrt(s)
		a[j*n+j] = d
		for i := j + 1; i < n; i++ {
			t := a[i*n+j]
			for k := range j {
				t -= a[i*n+k] * a[j*n+k]
			}
			a[i*n+j] = t / d
		}
		for i := range j {
			a[i*n+j] = 0
		}
	}
	return nil
}
