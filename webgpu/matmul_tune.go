package webgpu

import (
	"fmt"
	"github.com/cortiq/cortiq/gpu"

	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// Tuning holds the backend's kernel-geometry knobs, for timing the kernels
// on a new GPU (A/B runs). Each field's zero value is the measured default,
// so Tuning{} is what the backend runs unless asked otherwise. The library
// reads no environment: the CLI builds a Tuning from CORTIQ_MATVEC,
// CORTIQ_MATVEC_SHAPE, CORTIQ_MV_ROWS, CORTIQ_GEMM_ROWS, CORTIQ_GEMM_TB,
// CORTIQ_GEMM_LARGE_ROWS, CORTIQ_ATTN_BLOCK, CORTIQ_SMALL_STEPS,
// CORTIQ_SMALL_ROWS and CORTIQ_TRACE_STEPS
// (cmd/native/env.go). New refuses a value outside the documented range.
type Tuning struct {
	// Matvec picks the decode matvec: "" stages the x row in workgroup
	// memory (shaders.Matvec) for the codecs where that paid (see
	// stagedCodec) and where the row fits; "rows" keeps the row-blocked
	// kernel everywhere; "all" stages every codec (both for A/B timing).
	Matvec string
	// MatvecShape, when Rows > 0, is the staged matvec's work per
	// workgroup for every weight instead of the choice by weight height
	// (see matvecShape). Rows must be even (interleaved gate/up rows),
	// Sets and Groups at least 1.
	MatvecShape shaders.MatvecShape
	// MVRows is the output rows per workgroup of the row-blocked decode
	// matvec (1..16; 0 = 4). More rows per workgroup put more independent
	// 16-byte weight loads in flight per thread and share each read of x.
	MVRows int
	// GemmRows and GemmTB are the output rows and tokens per workgroup of
	// the row-blocked prefill matmul and the routed experts' prefill
	// kernel (1..16 each; 0 = 8 and 4).
	GemmRows, GemmTB int
	// GemmLargeRows is the weight height from which prefill takes the
	// large GEMM tile (shaders.GemmLarge; at least 1; 0 = 8192).
	GemmLargeRows int
	// AttnBlock is the tokens per workgroup of the tiled prefill attention
	// (16..256; 0 = shaders.AttnPrefillBlock).
	AttnBlock int
	// AttnPrep is where a one-token step's qkv prep (q/k norm, RoPE, the
	// KV append) runs: "" its own dispatch before attention, as longer
	// steps do; "fused" inside the attention kernel (shaders.AttentionPrep:
	// one dispatch less per layer, the same bits). Fused lost on an H200
	// (llama-1b q4_0 decode 810 → 743 tok/s after 512 tokens, 663 → 607
	// after 2048: every split's workgroup redoes the prep's loads and
	// barriers before its first key), so it is not the default.
	AttnPrep string
	// AttnCombine is where a one-token step merges split-K attention's
	// partials: "" in the output projection's staged matvec
	// (shaders.MatvecComb: one dispatch less per layer, the same bits)
	// where it fits, "separate" attn_combine's own dispatch. Measured on an
	// H200 (llama-1b q4_0 decode): 786 → 810 tok/s after 512 tokens, 658 →
	// 663 after 2048.
	AttnCombine string
	// SmallSteps picks the kernels of steps of 2..16 tokens (speculative
	// verification, see small.go): "" the one-token graph with batched
	// matvecs, "off" the prefill kernels (for A/B timing).
	SmallSteps string
	// SmallRows is the output rows per workgroup of the small steps'
	// batched matvec (even, 2..16; 0 = 4, or 2 where 4 does not fit).
	SmallRows int
	// TraceSteps prints the host's share of each prefill step to stderr:
	// encoding and submitting, then waiting and reading back.
	TraceSteps bool
	// GPU is what the device is opened with when the registered opener
	// opens it (profiling aids: gpu.Profile); the zero value profiles
	// nothing.
	GPU gpu.Options
}

// DefaultTuning is the tuning Tuning{} stands for, every default filled in.
func DefaultTuning() Tuning {
	return Tuning{MVRows: 4, GemmRows: 8, GemmTB: 4, GemmLargeRows: 8192, AttnBlock: shaders.AttnPrefillBlock}
}

// resolve fills t's zero fields with the defaults and checks the others.
func (t Tuning) resolve() (Tuning, error) {
	d := DefaultTuning()
	set := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	set(&t.MVRows, d.MVRows)
	set(&t.GemmRows, d.GemmRows)
	set(&t.GemmTB, d.GemmTB)
	set(&t.GemmLargeRows, d.GemmLargeRows)
	set(&t.AttnBlock, d.AttnBlock)
	for _, c := range []struct {
		name      string
		v, lo, hi int
	}{
		{"MVRows", t.MVRows, 1, 16},
		{"GemmRows", t.GemmRows, 1, 16},
		{"GemmTB", t.GemmTB, 1, 16},
		{"GemmLargeRows", t.GemmLargeRows, 1, 1 << 30},
		{"AttnBlock", t.AttnBlock, 16, 256},
	} {
		if c.v < c.lo || c.v > c.hi {
			return t, fmt.Errorf("webgpu: Tuning.%s %d: want %d..%d (or 0 for the default)", c.name, c.v, c.lo, c.hi)
		}
	}
	if t.AttnPrep != "" && t.AttnPrep != "fused" {
		return t, fmt.Errorf("webgpu: Tuning.AttnPrep %q: want \"\" or \"fused\"", t.AttnPrep)
	}
	if t.AttnCombine != "" && t.AttnCombine != "separate" {
		return t, fmt.Errorf("webgpu: Tuning.AttnCombine %q: want \"\" or \"separate\"", t.AttnCombine)
	}
	if t.SmallRows != 0 && (t.SmallRows < 2 || t.SmallRows > 16 || t.SmallRows%2 != 0) {
		return t, fmt.Errorf("webgpu: Tuning.SmallRows %d: want an even 2..16 (or 0 for the default)", t.SmallRows)
	}
	switch t.SmallSteps {
	case "", "off":
	default:
		return t, fmt.Errorf("webgpu: Tuning.SmallSteps %q: want \"\" or \"off\"", t.SmallSteps)
	}
	switch t.Matvec {
	case "", "rows", "all":
	default:
		return t, fmt.Errorf("webgpu: Tuning.Matvec %q: want \"\", \"rows\" or \"all\"", t.Matvec)
	}
	if sh := t.MatvecShape; sh != (shaders.MatvecShape{}) && (sh.Rows <= 0 || sh.Rows%2 != 0 || sh.Sets < 1 || sh.Groups < 1) {
		return t, fmt.Errorf("webgpu: Tuning.MatvecShape %d,%d,%d: want an even Rows and Sets, Groups of at least 1", sh.Rows, sh.Sets, sh.Groups)
	}
	return t, nil
}

// stagedCodec reports whether decode matvecs over weights of codec c are
// staged: for q4_0 a workgroup's x row outweighs its weight rows (two bytes
// of x per weight byte with 4 rows per workgroup, three with the fused
// norm), and staging paid (llama-1b q4_0 decode 766 → 805 tok/s on an
// H200); for q8_0 it lost (794 → 758: the lm head and the wide weights ran
// slower), and for a q4_K_M file too (486 → 416, q6_K 569 → 466; timed
// before RepackQ4_K's scale layout, which may change the q4_K verdict).
// Tuning.Matvec "rows" stages none, "all" every codec.
func (t *Tuning) stagedCodec(c tensor.Codec) bool {
	switch t.Matvec {
	case "rows":
		return false
	case "all":
		return true
	}
	return c == tensor.Q4_0
}

// matvecShape is the staged matvec's work per workgroup for a weight of
// rows rows. Measured on an H200 over llama-1b's q4_0 shapes (BenchmarkMatvecVariants):
// 256 threads of 4 rows each in one pass suit the weights of a few
// thousand rows (q/k/v 5.6 µs vs 5.9 with the fused norm, down 5.9 vs
// 7.7); for the wide ones (gate/up, the head) 128 threads of 8 rows in two
// passes halve the workgroups that stage x (gate/up with the fused norm
// 5.8 µs vs 15, the lm head 56 vs 72). The row count is even, as mode 2
// (interleaved gate/up rows) needs. Tuning.MatvecShape overrides.
func (t *Tuning) matvecShape(rows int) shaders.MatvecShape {
	if t.MatvecShape.Rows > 0 {
		return t.MatvecShape
	}
	if rows >= 8192 {
		return shaders.MatvecShape{Rows: 8, Sets: 2, Groups: 2}
	}
	return shaders.MatvecShape{Rows: 4, Sets: 4, Groups: 1}
}

// matmulGrid is the (x, y) workgroup grid covering rows in blocks of r
// rows, split over y past the 65535 limit of one dimension.
func matmulGrid(rows, r int) (uint32, uint32) {
	g := (rows + r - 1) / r
	return uint32(min(g, 65535)), uint32((g + 65534) / 65535)
}
