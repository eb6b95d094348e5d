package webgpu

import (
	"fmt"
	"os"
	"strconv"

	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// Matmul geometry. Each workgroup of the matmul kernel computes mvRows
// (decode) or gemmRows x gemmTB (prefill) outputs; more rows per workgroup
// put more independent 16-byte weight loads in flight per thread and share
// each read of x between rows. CORTIQ_MV_ROWS, CORTIQ_GEMM_ROWS and
// CORTIQ_GEMM_TB override them for tuning on a new GPU.
var (
	mvRows   = tuneInt("CORTIQ_MV_ROWS", 4, 1, 16)
	gemmRows = tuneInt("CORTIQ_GEMM_ROWS", 8, 1, 16)
	gemmTB   = tuneInt("CORTIQ_GEMM_TB", 4, 1, 16)
)

// stagedMatvec selects the staged decode matvec (shaders.Matvec) where
// the x row fits workgroup memory; CORTIQ_MATVEC=rows keeps the
// row-blocked kernel everywhere and CORTIQ_MATVEC=all stages every codec
// (both for A/B timing).
var (
	stagedMatvec = os.Getenv("CORTIQ_MATVEC") != "rows"
	stagedAll    = os.Getenv("CORTIQ_MATVEC") == "all"
)

// stagedCodec reports whether decode matvecs over weights of codec c are
// staged: for q4_0 a workgroup's x row outweighs its weight rows (two bytes
// of x per weight byte with 4 rows per workgroup, three with the fused
// norm), and staging paid (llama-1b q4_0 decode 766 → 805 tok/s on an
// H200); for q8_0 it lost (794 → 758: the lm head and the wide weights ran
// slower), and for a q4_K_M file too (486 → 416, q6_K 569 → 466; timed
// before RepackQ4_K's scale layout, which may change the q4_K verdict).
func stagedCodec(c tensor.Codec) bool { return c == tensor.Q4_0 || stagedAll }

// matvecShape is the staged matvec's work per workgroup for a weight of
// rows rows. Measured on an H200 over llama-1b's q4_0 shapes (BenchmarkMatvecVariants):
// 256 threads of 4 rows each in one pass suit the weights of a few
// thousand rows (q/k/v 5.6 µs vs 5.9 with the fused norm, down 5.9 vs
// 7.7); for the wide ones (gate/up, the head) 128 threads of 8 rows in two
// passes halve the workgroups that stage x (gate/up with the fused norm
// 5.8 µs vs 15, the lm head 56 vs 72). The row count is even, as mode 2
// (interleaved gate/up rows) needs. CORTIQ_MATVEC_SHAPE=r,s,g overrides.
func matvecShape(rows int) shaders.MatvecShape {
	if matvecOverride.Rows > 0 {
		return matvecOverride
	}
	if rows >= 8192 {
		return shaders.MatvecShape{Rows: 8, Sets: 2, Groups: 2}
	}
	return shaders.MatvecShape{Rows: 4, Sets: 4, Groups: 1}
}

var matvecOverride = func() shaders.MatvecShape {
	var r, s, g int
	if n, _ := fmt.Sscanf(os.Getenv("CORTIQ_MATVEC_SHAPE"), "%d,%d,%d", &r, &s, &g); n == 3 && r%2 == 0 {
		return shaders.MatvecShape{Rows: r, Sets: s, Groups: g}
	}
	return shaders.MatvecShape{}
}()

// traceSteps (CORTIQ_TRACE_STEPS=1) prints the host's share of each
// prefill step: encoding and submitting, then waiting and reading back.
var traceSteps = os.Getenv("CORTIQ_TRACE_STEPS") == "1"

func tuneInt(env string, def, lo, hi int) int {
	if n, err := strconv.Atoi(os.Getenv(env)); err == nil && n >= lo && n <= hi {
		return n
	}
	return def
}

// matmulGrid is the (x, y) workgroup grid covering rows in blocks of r
// rows, split over y past the 65535 limit of one dimension.
func matmulGrid(rows, r int) (uint32, uint32) {
	g := (rows + r - 1) / r
	return uint32(min(g, 65535)), uint32((g + 65534) / 65535)
}
