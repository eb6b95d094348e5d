package shaders

import (
	"fmt"
	"strings"
)

// AttentionTiled is the tiled (flash-style) form of AttentionFull for the
// image DiT's joint attention: the same bindings and uniform
// (AttentionFullParams), many query rows per workgroup.
const AttentionTiled = "attention_tiled"

// Conv2DTiled is conv2d_tiled.wgsl: Conv2D's convolution (its bindings,
// uniform and sums) as a tiled implicit GEMM, for input channels in
// multiples of 16.
const Conv2DTiled = "conv2d_tiled"

// NormAdd is norm_add.wgsl: the DiT block's gated residual of a normed
// output and the next norm in one pass.
const NormAdd = "norm_add"

// NormAddParams is norm_add.wgsl's P.
type NormAddParams struct {
	Width, Row0, Rows uint32
	Eps, Eps2         float32
	HasW, HasGate     Flag
	GateOff           uint32
	HasNext, HasW2    Flag
	HasScale          Flag
	ScaleOff          uint32
}

func (NormAddParams) Kernel() string { return NormAdd }

// AttentionTiledRows is how many query rows one workgroup of
// AttentionTiledSrc takes (its workgroup size).
const AttentionTiledRows = 64

// AttentionTiledSrc is attention_tiled.wgsl for head dimension hd (a
// multiple of 4 up to 256) with AttentionTiledSplit(hd) threads per row.
func AttentionTiledSrc(hd int) (string, error) {
	return AttentionTiledSplitSrc(hd, AttentionTiledSplit(hd))
}

// AttentionTiledSplit is the threads per row AttentionTiledSrc uses: as
// many as keep a thread's share of the output at 16 vec4s (one for head
// dims up to 64, two at 128, the Z-Image width, four at 256).
func AttentionTiledSplit(hd int) int { return max(1, hd/64) }

// AttentionTiledSplitSrc is attention_tiled.wgsl for head dimension hd
// with split threads per row (1, 2, 4 or 8, dividing hd/4): key tiles of
// 2048/hd rows (at most 64), so the staged keys and values take 16 KiB of
// workgroup memory, what every browser grants. Dispatch
// (ceil(n/AttentionTiledRows), 1, heads).
func AttentionTiledSplitSrc(hd, split int) (string, error) {
	if hd <= 0 || hd%4 != 0 || hd > 256 {
		return "", fmt.Errorf("shaders: tiled image attention for head dim %d: want a multiple of 4 up to 256", hd)
	}
	if split != 1 && split != 2 && split != 4 && split != 8 || (hd/4)%split != 0 {
		return "", fmt.Errorf("shaders: tiled image attention for head dim %d: %d threads per row (1, 2, 4 or 8 dividing %d)", hd, split, hd/4)
	}
	bk := min(64, 2048/hd)
	return strings.NewReplacer("__HD4__", fmt.Sprint(hd/4), "__HD__", fmt.Sprint(hd), "__BK__", fmt.Sprint(bk),
		"__BQ__", fmt.Sprint(AttentionTiledRows), "__TILE__", fmt.Sprint(bk*hd/4), "__SPLIT__", fmt.Sprint(split),
		"__OD4__", fmt.Sprint(hd/4/split), "__NT__", fmt.Sprint(AttentionTiledRows*split)).Replace(read(AttentionTiled)), nil
}
