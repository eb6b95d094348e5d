package webgpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// kt is a small harness to run one kernel on test data.
type kt struct {
	t    *testing.T
	d    *gpu.Device
	bufs []*gpu.Buffer
}

func newKT(t *testing.T) *kt {
	k := &kt{t: t, d: testDevice(t)}
	t.Cleanup(func() {
		for _, b := range k.bufs {
			b.Release()
		}
	})
	return k
}

func (k *kt) storage(data []byte) *gpu.Buffer {
	k.t.Helper()
	b, err := k.d.NewStorage("test", uint64(max(len(data), 16)))
	if err != nil {
		k.t.Fatal(err)
	}
	if err := k.d.Write(b, 0, data); err != nil {
		k.t.Fatal(err)
	}
	k.bufs = append(k.bufs, b)
	return b
}

func (k *kt) f32(v []float32) *gpu.Buffer { return k.storage(gpu.F32Bytes(v)) }
func (k *kt) zeros(n int) *gpu.Buffer     { return k.storage(make([]byte, 4*n)) }
func (k *kt) step(pos0, n, head0, headRows int) *gpu.Buffer {
	return k.storage(gpu.U32Bytes([]uint32{uint32(pos0), uint32(n), uint32(head0), uint32(headRows), 0, 0, 0, 0}))
}

func (k *kt) uniform(p shaders.Params) *gpu.Buffer {
	b, err := k.d.NewUniform("p", shaders.Pack(p))
	if err != nil {
		k.t.Fatal(err)
	}
	k.bufs = append(k.bufs, b)
	return b
}

func (k *kt) run(key, src string, kinds []gpu.BindKind, grid [3]uint32, bufs ...*gpu.Buffer) {
	k.t.Helper()
	p, err := k.d.Pipeline(key, src, kinds)
	if err != nil {
		k.t.Fatal(err)
	}
	binds := make([]gpu.Binding, len(bufs))
	for i, b := range bufs {
		binds[i] = gpu.Whole(b)
	}
	g, err := k.d.BindGroup(p, key, binds...)
	if err != nil {
		k.t.Fatal(err)
	}
	defer g.Release()
	if err := k.d.Run(nil, []gpu.Dispatch{{P: p, G: g, X: grid[0], Y: grid[1], Z: grid[2]}}, nil); err != nil {
		k.t.Fatal(err)
	}
}

func (k *kt) read(b *gpu.Buffer, n int) []float32 {
	k.t.Helper()
	raw, err := k.d.ReadBuffer(b, uint64(4*n))
	if err != nil {
		k.t.Fatal(err)
	}
	return gpu.BytesF32(raw)
}

func randVec(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (r.Float32()*2 - 1) * scale
	}
	return v
}

// closeTo fails when got and want differ by more than tol relative to the
// larger of |want| and 1.
func closeTo(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) < len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		d := math.Abs(float64(got[i] - want[i]))
		if d > tol*math.Max(1, math.Abs(float64(want[i]))) || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s: [%d] = %v, want %v (|Δ| %.3g, tol %.0e)", what, i, got[i], want[i], d, tol)
		}
	}
}

// encodeWeight encodes float values with codec c for the device and returns
// the device bytes, scale offset and the exactly decoded values the
// reference must use.
func encodeWeight(t *testing.T, c tensor.Codec, rows, cols int, v []float32) ([]byte, uint32, []float32) {
	t.Helper()
	rb, err := c.RowBytes(cols)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, rows*rb)
	if err := tensor.Quantize(raw, c, v); err != nil {
		t.Fatal(err)
	}
	dec := make([]float32, rows*cols)
	if err := tensor.Dequantize(dec, c, raw); err != nil {
		t.Fatal(err)
	}
	data, codec, _, _, soff, err := encodeForDevice([]*tensor.Tensor{{Name: "w", Codec: c, Shape: []int{rows, cols}, Data: raw}})
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := deviceCodec(c); codec != want {
		t.Fatalf("device codec %s for %s", codec, c)
	}
	return data, soff, dec
}

var testCodecs = []tensor.Codec{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K}

// planeCodecs are the low-bit GGUF codecs held as q4_0's planes (the code
// books of iq4_nl, iq4_xs and mxfp4 in workgroup memory where a kernel
// calls codec_init): the staged matvec and the matmul test them too.
var planeCodecs = []tensor.Codec{tensor.Q4_1, tensor.Q5_0, tensor.Q5_1, tensor.IQ4_NL, tensor.IQ4_XS, tensor.MXFP4, tensor.TQ1_0, tensor.TQ2_0}

