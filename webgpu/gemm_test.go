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

// TestGemmParity runs the tiled GEMM and the matmul kernel's prefill
// variant on the same inputs: odd shapes (rows and tokens not multiples of
// the tile, cols not a multiple of the K step for f32/f16), both token
// selections, both epilogue modes. Both must match a float64 reference,
// and each other to float32 rounding.
func TestGemmParity(t *testing.T) {
	k := newKT(t)
	r := rand.New(rand.NewPCG(7, 8))
	const rows, ntok = 200, 37
	type shape struct {
		c    tensor.Codec
		cols int
	}
	shapes := []shape{{tensor.F32, 256}, {tensor.F32, 264}, {tensor.F16, 256}, {tensor.F16, 264}, {tensor.Q8_0, 256}, {tensor.Q4_0, 256}, {tensor.Q4_K, 256}, {tensor.Q6_K, 256},
		// GGUF's other codecs: a reordered block, word-level and byte-level
		// reads, 16- and 32-element chunks, code books and appended grids.
		{tensor.Q5_0, 256}, {tensor.Q5_K, 256}, {tensor.Q3_K, 256}, {tensor.MXFP4, 256}, {tensor.IQ2_XS, 256}, {tensor.IQ3_S, 256},
		// The planes of 256-element blocks (iq4_xs, tq1_0 as tq2_0's codes).
		{tensor.IQ4_XS, 256}, {tensor.TQ1_0, 512}}
	// Other tilings on q4_0 only (each pipeline costs seconds on lavapipe):
	// one that leaves threads idle while staging, a loop one, a
	// double-buffered one, and gemmFor's large one.
	others := []shaders.GemmTiling{
		{Rows: 32, Tokens: 64, K: 32, ThreadRows: 4, ThreadTokens: 4, Unroll: true},
		{Rows: 64, Tokens: 64, K: 32, ThreadRows: 8, ThreadTokens: 4},
		{Rows: 64, Tokens: 64, K: 16, ThreadRows: 4, ThreadTokens: 8, Unroll: true, Double: true},
	}
	be := &Backend{dev: k.d, tune: DefaultTuning()}
	for _, sh := range shapes {
		c, cols := sh.c, sh.cols
		data, soff, w := encodeWeight(t, c, rows, cols, randVec(r, rows*cols, 1))
		wb := k.storage(data)
		bias := randVec(r, rows, 1)
		biasb := k.f32(bias)
		type tiled struct {
			name string
			gemmKernel
		}
		def, err := be.gemmFor(c, rows)
		if err != nil {
			t.Fatal(err)
		}
		if tr, tt := shaders.GemmTile(c); def.tileRows != tr || def.tileTokens != tt {
			t.Fatalf("gemmFor(%s, %d) tile %dx%d, GemmTile %dx%d", c, rows, def.tileRows, def.tileTokens, tr, tt)
		}
		tilings := []tiled{{"gemm", def}}
		if c == tensor.Q4_0 {
			large, err := be.gemmFor(c, be.tune.GemmLargeRows)
			if err != nil {
				t.Fatal(err)
			}
			if large.tileRows != shaders.GemmLarge().Rows || large.tileTokens != shaders.GemmLarge().Tokens {
				t.Fatalf("gemmFor(%s, %d) tile %dx%d", c, be.tune.GemmLargeRows, large.tileRows, large.tileTokens)
			}
			tilings = append(tilings, tiled{"gemm-large", large})
			for _, g := range others {
				src, err := shaders.GemmTiled(c, g)
				if err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprintf("gemm/%s/%+v", c, g)
				p, err := k.d.Pipeline(key, src, kindsMatmul)
				if err != nil {
					t.Fatal(err)
				}
				tilings = append(tilings, tiled{key, gemmKernel{p, g.Rows, g.Tokens}})
			}
		}
		ref, err := shaders.MatmulRows(c, be.tune.GemmTB, be.tune.GemmRows)
		if err != nil {
			t.Fatal(err)
		}
		for _, sel := range []int{0, 1} {
			for _, mode := range []int{0, 1} {
				t.Run(fmt.Sprintf("%s/cols%d/sel%d/mode%d", c, cols, sel, mode), func(t *testing.T) {
					// sel 1 reads the x rows head0..head0+ntok of a larger
					// buffer; sel 0 rows 0..ntok.
					head0, xrows := 0, ntok
					if sel == 1 {
						head0, xrows = 5, ntok+9
					}
					x := randVec(r, xrows*cols, 1)
					xb := k.f32(x)
					const off = 3
					stride := rows + 5
					init := randVec(r, ntok*stride+off, 1)
					alpha, capv, hasBias := float32(0.75), float32(0), 1
					if mode == 0 {
						capv = 2
					}
					want := append([]float32(nil), init...)
					for ti := 0; ti < ntok; ti++ {
						for o := 0; o < rows; o++ {
							var s float64
							for i := 0; i < cols; i++ {
								s += float64(w[o*cols+i]) * float64(x[(head0+ti)*cols+i])
							}
							y := float32(s) + bias[o]
							idx := off + ti*stride + o
							if mode == 1 {
								want[idx] += alpha * y
							} else {
								y *= alpha
								want[idx] = capv * float32(math.Tanh(float64(y/capv)))
							}
						}
					}
					stepb := k.step(0, ntok, head0, ntok)
					if sel == 0 {
						// step[3] (head rows) differs from ntok so that sel 0
						// must read step[1].
						stepb = k.step(0, ntok, 0, 1)
					}
					uni := k.uniform(shaders.MatmulParams{Rows: u32(rows), Cols: u32(cols), SOff: soff, Mode: u32(mode), Alpha: alpha, Softcap: capv, Sel: u32(sel),
						HasBias: shaders.Flag(hasBias), OutStride: u32(stride), OutOff: u32(off)})

					outM := k.f32(init)
					mx, my := matmulGrid(rows, be.tune.GemmRows)
					k.run(fmt.Sprintf("matmul/%s/tb%d/r%d", c, be.tune.GemmTB, be.tune.GemmRows), ref, kindsMatmul,
						[3]uint32{mx, my, uint32((ntok + be.tune.GemmTB - 1) / be.tune.GemmTB)}, uni, stepb, wb, xb, outM, biasb)
					old := k.read(outM, len(init))

					closeTo(t, "matmul vs float64", old, want, 1e-5)

					for _, g := range tilings {
						outG := k.f32(init)
						gx, gy, gz := g.grid(rows, ntok)
						k.dispatch(g.name, g.p, [3]uint32{gx, gy, gz}, uni, stepb, wb, xb, outG, biasb)
						got := k.read(outG, len(init))
						closeTo(t, g.name+" vs float64", got, want, 1e-5)
						closeTo(t, g.name+" vs matmul", got, old, 1e-5)
					}
				})
			}
		}
	}
}

