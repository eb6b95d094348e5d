package shaders

import (
	"fmt"
	"strings"
)

// AttentionTiled is the tiled (flash-style) form of AttentionFull for the
// image DiT's joint attention: the same bindings and uniform
// (AttentionFullParams), many query rows per workgroup.
const AttentionTiled = "attention_tiled"

// AttentionTiledRows is how many query rows one workgroup of
// AttentionTiledSrc takes (its workgroup size).
const AttentionTiledRows = 64

// AttentionTiledSrc is attention_tiled.wgsl for head dimension hd (a
// multiple of 4 up to 256): key tiles of 2048/hd rows (at most 64), so
// the staged keys and values take 16 KiB of workgroup memory, what every
// browser grants. Dispatch (ceil(n/AttentionTiledRows), 1, heads).
func AttentionTiledSrc(hd int) (string, error) {
	if hd <= 0 || hd%4 != 0 || hd > 256 {
		return "", fmt.Errorf("shaders: tiled image attention for head dim %d: want a multiple of 4 up to 256", hd)
	}
	bk := min(64, 2048/hd)
	return strings.NewReplacer("__HD4__", fmt.Sprint(hd/4), "__HD__", fmt.Sprint(hd), "__BK__", fmt.Sprint(bk),
		"__BQ__", fmt.Sprint(AttentionTiledRows), "__TILE__", fmt.Sprint(bk*hd/4)).Replace(read(AttentionTiled)), nil
}
