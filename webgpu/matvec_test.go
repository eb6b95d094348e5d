package webgpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// TestKernelMatvecStaged checks the staged decode matvec against a float64
// reference for every codec, every mode (2: interleaved gate/up rows with
// SiLU and GELU), with and without the fused RMSNorm (Gemma's 1+w too),
// row counts that leave the last workgroup partly empty, and several
// tokens (grid z); without the norm it must also equal the row-blocked
// kernel bit for bit (the same sums in the same order).
func TestKernelMatvecStaged(t *testing.T) {
	k := newKT(t)
	r := rand.New(rand.NewPCG(21, 22))
	const rows, cols = 38, 1024
	shapes := []shaders.MatvecShape{{Rows: 4, Sets: 1, Groups: 2}, {Rows: 2, Sets: 2, Groups: 3}}
	for _, c := range append(append([]tensor.Codec(nil), testCodecs...), planeCodecs...) {
		dc, _ := deviceCodec(c)
		tol := 1e-4
		if c == tensor.Q4_1 || c == tensor.Q5_1 {
			// x = d·q + m with m near −8d: the kernel's d·Σq·x and m·Σx
			// cancel, an f32 error of 1.3e-4 on a gated output of the
			// fused norm with its plus one (bit for bit the same before
			// these codecs were held as planes).
			tol = 3e-4
		}
		data, soff, w := encodeWeight(t, c, rows, cols, randVec(r, rows*cols, 1))
		wb := k.storage(data)
		bias := randVec(r, rows, 1)
		nw := randVec(r, cols, 1)
		const eps = 1e-5
		for _, n := range []int{1, 3} {
			for _, mode := range []int{0, 1, 2} {
				for _, norm := range []int{0, 1, 3} { // bit 0: fused norm, bit 1: plus one
					for _, act := range []int{0, 1} {
						if act == 1 && mode != 2 {
							continue
						}
						t.Run(fmt.Sprintf("%s/n%d/mode%d/norm%d/act%d", c, n, mode, norm, act), func(t *testing.T) {
							x := randVec(r, n*cols, 1)
							xin := make([]float64, n*cols)
							for ti := 0; ti < n; ti++ {
								var ss float64
								for i := 0; i < cols; i++ {
									v := float64(x[ti*cols+i])
									ss += v * v
								}
								rr := 1 / math.Sqrt(ss/cols+eps)
								for i := 0; i < cols; i++ {
									v := float64(x[ti*cols+i])
									if norm&1 != 0 {
										v *= (float64(nw[i]) + float64(norm>>1)) * rr
									}
									xin[ti*cols+i] = v
								}
							}
							outRows, hasBias := rows, 1
							if mode == 2 {
								outRows, hasBias = rows/2, 0
							}
							stride, off := outRows+5, 3
							init := randVec(r, n*stride, 1)
							alpha, capv := float32(0.75), float32(0)
							if mode == 0 {
								capv = 2
							}
							want := append([]float32(nil), init...)
							y := make([]float64, rows)
							for ti := 0; ti < n; ti++ {
								for o := 0; o < rows; o++ {
									var s float64
									for i := 0; i < cols; i++ {
										s += float64(w[o*cols+i]) * xin[ti*cols+i]
									}
									y[o] = s
								}
								for o := 0; o < outRows; o++ {
									idx := ti*stride + off + o
									switch mode {
									case 2:
										g, u := y[2*o], y[2*o+1]
										var a float64
										if act == 1 {
											a = 0.5 * g * (1 + math.Tanh(0.7978845608028654*(g+0.044715*g*g*g)))
										} else {
											a = g / (1 + math.Exp(-g))
										}
										want[idx] = float32(a * u)
									case 1:
										want[idx] += alpha * (float32(y[o]) + bias[o])
									default:
										v := alpha * (float32(y[o]) + bias[o])
										want[idx] = capv * float32(math.Tanh(float64(v/capv)))
									}
								}
							}
							for _, sh := range shapes {
								src, err := shaders.Matvec(dc, sh, cols, norm&1 != 0)
								if err != nil {
									t.Fatal(err)
								}
								out := k.f32(init)
								gx, gy := matmulGrid(rows, sh.RowsPerWorkgroup())
								u := k.uniform(shaders.MatmulParams{Rows: u32(rows), Cols: u32(cols), SOff: soff, Mode: u32(mode), Alpha: alpha, Softcap: capv,
									HasBias: shaders.Flag(hasBias), OutStride: u32(stride), OutOff: u32(off), Act: u32(act | norm&2), Eps: float32(eps)})
								bufs := []*gpu.Buffer{u, k.step(0, n, 0, 1), wb, k.f32(x), out, k.f32(bias)}
								kinds := kindsMatmul
								if norm&1 != 0 {
									bufs, kinds = append(bufs, k.f32(nw)), kindsMatmulNorm
								}
								key := fmt.Sprintf("matvec/%s/%v/%d", dc, sh, norm&1)
								k.run(key, src, kinds, [3]uint32{gx, gy, uint32(n)}, bufs...)
								got := k.read(out, n*stride)
								closeTo(t, fmt.Sprintf("y(%+v)", sh), got, want, tol)
								if norm != 0 || mode == 2 {
									continue
								}
								ref, _ := shaders.MatmulRows(dc, 1, sh.Rows)
								out2 := k.f32(init)
								gx, gy = matmulGrid(rows, sh.Rows)
								k.run(fmt.Sprintf("matmul/%s/tb1/r%d", dc, sh.Rows), ref, kindsMatmul, [3]uint32{gx, gy, uint32(n)},
									u, k.step(0, n, 0, 1), wb, k.f32(x), out2, k.f32(bias))
								if ref := k.read(out2, n*stride); fmt.Sprint(ref) != fmt.Sprint(got) {
									t.Errorf("%+v: not bit-identical to the row-blocked kernel", sh)
								}
							}
						})
					}
				}
			}
		}
	}
}
