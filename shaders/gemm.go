package shaders

import (
	"fmt"
	"strings"

	"github.com/cortiq/cortiq/tensor"
)

// GemmTiling is the shape of the tiled prefill GEMM (gemm.wgsl): a
// workgroup computes Rows x Tokens outputs, staging K inner-dimension
// elements per step, and each thread a micro-tile of ThreadRows x
// ThreadTokens outputs held in registers.
type GemmTiling struct {
	Rows, Tokens, K          int
	ThreadRows, ThreadTokens int
	// Unroll writes the K step's multiply loop out in full instead of
	// leaving the unrolling to the driver's compiler.
	Unroll bool
	// Double stages the next step into a second workgroup buffer while
	// the current one is multiplied: one barrier per step, not two (it
	// halves the K that fits in 16 KiB; no gain on the H200).
	Double bool
	// Gated compiles mode 2 (interleaved gate/up rows through SiLU, the
	// DiT's feed-forward) into the epilogue; the LLM's prefill never asks
	// for it, and its GEMM is left without the branch.
	Gated bool
	// Shared is the workgroup memory the tiling may use: 0 means
	// WebGPU's default 16 KiB, what every browser grants; a device whose
	// limits allow more (native adapters) can stage a deeper K.
	Shared int
}

func (g GemmTiling) buffers() int {
	if g.Double {
		return 2
	}
	return 1
}

// gemmTiling is the tiling Gemm uses: on an NVIDIA H200 it was the best
// all-round one over llama-1b's shapes at 512 tokens (see BenchmarkGemm in
// package webgpu): 4x8 micro-tiles keep 128 threads per 64x64 tile, enough
// workgroups in flight for the 2048-row weights (8x8 micro-tiles on the
// same tile ran a third slower).
var gemmTiling = GemmTiling{Rows: 64, Tokens: 64, K: 32, ThreadRows: 4, ThreadTokens: 8, Unroll: true}

// GemmLarge is a tiling for weights of many rows (thousands of row tiles
// at the prompt lengths prefill sees): 128x128 tiles of 8x8 micro-tiles
// read workgroup memory half as often per multiply-add as Gemm's, which
// paid on the H200 for the 16384-row fused gate/up weight (about 15%) and
// lost on the 2048-row ones (too few workgroups to fill the GPU).
func GemmLarge() GemmTiling {
	return GemmTiling{Rows: 128, Tokens: 128, K: 16, ThreadRows: 8, ThreadTokens: 8, Unroll: true}
}

// maxWorkgroupBytes is WebGPU's default maxComputeWorkgroupStorageSize,
// the most a browser grants without asking.
const maxWorkgroupBytes = 16384

func (g GemmTiling) threads() int {
	if g.ThreadRows <= 0 || g.ThreadTokens <= 0 {
		return 0
	}
	return (g.Rows / g.ThreadRows) * (g.Tokens / g.ThreadTokens)
}

// Check reports whether the tiling can be generated: micro-tiles a
// multiple of 4 that divide the tile, 32..256 threads, staging work that
// divides evenly among them and workgroup memory within 16 KiB.
func (g GemmTiling) Check() error {
	bad := func(why string) error { return fmt.Errorf("shaders: gemm tiling %+v: %s", g, why) }
	switch {
	case g.ThreadRows < 4 || g.ThreadRows%4 != 0 || g.ThreadTokens < 4 || g.ThreadTokens%4 != 0 || g.ThreadRows > 16 || g.ThreadTokens > 16:
		return bad("micro-tile sides must be 4, 8, 12 or 16")
	case g.Rows <= 0 || g.Tokens <= 0 || g.Rows%g.ThreadRows != 0 || g.Tokens%g.ThreadTokens != 0:
		return bad("micro-tile does not divide the tile")
	case g.K < 4 || g.K%4 != 0 || g.K > 128:
		return bad("K must be a multiple of 4 up to 128")
	}
	nt := g.threads()
	switch {
	case nt < 32 || nt > 256:
		return bad(fmt.Sprintf("%d threads, want 32..256", nt))
	case !divides(g.Rows*g.K/16, nt) || !divides(g.Tokens*g.K/16, nt):
		return bad("staging does not divide evenly among the threads")
	case g.buffers()*4*g.K*(g.Rows+g.Tokens) > max(maxWorkgroupBytes, g.Shared):
		return bad(fmt.Sprintf("%d bytes of workgroup memory", g.buffers()*4*g.K*(g.Rows+g.Tokens)))
	}
	return nil
}

// divides reports whether n staging items spread evenly over nt threads
// (or over the first n of them).
func divides(n, nt int) bool { return n > 0 && (n%nt == 0 || nt%n == 0) }