func TestKernelMatmul(t *testing.T) {
	k := newKT(t)
	r := rand.New(rand.NewPCG(1, 2))
	// 2048 columns: every thread loops over several 16-byte chunks.
	const rows, cols = 37, 2048
	for _, c := range append(append([]tensor.Codec(nil), testCodecs...), planeCodecs...) {
		dc, _ := deviceCodec(c)
		data, soff, w := encodeWeight(t, c, rows, cols, randVec(r, rows*cols, 1))
		wb := k.storage(data)
		bias := randVec(r, rows, 1)
		for _, n := range []int{1, 3, 11} {
			for _, mode := range []int{0, 1} {
				t.Run(fmt.Sprintf("%s/n%d/mode%d", c, n, mode), func(t *testing.T) {
					x := randVec(r, n*cols, 1)
					const stride, off = rows + 5, 3
					init := randVec(r, n*stride, 1)
					alpha, capv := float32(0.75), float32(0)
					if mode == 0 {
						capv = 2
					}
					want := append([]float32(nil), init...)
					for ti := 0; ti < n; ti++ {
						for o := 0; o < rows; o++ {
							var s float64
							for i := 0; i < cols; i++ {
								s += float64(w[o*cols+i]) * float64(x[ti*cols+i])
							}
							y := float32(s) + bias[o]
							idx := ti*stride + off + o
							if mode == 1 {
								want[idx] += alpha * y
							} else {
								y *= alpha
								want[idx] = capv * float32(math.Tanh(float64(y/capv)))
							}
						}
					}
					tb, rb := 1, DefaultTuning().MVRows
					if n > 1 {
						tb, rb = DefaultTuning().GemmTB, DefaultTuning().GemmRows
					}
					for _, r := range []int{1, rb} {
						src, err := shaders.MatmulRows(dc, tb, r)
						if err != nil {
							t.Fatal(err)
						}
						out := k.f32(init)
						gx, gy := matmulGrid(rows, r)
						k.run(fmt.Sprintf("matmul/%s/tb%d/r%d", dc, tb, r), src, kindsMatmul, [3]uint32{gx, gy, uint32((n + tb - 1) / tb)},
							k.uniform(shaders.MatmulParams{Rows: u32(rows), Cols: u32(cols), SOff: soff, Mode: u32(mode), Alpha: alpha, Softcap: capv,
								HasBias: 1, OutStride: u32(stride), OutOff: u32(off)}), k.step(0, n, 0, 1), wb, k.f32(x), out, k.f32(bias))
						closeTo(t, fmt.Sprintf("y(r%d)", r), k.read(out, n*stride), want, 1e-4)
					}
				})
			}
		}
	}
}

func TestKernelEmbed(t *testing.T) {
	k := newKT(t)
	r := rand.New(rand.NewPCG(3, 4))
	const vocab, hidden = 19, 512
	for _, c := range append(append([]tensor.Codec(nil), testCodecs...), planeCodecs...) {
		t.Run(c.String(), func(t *testing.T) {
			dc, _ := deviceCodec(c)
			data, soff, w := encodeWeight(t, c, vocab, hidden, randVec(r, vocab*hidden, 1))
			toks := []uint32{5, 0, 18, 5}
			var want []float32
			for _, tok := range toks {
				for i := 0; i < hidden; i++ {
					want = append(want, w[int(tok)*hidden+i]*1.5)
				}
			}
			src, err := shaders.Embed(dc)
			if err != nil {
				t.Fatal(err)
			}
			out := k.zeros(len(toks) * hidden)
			k.run("embed/"+dc.String(), src, kindsEmbed, [3]uint32{(hidden/4 + 63) / 64, uint32(len(toks)), 1},
				k.uniform(shaders.EmbedParams{Hidden: hidden, SOff: soff, Scale: 1.5}), k.step(0, len(toks), 0, 1), k.storage(gpu.U32Bytes(toks)), k.storage(data), out)
			closeTo(t, "embed", k.read(out, len(want)), want, 0)
		})
	}
}

func refRMS(x, w []float32, eps float32, plusOne bool) []float32 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	r := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	out := make([]float32, len(x))
	for i, v := range x {
		g := w[i]
		if plusOne {
			g++
		}
		out[i] = float32(float64(v)*r) * g
	}
	return out
}

