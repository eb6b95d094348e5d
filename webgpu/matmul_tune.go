package webgpu

import (
	"os"
	"strconv"
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