// dispatch runs the ready pipeline p (named name) once over grid.
func (k *kt) dispatch(name string, p *gpu.Pipeline, grid [3]uint32, bufs ...*gpu.Buffer) {
	k.t.Helper()
	binds := make([]gpu.Binding, len(bufs))
	for i, b := range bufs {
		binds[i] = gpu.Whole(b)
	}
	g, err := k.d.BindGroup(p, name, binds...)
	if err != nil {
		k.t.Fatal(err)
	}
	defer g.Release()
	if err := k.d.Run(nil, []gpu.Dispatch{{P: p, G: g, X: grid[0], Y: grid[1], Z: grid[2]}}, nil); err != nil {
		k.t.Fatal(err)
	}
}

// TestGemmGridPastEnd dispatches more workgroups than the shape needs (as a
// grid sized for a larger batch would): the extra ones must write nothing.
func TestGemmGridPastEnd(t *testing.T) {
	k := newKT(t)
	r := rand.New(rand.NewPCG(9, 10))
	const rows, cols, ntok = 70, 128, 5
	c := tensor.Q4_0
	data, soff, w := encodeWeight(t, c, rows, cols, randVec(r, rows*cols, 1))
	x := randVec(r, ntok*cols, 1)
	const sentinel = 12345
	init := make([]float32, 2*rows*(ntok+100))
	for i := range init {
		init[i] = sentinel
	}
	src, err := shaders.Gemm(c)
	if err != nil {
		t.Fatal(err)
	}
	out := k.f32(init)
	gx, gy, gz := gemmGrid(c, 3*rows, ntok+100)
	k.run("gemm/"+c.String(), src, kindsMatmul, [3]uint32{gx, gy, gz},
		k.uniform(shaders.MatmulParams{Rows: rows, Cols: cols, SOff: soff, Alpha: 1, OutStride: rows}), k.step(0, ntok, 0, 1),
		k.storage(data), k.f32(x), out, k.zeros(rows))
	got := k.read(out, len(init))
	for i, v := range got {
		ti, o := i/rows, i%rows
		if ti >= ntok {
			if v != sentinel {
				t.Fatalf("out[%d] (token %d) = %v written past the end", i, ti, v)
			}
			continue
		}
		var s float64
		for j := 0; j < cols; j++ {
			s += float64(w[o*cols+j]) * float64(x[ti*cols+j])
		}
		if d := math.Abs(float64(v) - s); d > 1e-5*math.Max(1, math.Abs(s)) {
			t.Fatalf("y[%d, %d] = %v, want %v", ti, o, v, s)
		}
	}
}