func TestKernelRMSNorm(t *testing.T) {
	k := newKT(t)
	r := rand.New(rand.NewPCG(5, 6))
	const n, sub, ntok = 48, 3, 4
	for _, plus := range []bool{false, true} {
		for _, mode := range []int{0, 1} {
			for _, ip := range []bool{false, true} {
				if ip && mode == 1 {
					continue
				}
				t.Run(fmt.Sprintf("plus%v/mode%d/ip%v", plus, mode, ip), func(t *testing.T) {
					// Rows of stride 160 with the normed segments at offset 8;
					// head rows 1..3 selected (sel 1).
					const stride, off = 160, 8
					x := randVec(r, ntok*stride, 2)
					w := randVec(r, n, 1)
					init := randVec(r, ntok*stride, 1)
					if ip {
						init = append([]float32(nil), x...)
					}
					want := append([]float32(nil), init...)
					base, cnt := 1, 3
					for ti := 0; ti < cnt; ti++ {
						for sg := 0; sg < sub; sg++ {
							in := x[(base+ti)*stride+off+sg*n:][:n]
							y := refRMS(in, w, 1e-5, plus)
							ob := ti*stride + off + sg*n
							if ip {
								ob = (base+ti)*stride + off + sg*n
							}
							for i := range y {
								if mode == 1 {
									want[ob+i] += 0.5 * y[i]
								} else {
									want[ob+i] = y[i]
								}
							}
						}
					}
					xb := k.f32(x)
					pb := k.uniform(shaders.NormParams{N: u32(n), Eps: 1e-5, PlusOne: flag(plus), Mode: u32(mode), Alpha: 0.5, Sel: 1,
						InStride: u32(stride), InOff: u32(off), OutStride: u32(stride), OutOff: u32(off)})
					st := k.step(0, ntok, base, cnt)
					if ip {
						// In place reads and writes the same rows: select from 0.
						pb = k.uniform(shaders.NormParams{N: u32(n), Eps: 1e-5, PlusOne: flag(plus), Mode: u32(mode), Alpha: 0.5, Sel: 1,
							InStride: u32(stride), InOff: u32(off), OutStride: u32(stride), OutOff: u32(off + base*stride)})
						k.run("rmsnorm/ip", shaders.RMSNorm(true), kindsNormIP, [3]uint32{sub, uint32(cnt), 1}, pb, st, k.f32(w), xb)
						closeTo(t, "norm", k.read(xb, len(want)), want, 1e-5)
						return
					}
					out := k.f32(init)
					k.run("rmsnorm", shaders.RMSNorm(false), kindsNorm, [3]uint32{sub, uint32(cnt), 1}, pb, st, k.f32(w), xb, out)
					closeTo(t, "norm", k.read(out, len(want)), want, 1e-5)
				})
			}
		}
	}
}

