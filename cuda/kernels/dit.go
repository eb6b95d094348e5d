package kernels

import "fmt"

// The Z-Image transformer's kernels (dit.cu), launched by
// diffusion/cudadev. Activations into products are f16 ([rows][cols] row
// major), the residual stream and norms' inputs f32.
const (
	// DiTGemmPrefix + DiTGemmHalf|Float|FloatBias|GLU + DiTGemmTiling(N):
	// Y = A·Wᵀ, A [M][K] f16, W [N][K] f16; arguments (Y, A, W, bias, M,
	// N, K, ldy); K a multiple of DiTGemmBK, N even, A, W 16-byte aligned.
	DiTGemmPrefix = "ck_dit_gemm_"
	DiTGemmHalf   = "h"   // Y f16 [M][ldy]
	DiTGemmFloat  = "f"   // Y f32
	DiTGemmBias   = "fb"  // Y f32, + bias[n]
	DiTGemmGLU    = "glu" // Y f16 [M][ldy], column j = SiLU(c[2j])·c[2j+1]
	// DiTAttnName(head dim 32, 64, 128): arguments (out, qkv, n, heads,
	// ld, ldo, scale): non-causal attention over n rows of qkv [n][ld] (q,
	// k, v at columns 0, heads·hd, 2·heads·hd) into out [n][ldo].
	DiTAttnPrefix = "ck_dit_attn_"
	// DiTNorm: (out f16, x, w, scale, D, eps, mode 0 RMS | 1 LayerNorm), a row a block.
	DiTNorm = "ck_dit_norm"
	// DiTNormAdd: (u, x, w, gate, h, w2, s2, D, eps), a row a block.
	DiTNormAdd = "ck_dit_norm_add"
	// DiTQKRope: (qkv, rope, qn, kn, rows, heads, hd, ld, eps).
	DiTQKRope = "ck_dit_qkrope"
)

// DiTGemmBK is the K a product's K must be a multiple of.
const DiTGemmBK = 64

const (
	ditGemmBM   = 128 // both tilings' block tile
	ditGemmBN   = 128
	ditAttnRows = 64 // query rows a block (4 warps)
	ditAttnKeys = 64
)

// DiTGemmTiling is the suffix of the ck_dit_gemm_<mode>_* entry for a
// product of N output columns: "_b" (K tiles of 32, 5 stages) where N ≤
// 4096, else "_a" (K tiles of 64, 3 stages); measured on the H200 at
// M 4128 (1024² Z-Image).
func DiTGemmTiling(N int) string {
	if N <= 4096 {
		return "_b"
	}
	return "_a"
}

// DiTGemmLaunch is the geometry of ck_dit_gemm_<mode><DiTGemmTiling(N)>
// for Y [M][N].
func DiTGemmLaunch(M, N int) Geometry { return DiTGemmLaunchAs(M, N, DiTGemmTiling(N)) }

// DiTGemmLaunchAs is the geometry of ck_dit_gemm_<mode><tiling>.
func DiTGemmLaunchAs(M, N int, tiling string) Geometry {
	sh := 3 * (ditGemmBM + ditGemmBN) * 64 * 2
	if tiling == "_b" {
		sh = 5 * (ditGemmBM + ditGemmBN) * 32 * 2
	}
	return geo(cdiv(M, ditGemmBM), cdiv(N, ditGemmBN), 1, 128, uint32(sh))
}

// DiTAttnLaunch is the geometry of DiTAttnName(hd) over n rows: 64 query
// rows a block (128 for head dim 128), 4 warps, shared memory for two
// key/value tiles (and the block's queries at 128).
func DiTAttnLaunch(n, heads, hd int) Geometry {
	if hd == 128 {
		return geo(cdiv(n, 128), uint32(heads), 1, 128, uint32((128+2*2*ditAttnKeys)*(hd+8)*2))
	}
	return geo(cdiv(n, ditAttnRows), uint32(heads), 1, 128, uint32(2*2*ditAttnKeys*(hd+8)*2))
}

// DiTAttnName is the attention kernel for head dimension hd, or an error
// naming the ones there are.
func DiTAttnName(hd int) (string, error) {
	switch hd {
	case 32, 64:
		return fmt.Sprintf("%s%d", DiTAttnPrefix, hd), nil
	case 128:
		return "ck_dit_attn2_128", nil
	}
	return "", fmt.Errorf("cuda kernels: dit attention for head dim %d (32, 64 or 128)", hd)
}

// DiTRowsLaunch is the geometry of ck_dit_norm and ck_dit_norm_add.
func DiTRowsLaunch(rows int) Geometry { return geo(uint32(rows), 1, 1, 256, 0) }

// DiTQKRopeLaunch is the geometry of ck_dit_qkrope.
func DiTQKRopeLaunch(rows, heads int) Geometry { return geo(cdiv(rows*2*heads, 8), 1, 1, 256, 0) }

// DiTNames are every dit.cu entry.
func DiTNames() []string {
	names := []string{DiTNorm, DiTNormAdd, DiTQKRope}
	for _, m := range []string{DiTGemmHalf, DiTGemmFloat, DiTGemmBias, DiTGemmGLU} {
		names = append(names, DiTGemmPrefix+m+"_a", DiTGemmPrefix+m+"_b")
	}
	for _, hd := range []int{32, 64, 128} {
		n, _ := DiTAttnName(hd)
		names = append(names, n)
	}
	return names
}
