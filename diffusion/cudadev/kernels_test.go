package cudadev

import (
	"math"
	"testing"

	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/cuda/kernels"
	"github.com/cortiq/cortiq/tensor"
)

// halfRand is n random f16 values in [-a, a] and their float32 values.
func halfRand(n int, a float32, seed uint64) ([]uint16, []float32) {
	h, f := make([]uint16, n), make([]float32, n)
	rng := seed*0x9e3779b97f4a7c15 | 1
	for i := range h {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		h[i] = tensor.F32ToF16(a * (float32(rng>>40)/float32(1<<24)*2 - 1))
		f[i] = tensor.F16ToF32(h[i])
	}
	return h, f
}

// readHalf reads n f16 values at x as float32.
func readHalf(t *testing.T, dev driver.Device, x driver.Ptr, n int) []float32 {
	t.Helper()
	h := make([]uint16, n)
	if err := dev.Read(driver.Bytes(h), x); err != nil {
		t.Fatal(err)
	}
	f := make([]float32, n)
	for i, v := range h {
		f[i] = tensor.F16ToF32(v)
	}
	return f
}

// TestKernelsGPU checks the GEMM (every epilogue, a K of many pipeline
// stages, ragged M and N) and the attention (head dim 128, rows not a
// multiple of the tiles) against float64 loops over the same f16 inputs.
func TestKernelsGPU(t *testing.T) {
	dev := cudaDevice(t)
	opts := testOptions(t)
	img := opts.Module
	if img == nil {
		img = kernels.Image
	}
	mod, err := dev.Load(img)
	if err != nil {
		t.Fatal(err)
	}
	r := &DiTRunner{dev: dev, mod: mod, fns: map[string]driver.Func{}}
	d := &ditRun{r: r}
	defer d.release()
	up := func(b []byte) driver.Ptr {
		p := d.buf(int64(len(b)))
		if d.err == nil {
			d.err = dev.Upload(p, b)
		}
		return p
	}
	const M, N, K = 333, 520, 704 // 11 K tiles; M, N ragged
	ah, af := halfRand(M*K, 1, 1)
	wh, wf := halfRand(N*K, 0.1, 2)
	bias := make([]float32, N)
	for i := range bias {
		bias[i] = float32(i%7) * 0.25
	}
	A, W, B := up(driver.Bytes(ah)), up(driver.Bytes(wh)), up(driver.Bytes(bias))
	Y := d.buf(4 * M * N)
	ref := make([]float64, M*N)
	for m := range M {
		for n := range N {
			var s float64
			for k := range K {
				s += float64(af[m*K+k]) * float64(wf[n*K+k])
			}
			ref[m*N+n] = s
		}
	}
	check := func(name string, got []float32, want func(i int) float64, n int, tol float64) {
		worst := 0.0
		for i := range n {
			e := math.Abs(float64(got[i])-want(i)) / (1 + math.Abs(want(i)))
			if !(e <= worst) {
				worst = e
			}
		}
		t.Logf("%s: max relative error %.3g", name, worst)
		if !(worst <= tol) {
			t.Errorf("%s: max relative error %.3g > %.3g", name, worst, tol)
		}
	}
	for _, mt := range [][2]string{{kernels.DiTGemmFloat, "_a"}, {kernels.DiTGemmBias, "_a"}, {kernels.DiTGemmHalf, "_a"}, {kernels.DiTGemmGLU, "_a"},
		{kernels.DiTGemmFloat, "_b"}, {kernels.DiTGemmBias, "_b"}, {kernels.DiTGemmHalf, "_b"}, {kernels.DiTGemmGLU, "_b"}} {
		mode := mt[0]
		ldy := N
		if mode == kernels.DiTGemmGLU {
			ldy = N / 2
		}
		if err := dev.Zero(Y, 4*M*N); err != nil {
			t.Fatal(err)
		}
		d.launch(kernels.DiTGemmPrefix+mode+mt[1], kernels.DiTGemmLaunchAs(M, N, mt[1]), p(Y), p(A), p(W), p(B),
			driver.I32(M), driver.I32(N), driver.I32(K), driver.I32(ldy))
		if d.err != nil {
			t.Fatal(d.err)
		}
		mode += mt[1]
		switch mt[0] {
		case kernels.DiTGemmFloat, kernels.DiTGemmBias:
			got := make([]float32, M*N)
			if err := dev.Read(driver.Bytes(got), Y); err != nil {
				t.Fatal(err)
			}
			b := mt[0] == kernels.DiTGemmBias
			check("gemm_"+mode, got, func(i int) float64 {
				if b {
					return ref[i] + float64(bias[i%N])
				}
				return ref[i]
			}, M*N, 1e-5)
		case kernels.DiTGemmHalf:
			got := readHalf(t, dev, Y, M*N)
			check("gemm_"+mode, got, func(i int) float64 { return ref[i] }, M*N, 1e-3)
		default:
			got := readHalf(t, dev, Y, M*N/2)
			check("gemm_"+mode, got, func(i int) float64 {
				m, j := i/(N/2), i%(N/2)
				g, u := ref[m*N+2*j], ref[m*N+2*j+1]
				return g / (1 + math.Exp(-g)) * u
			}, M*N/2, 2e-3)
		}
	}

	// Attention: 2 heads of 128 over n rows of [q, k, v].
	const n, H, hd = 200, 2, 128
	D := H * hd
	qh, qf := halfRand(n*3*D, 1, 3)
	Q := up(driver.Bytes(qh))
	O := d.buf(int64(2 * n * D))
	name, _ := kernels.DiTAttnName(hd)
	scale := 1 / math.Sqrt(hd)
	attn := func(name string, g kernels.Geometry) []float32 {
		d.launch(name, g, p(O), p(Q), driver.I32(n), driver.I32(H), driver.I32(3*D), driver.I32(D), driver.F32(float32(scale)))
		if d.err != nil {
			t.Fatal(d.err)
		}
		return readHalf(t, dev, O, n*D)
	}
	got := attn(name, kernels.DiTAttnLaunch(n, H, hd))
	want := make([]float64, n*D)
	for h := range H {
		for i := range n {
			s := make([]float64, n)
			mx := math.Inf(-1)
			for j := range n {
				for c := range hd {
					s[j] += float64(qf[i*3*D+h*hd+c]) * float64(qf[j*3*D+D+h*hd+c])
				}
				s[j] *= scale
				mx = max(mx, s[j])
			}
			l := 0.0
			for j := range n {
				s[j] = math.Exp(s[j] - mx)
				l += s[j]
			}
			for c := range hd {
				o := 0.0
				for j := range n {
					o += s[j] * float64(qf[j*3*D+2*D+h*hd+c])
				}
				want[i*D+h*hd+c] = o / l
			}
		}
	}
	check("attention hd 128", got, func(i int) float64 { return want[i] }, n*D, 2e-3)
	// The benchmark's other attention kernels, where the module has them.
	for _, v := range attnVariants {
		if _, err := dev.Function(mod, v.name); err != nil {
			continue
		}
		g := attnGeometry(v.rows, v.keys, v.qsmem, n, H, hd)
		check(v.name, attn(v.name, g), func(i int) float64 { return want[i] }, n*D, 2e-3)
	}
	// And the GEMM tilings (f16 out).
	for _, v := range gemmVariants {
		if _, err := dev.Function(mod, kernels.DiTGemmPrefix+v.name); err != nil {
			continue
		}
		bm, bn := 64*v.wm, 64*v.wn
		g := kernels.Geometry{Grid: [3]uint32{uint32((M + bm - 1) / bm), uint32((N + bn - 1) / bn), 1},
			Block: [3]uint32{uint32(32 * v.wm * v.wn), 1, 1}, Shared: uint32(v.stage * (bm + bn) * v.bk * 2)}
		d.launch(kernels.DiTGemmPrefix+v.name, g, p(Y), p(A), p(W), 0, driver.I32(M), driver.I32(N), driver.I32(K), driver.I32(N))
		if d.err != nil {
			t.Fatal(d.err)
		}
		check("gemm "+v.name, readHalf(t, dev, Y, M*N), func(i int) float64 { return ref[i] }, M*N, 1e-3)
	}
}