func TestKernelQKVPrep(t *testing.T) {
	k := newKT(t)
	r := rand.New(rand.NewPCG(7, 8))
	const heads, kvh, hd, ntok, pos0, maxLen = 4, 2, 32, 3, 5, 16
	for _, tc := range []struct {
		rot, style int
		norm, plus bool
	}{{32, 0, false, false}, {32, 1, false, false}, {16, 0, true, false}, {8, 1, true, true}, {0, 0, true, false}} {
		t.Run(fmt.Sprintf("rot%d/style%d/norm%v/plus%v", tc.rot, tc.style, tc.norm, tc.plus), func(t *testing.T) {
			stride := (heads + 2*kvh) * hd
			x := randVec(r, ntok*stride, 2)
			qn, kn := randVec(r, hd, 1), randVec(r, hd, 1)
			rt, err := model.NewRopeTable(model.Rope{Theta: 10000, Dims: max(tc.rot, 2), Style: model.RopeNeoX,
				Scaling: model.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8}}, hd)
			if err != nil {
				t.Fatal(err)
			}
			cs := rt.CosSinRows(maxLen)
			wantQ := append([]float32(nil), x...)
			wantK := make([]float32, maxLen*kvh*hd)
			wantV := make([]float32, maxLen*kvh*hd)
			for ti := 0; ti < ntok; ti++ {
				pos := pos0 + ti
				for h := 0; h < heads+2*kvh; h++ {
					v := append([]float32(nil), x[ti*stride+h*hd:][:hd]...)
					isV := h >= heads+kvh
					if !isV && tc.norm {
						w := qn
						if h >= heads {
							w = kn
						}
						v = refRMS(v, w, 1e-6, tc.plus)
					}
					if !isV && tc.rot > 0 {
						half := tc.rot / 2
						for i := 0; i < half; i++ {
							a, b := i, i+half
							if tc.style == 1 {
								a, b = 2*i, 2*i+1
							}
							c, s := cs[2*(pos*half+i)], cs[2*(pos*half+i)+1]
							xa, xb := v[a], v[b]
							v[a], v[b] = xa*c-xb*s, xb*c+xa*s
						}
					}
					switch {
					case isV:
						copy(wantV[pos*kvh*hd+(h-heads-kvh)*hd:], v)
					case h >= heads:
						copy(wantK[pos*kvh*hd+(h-heads)*hd:], v)
					default:
						copy(wantQ[ti*stride+h*hd:], v)
					}
				}
			}
			xb, kc, vc := k.f32(x), k.zeros(maxLen*kvh*hd), k.zeros(maxLen*kvh*hd)
			src, _ := shaders.Source(shaders.QKVPrep)
			k.run("qkv_prep", src, kindsPrep, [3]uint32{heads + 2*kvh, ntok, 1},
				k.uniform(shaders.PrepParams{Heads: heads, KVHeads: kvh, HD: hd, Rot: u32(tc.rot), Style: u32(tc.style), QKNorm: flag(tc.norm),
					Eps: 1e-6, PlusOne: flag(tc.plus), KNOff: hd}),
				k.step(pos0, ntok, 0, 1), xb, kc, vc, k.f32(cs), k.f32(append(qn, kn...)))
			closeTo(t, "q", k.read(xb, len(wantQ)), wantQ, 1e-5)
			closeTo(t, "k cache", k.read(kc, len(wantK)), wantK, 1e-5)
			closeTo(t, "v cache", k.read(vc, len(wantV)), wantV, 0)
		})
	}
}