// Gemm is the tiled prefill GEMM module for weights of codec c: the same
// bindings, uniform and semantics as the matmul module (MatmulRows), for
// many tokens at once. With (tr, tt) = GemmTile(c), dispatch it over
// (min(g, 65535), ceil(g/65535), ceil(ntok/tt)) workgroups, where
// g = ceil(rows/tr) is the number of row tiles.
func Gemm(c tensor.Codec) (string, error) { return GemmTiled(c, gemmTiling) }

// GemmTile is the tile one workgroup of Gemm(c) covers: rows output rows
// (the grid's x/y) by tokens tokens (the grid's z).
func GemmTile(c tensor.Codec) (rows, tokens int) { return gemmTiling.Rows, gemmTiling.Tokens }

// GemmGated is GemmTiled(c, g) with mode 2 compiled in (GemmTiling.Gated);
// a zero g means Gemm's tiling.
func GemmGated(c tensor.Codec, g GemmTiling) (string, error) {
	if g == (GemmTiling{}) {
		g = gemmTiling
	}
	g.Gated = true
	return GemmTiled(c, g)
}

// GemmTiled is Gemm with an explicit tiling (GemmLarge, or one being tuned
// on new hardware); its workgroup covers g.Rows x g.Tokens.
func GemmTiled(c tensor.Codec, g GemmTiling) (string, error) {
	if err := g.Check(); err != nil {
		return "", err
	}
	pre, err := codecPrelude(c)
	if err != nil {
		return "", err
	}
	nt := g.threads()
	mt, ny := g.Rows/g.ThreadRows, g.Tokens/g.ThreadTokens
	mi, nj := g.ThreadRows/4, g.ThreadTokens/4 // vec4 groups per thread
	wTotal, xTotal := g.Rows*g.K/16, g.Tokens*g.K/16
	nw, nx := max(1, wTotal/nt), max(1, xTotal/nt)
	var setup, acc, load, store, fma, epi strings.Builder
	ind := func(b *strings.Builder, depth int, format string, args ...any) {
		b.WriteString(strings.Repeat("    ", depth))
		fmt.Fprintf(b, format, args...)
		b.WriteByte('\n')
	}
	// Staging: item s of a thread covers 4 consecutive rows (tokens) v at 4
	// consecutive k; consecutive threads take consecutive v, so the stores
	// of a warp into ws[k] (xs[k]) are contiguous. The W and x operands
	// stage alike: o names the variables, items per thread n out of total,
	// span vec4 groups along rows (tokens), row(s, r) the element offset of
	// item s's row r, fetch the prelude loader, dst the workgroup array.
	stage := func(o string, n, total, span int, row func(s, r int) string, fetch, dst string) {
		gd := 0
		if total < nt {
			gd = 1
		}
		for s := 0; s < n; s++ {
			ind(&setup, 1, "let %si%d = min(l + %du, %du);", o, s, s*nt, total-1)
			ind(&setup, 1, "let %sv%d = %si%d %% %du;", o, s, o, s, span)
			ind(&setup, 1, "let %sk%d = (%si%d / %du) * 4u;", o, s, o, s, span)
			for r := 0; r < 4; r++ {
				ind(&setup, 1, "let %sr%d_%d = %s;", o, s, r, row(s, r))
				ind(&setup, 1, "var p%s%d_%d: vec4<f32>;", o, s, r)
				ind(&load, 0, "p%s%d_%d = %s(%sr%d_%d, k0 + %sk%d);", o, s, r, fetch, o, s, r, o, s)
			}
			if gd == 1 {
				ind(&store, 0, "if (l < %du) {", total)
			}
			for q := 0; q < 4; q++ {
				ind(&store, gd, "%s[BUF][%sk%d + %du][%sv%d] = vec4<f32>(p%s%d_0[%d], p%s%d_1[%d], p%s%d_2[%d], p%s%d_3[%d]);",
					dst, o, s, q, o, s, o, s, q, o, s, q, o, s, q, o, s, q)
			}
			if gd == 1 {
				ind(&store, 0, "}")
			}
		}
	}
	stage("w", nw, wTotal, g.Rows/4, func(s, r int) string {
		return fmt.Sprintf("min(row0 + wv%d * 4u + %du, last) * p.cols", s, r)
	}, "wk4", "ws")
	stage("x", nx, xTotal, g.Tokens/4, func(s, r int) string {
		return fmt.Sprintf("(base + min(t0 + xv%d * 4u + %du, cnt - 1u)) * c4", s, r)
	}, "xk4", "xs")
	// Thread (tx, ty) owns row groups tx + i·MT and token groups ty + j·NY:
	// the groups of a warp are contiguous in ws/xs (no bank conflicts).
	cur := "0u"
	if g.Double {
		cur = "cur"
	}
	comp := "xyzw"
	body := func(k string, depth int) {
		ind(&fma, depth, "{")
		for i := 0; i < mi; i++ {
			ind(&fma, depth+1, "let a%d = ws[%s][%s][tx + %du];", i, cur, k, i*mt)
		}
		for j := 0; j < nj; j++ {
			ind(&fma, depth+1, "let b%d = xs[%s][%s][ty + %du];", j, cur, k, j*ny)
		}
		for i := 0; i < mi; i++ {
			for j := 0; j < nj; j++ {
				for c := 0; c < 4; c++ {
					ind(&fma, depth+1, "c%d_%d_%d = fma(a%d, vec4<f32>(b%d.%c), c%d_%d_%d);", i, j, c, i, j, comp[c], i, j, c)
				}
			}
		}
		ind(&fma, depth, "}")
	}
	fmaDepth := 2
	if g.Unroll {
		for k := 0; k < g.K; k++ {
			body(fmt.Sprintf("%du", k), fmaDepth)
		}
	} else {
		ind(&fma, 2, "for (var k = 0u; k < BK; k++) {")
		body("k", 3)
		ind(&fma, 2, "}")
	}
	for i := 0; i < mi; i++ {
		for j := 0; j < nj; j++ {
			for c := 0; c < 4; c++ {
				ind(&acc, 1, "var c%d_%d_%d = vec4<f32>(0.0);", i, j, c)
				ind(&epi, 1, "emit4(row0 + (tx + %du) * 4u, t0 + (ty + %du) * 4u + %du, cnt, c%d_%d_%d);",
					i*mt, j*ny, c, i, j, c)
			}
		}
	}
	// at re-indents generated lines to depth and names the store buffer.
	at := func(b *strings.Builder, depth int, buf string) string {
		var o strings.Builder
		for _, line := range strings.SplitAfter(strings.TrimSuffix(b.String(), "\n"), "\n") {
			o.WriteString(strings.Repeat("    ", depth) + strings.ReplaceAll(line, "BUF", buf))
		}
		return o.String() + "\n"
	}
	var loop strings.Builder
	if !g.Double {
		loop.WriteString("    var k0 = 0u;\n" + at(&load, 1, ""))
		loop.WriteString("    for (var kt = 0u; kt < nk; kt++) {\n" + at(&store, 2, "0u"))
		loop.WriteString("        workgroupBarrier();\n        k0 += BK;\n        if (kt + 1u < nk) {\n" + at(&load, 3, "") + "        }\n")
		loop.WriteString(fma.String() + "        workgroupBarrier();\n    }\n")
	} else {
		loop.WriteString("    var k0 = 0u;\n" + at(&load, 1, "") + at(&store, 1, "0u") + "    workgroupBarrier();\n")
		loop.WriteString("    for (var kt = 0u; kt < nk; kt++) {\n        let cur = kt & 1u;\n        let more = kt + 1u < nk;\n")
		loop.WriteString("        k0 += BK;\n        if (more) {\n" + at(&load, 3, "") + "        }\n")
		loop.WriteString(fma.String() + "        if (more) {\n" + at(&store, 3, "cur ^ 1u") + "        }\n")
		loop.WriteString("        workgroupBarrier();\n    }\n")
	}
	// Mode 2 only where asked for: the branch in every output's epilogue
	// cost the LLM prefill 5-10% on an H200 (llama-1b pp512 10.6k → 10.0k).
	gated := ""
	if g.Gated {
		gated = `    if (p.mode == 2u) {
        if (o + 1u < p.rows) {
            store_gated(o, t, y4.x, y4.y);
        }
        if (o + 3u < p.rows) {
            store_gated(o + 2u, t, y4.z, y4.w);
        }
        return;
    }
`
	}
	src := strings.NewReplacer(
		"__SETUP__\n", setup.String(), "__ACC__\n", acc.String(), "__LOOP__\n", loop.String(),
		"__EPI__\n", epi.String(), "__NB__", fmt.Sprint(g.buffers()),
		"__NT__", fmt.Sprint(nt), "__BM4__", fmt.Sprint(g.Rows/4), "__BN4__", fmt.Sprint(g.Tokens/4),
		"__BM__", fmt.Sprint(g.Rows), "__BN__", fmt.Sprint(g.Tokens), "__BK__", fmt.Sprint(g.K),
		"__TM__", fmt.Sprint(g.ThreadRows), "__TN__", fmt.Sprint(g.ThreadTokens),
		"__MT__", fmt.Sprint(mt), "__NY__", fmt.Sprint(ny), "__GATED__\n", gated, "__MATMUL_IO__", read("matmul_io")).Replace(read("gemm"))
	return src + "\n" + pre, nil
}
