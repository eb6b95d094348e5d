package webgpu

import (
	"fmt"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// The tiled prefill GEMM (shaders.Gemm) has the matmul kernel's bindings
// (shaders.KMatmul), uniform and semantics; only its grid differs: x/y over
// tiles of rows (split past 65535 like matmulGrid), z over tiles of tokens.
//
// Tuning.GemmLargeRows is the weight height from which gemmFor picks
// shaders.GemmLarge (default 8192): on an H200 at 512 tokens it ran the
// 16384-row fused gate/up weight about 15% faster than the default tiling,
// and the 2048..3072-row weights slower (too few workgroups to fill the
// GPU).

// gemmMinTokens is the step length from which matmuls use the tiled GEMM:
// a tile of 64 tokens mostly idles on fewer, where the row-blocked matmul
// kernel does better.
const gemmMinTokens = 128

// gemmPipe is the default tiled GEMM for device codec c; dispatch it over
// gemmGrid.
func (b *Backend) gemmPipe(c tensor.Codec) (*gpu.Pipeline, error) {
	return gemmPipeline(b.dev, c)
}

func gemmPipeline(d *gpu.Device, c tensor.Codec) (*gpu.Pipeline, error) {
	return d.PipelineOf("gemm/"+c.String(), func() (string, error) { return shaders.Gemm(c) }, kinds(shaders.KMatmul))
}

// gemmGrid is the workgroup grid of gemmPipe(c) for rows output rows and
// ntok tokens.
func gemmGrid(c tensor.Codec, rows, ntok int) (x, y, z uint32) {
	tr, tt := shaders.GemmTile(c)
	return tileGrid(tr, tt, rows, ntok)
}

func tileGrid(tileRows, tileTokens, rows, ntok int) (x, y, z uint32) {
	x, y = matmulGrid(rows, tileRows)
	return x, y, uint32((ntok + tileTokens - 1) / tileTokens)
}

// gemmKernel is a tiled GEMM pipeline with the tile it covers.
type gemmKernel struct {
	p                    *gpu.Pipeline
	tileRows, tileTokens int
}

// grid is the workgroup grid for rows output rows and ntok tokens.
func (k gemmKernel) grid(rows, ntok int) (x, y, z uint32) {
	return tileGrid(k.tileRows, k.tileTokens, rows, ntok)
}

// gemmFor is the tiled GEMM suited to a weight of codec c with rows
// output rows: gemmPipe's, or shaders.GemmLarge from Tuning.GemmLargeRows on.
func (b *Backend) gemmFor(c tensor.Codec, rows int) (gemmKernel, error) {
	if rows < b.tune.GemmLargeRows {
		p, err := b.gemmPipe(c)
		tr, tt := shaders.GemmTile(c)
		return gemmKernel{p, tr, tt}, err
	}
	g := shaders.GemmLarge()
	p, err := b.dev.PipelineOf(fmt.Sprintf("gemm/%s/large", c), func() (string, error) { return shaders.GemmTiled(c, g) }, kinds(shaders.KMatmul))
	return gemmKernel{p, g.Rows, g.Tokens}, err
}