func TestKernelAttention(t *testing.T) {
	k := newKT(t)
	r := rand.New(rand.NewPCG(9, 10))
	const heads, kvh = 4, 2
	for _, tc := range []struct {
		hd, pos0, window int
		softcap          float32
		ntok             int
	}{{16, 0, 0, 0, 3}, {64, 90, 0, 0, 3}, {32, 70, 8, 0, 3}, {256, 130, 0, 50, 3}, {16, 5, 3, 20, 3},
		// Steps long enough for the tiled prefill kernel: several blocks
		// of 64 rows, tiles cut by the causal edge and by a window.
		{64, 30, 0, 0, 150}, {32, 10, 40, 0, 100}, {16, 0, 0, 20, 70}, {128, 3, 0, 0, 65}} {
		t.Run(fmt.Sprintf("hd%d/pos%d/win%d/cap%v/n%d", tc.hd, tc.pos0, tc.window, tc.softcap, tc.ntok), func(t *testing.T) {
			hd, ntok := tc.hd, tc.ntok
			maxLen := tc.pos0 + ntok
			stride := (heads + 2*kvh) * hd
			qkv := randVec(r, ntok*stride, 1)
			kc := randVec(r, maxLen*kvh*hd, 1)
			vc := randVec(r, maxLen*kvh*hd, 1)
			scale := float32(1 / math.Sqrt(float64(hd)))
			want := make([]float32, ntok*heads*hd)
			for ti := 0; ti < ntok; ti++ {
				pos := tc.pos0 + ti
				lo := 0
				if tc.window > 0 {
					lo = max(0, pos+1-tc.window)
				}
				for h := 0; h < heads; h++ {
					g := h / (heads / kvh)
					q := qkv[ti*stride+h*hd:][:hd]
					sc := make([]float64, pos+1-lo)
					mx := math.Inf(-1)
					for j := lo; j <= pos; j++ {
						var d float64
						for i := 0; i < hd; i++ {
							d += float64(q[i]) * float64(kc[j*kvh*hd+g*hd+i])
						}
						s := d * float64(scale)
						if tc.softcap > 0 {
							s = float64(tc.softcap) * math.Tanh(s/float64(tc.softcap))
						}
						sc[j-lo] = s
						mx = math.Max(mx, s)
					}
					var sum float64
					for i := range sc {
						sc[i] = math.Exp(sc[i] - mx)
						sum += sc[i]
					}
					for i := 0; i < hd; i++ {
						var o float64
						for j := lo; j <= pos; j++ {
							o += sc[j-lo] * float64(vc[j*kvh*hd+g*hd+i])
						}
						want[ti*heads*hd+h*hd+i] = float32(o / sum)
					}
				}
			}
			src, _ := shaders.Source(shaders.Attention)
			comb, _ := shaders.Source(shaders.Combine)
			for _, split := range []int{0, 40, 64} {
				span := tc.pos0 + ntok
				if tc.window > 0 {
					span = min(span, tc.window)
				}
				ns := 1
				if split > 0 {
					ns = (span + split - 1) / split
				}
				maxSplits := ns + 1 // one slot more than needed: must be ignored
				out, part := k.zeros(len(want)), k.zeros(ntok*heads*maxSplits*(hd+2))
				k.run("attention", src, kindsAttn, [3]uint32{heads, uint32(ntok), uint32(ns)},
					k.uniform(shaders.AttnParams{Heads: heads, KVHeads: kvh, HD: u32(hd), Window: u32(tc.window), Scale: scale, Softcap: tc.softcap,
						QStride: u32(stride), SplitLen: u32(split), MaxSplits: u32(maxSplits)}),
					k.step(tc.pos0, ntok, 0, 1), k.f32(qkv), k.f32(kc), k.f32(vc), out, part)
				if split > 0 {
					k.run("attn_combine", comb, kindsCombine, [3]uint32{heads, uint32(ntok), 1},
						k.uniform(shaders.CombineParams{Heads: heads, HD: u32(hd), Window: u32(tc.window), SplitLen: u32(split), MaxSplits: u32(maxSplits)}), k.step(tc.pos0, ntok, 0, 1), part, out)
				}
				closeTo(t, fmt.Sprintf("attention split %d", split), k.read(out, len(want)), want, 1e-5)
			}
			for _, bq := range []int{16, shaders.AttnPrefillBlock} {
				tiled, err := shaders.AttnPrefillRows(hd, bq)
				if err != nil {
					if hd <= 128 {
						t.Fatal(err)
					}
					continue
				}
				out := k.zeros(len(want))
				k.run(fmt.Sprintf("attn_prefill/%d/%d", hd, bq), tiled, kindsAttn, [3]uint32{heads, uint32((ntok + bq - 1) / bq), 1},
					k.uniform(shaders.AttnParams{Heads: heads, KVHeads: kvh, HD: u32(hd), Window: u32(tc.window), Scale: scale, Softcap: tc.softcap,
						QStride: u32(stride), MaxSplits: 1}),
					k.step(tc.pos0, ntok, 0, 1), k.f32(qkv), k.f32(kc), k.f32(vc), out, k.zeros(4))
				closeTo(t, fmt.Sprintf("attention tiled (%d tokens per workgroup)", bq), k.read(out, len(want)), want, 1e-5)
			}
		})
	}
}

func TestKernelActMul(t *testing.T) {
	k := newKT(t)
	r := rand.New(rand.NewPCG(11, 12))
	const f, ntok = 200, 3
	for act := 0; act < 2; act++ {
		gu := randVec(r, ntok*2*f, 6)
		want := make([]float32, ntok*f)
		for ti := 0; ti < ntok; ti++ {
			for i := 0; i < f; i++ {
				g, u := float64(gu[ti*2*f+i]), float64(gu[ti*2*f+f+i])
				var a float64
				if act == 1 {
					a = 0.5 * g * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(g+0.044715*g*g*g)))
				} else {
					a = g / (1 + math.Exp(-g))
				}
				want[ti*f+i] = float32(a * u)
			}
		}
		out := k.zeros(len(want))
		src, _ := shaders.Source(shaders.ActMul)
		k.run("act_mul", src, kindsAct, [3]uint32{(f + 63) / 64, ntok, 1}, k.uniform(shaders.ActMulParams{F: u32(f), Act: u32(act)}), k.step(0, ntok, 0, 1), k.f32(gu), out)
		closeTo(t, fmt.Sprintf("act %d", act), k.read(out, len(want)), want, 1e-5)
	}
}

// TestKernelArgmax runs both stages of the greedy pick (argmax_part over
// spans of the row, argmax over the spans' picks) on rows of one span,
// several, and spans longer than one round of loads.
func TestKernelArgmax(t *testing.T) {
	k := newKT(t)
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{1000, 5000, 300000} {
		nan := float32(math.NaN())
		for _, tc := range []struct {
			name string
			set  func(v []float32)
			want int
		}{
			{"max", func(v []float32) { v[733] = 9 }, 733},
			{"max-last", func(v []float32) { v[n-1] = 9 }, n - 1},
			{"tie-lowest", func(v []float32) { v[n-99] = 9; v[17] = 9; v[400] = 9; v[n/2] = 9 }, 17},
			{"tie-across-spans", func(v []float32) { v[n-1] = 9; v[n/2+1] = 9 }, n/2 + 1},
			// Any non-finite logit makes the pick POISON (tokens[0] 0).
			{"nan", func(v []float32) { v[5] = nan; v[6] = 8 }, argmaxPoison},
			{"nan-last", func(v []float32) { v[n-1] = nan; v[6] = 8 }, argmaxPoison},
			{"nan-span", func(v []float32) {
				for i := range min(n, 2048) {
					v[i] = nan
				}
				v[n-3] = 7
			}, argmaxPoison},
			{"all-nan", func(v []float32) {
				for i := range v {
					v[i] = nan
				}
			}, argmaxPoison},
			{"inf", func(v []float32) { v[n/2] = float32(math.Inf(1)) }, argmaxPoison},
			{"minus-inf", func(v []float32) { v[n/3] = float32(math.Inf(-1)); v[7] = 9 }, argmaxPoison},
			{"lowest-finite", func(v []float32) {
				for i := range v {
					v[i] = -math.MaxFloat32
				}
			}, 0},
		} {
			t.Run(fmt.Sprintf("%d/%s", n, tc.name), func(t *testing.T) {
				rows := randVec(r, 2*n, 1)
				tc.set(rows[n:]) // the second (last head) row counts
				rows[3] = 50     // a larger value in the first row must not
				per, parts := argmaxSpans(n)
				picks, toks, ids := k.zeros(2*parts), k.zeros(4), k.zeros(4)
				st := k.storage(gpu.U32Bytes([]uint32{0, 2, 0, 2, 1, 0, 0, 0}))
				src, _ := shaders.Source(shaders.ArgmaxPart)
				k.run("argmax_part", src, kindsArgmaxPart, [3]uint32{uint32(parts), 1, 1}, k.uniform(shaders.ArgmaxPartParams{N: u32(n), Per: u32(per)}), st, k.f32(rows), picks)
				src, _ = shaders.Source(shaders.Argmax)
				k.run("argmax", src, kindsArgmax, [3]uint32{1, 1, 1}, k.uniform(shaders.ArgmaxParams{N: u32(parts)}), st, picks, toks, ids)
				rawT, _ := k.d.ReadBuffer(toks, 4)
				rawI, _ := k.d.ReadBuffer(ids, 8)
				wantTok := tc.want
				if wantTok == argmaxPoison {
					wantTok = 0 // the next step's embedding input stays in range
				}
				if got := int(u32s(rawT)[0]); got != wantTok {
					t.Errorf("tokens[0] = %d, want %d", got, wantTok)
				}
				if got := int(u32s(rawI)[1]); got != tc.want {
					t.Errorf("ids[1] = %d, want %d", got, tc.want)
				}
			})
		}
	}
}

func u32s(b []byte) []uint32 {
	v := make([]uint32, len(b)/4)
	for i := range v {
		v[i] = uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
	}
	return v
}

func TestEncodeOddF16(t *testing.T) {
	// 12 columns: not a whole 8-element f16 load, so widened to f32.
	raw := make([]byte, 2*3*12)
	for i := 0; i < 36; i++ {
		h := tensor.F32ToF16(float32(i) - 7.5)
		raw[2*i], raw[2*i+1] = byte(h), byte(h>>8)
	}
	data, c, rows, cols, _, err := encodeForDevice([]*tensor.Tensor{{Name: "w", Codec: tensor.F16, Shape: []int{3, 12}, Data: raw}})
	if err != nil {
		t.Fatal(err)
	}
	if c != tensor.F32 || rows != 3 || cols != 12 || len(data) != 4*36 {
		t.Fatalf("codec %s rows %d cols %d bytes %d", c, rows, cols, len(data))
	}
	if v := gpu.BytesF32(data); v[35] != 27.5 {
		t.Fatalf("v[35] = %v", v[35])
	}
	if got := deviceBytes(tensor.F16, 3, 12); got != 4*36 {
		t.Fatalf("deviceBytes %d", got)
	}
}
