package shaders

import (
	"fmt"
	"strings"

	"github.com/cortiq/cortiq/tensor"
)

// MatvecShape is the work of one workgroup of the staged decode matvec
// (matvec.wgsl): Sets groups of 64 threads, each thread Rows output rows at
// a time, Groups such passes over the staged x.
type MatvecShape struct {
	Rows, Sets, Groups int
}

// RowsPerWorkgroup is the number of output rows one workgroup computes.
func (m MatvecShape) RowsPerWorkgroup() int { return m.Rows * m.Sets * m.Groups }

// Threads is the workgroup size.
func (m MatvecShape) Threads() int { return 64 * m.Sets }

// MatvecSharedBytes is the workgroup memory Matvec(c, m, cols, ...) uses:
// the staged x row and the partial sums.
func MatvecSharedBytes(m MatvecShape, cols int) int {
	return 4*cols + 4*(64+8)*m.Rows*m.Sets
}

// Matvec is the staged decode matvec for weights of codec c with cols
// inputs (the staged row is sized for it), computing m's rows per
// workgroup; norm selects the fused-RMSNorm variant (binding 6 holds the
// norm weights, the uniform's last field eps). Same bindings, uniform and
// epilogue as MatmulRows(c, 1, ·) (MatmulRowsNorm for norm). Mode 2
// (interleaved gate/up rows) needs m.Rows even.
func Matvec(c tensor.Codec, m MatvecShape, cols int, norm bool) (string, error) {
	switch {
	case m.Rows < 1 || m.Rows > 8 || m.Sets < 1 || m.Sets > 4 || m.Groups < 1 || m.Groups > 64:
		return "", fmt.Errorf("shaders: matvec shape %+v out of range", m)
	case cols <= 0 || cols%ChunkOf(c) != 0 || cols%4 != 0:
		return "", fmt.Errorf("shaders: matvec over %d inputs: not a multiple of the %s chunk", cols, c)
	}
	pre, err := codecPreludeShared(c)
	if err != nil {
		return "", err
	}
	decl, stage, rms, normY, normU := "", "", "", "", ""
	if norm {
		decl = "@group(0) @binding(6) var<storage, read> nw: array<vec4<f32>>;"
		stage = `ss += dot(v, v);
        v *= nw[i] + vec4<f32>(f32((p.act >> 1u) & 1u));`
		rms = `red[lid.x] = ss;
    workgroupBarrier();
    if (lid.x < 8u) {
        var a = 0.0;
        for (var i = lid.x * (WG / 8u); i < (lid.x + 1u) * (WG / 8u); i++) {
            a += red[i];
        }
        red2[lid.x] = a;
    }
    workgroupBarrier();
    let rr = 1.0 / sqrt((((red2[0] + red2[1]) + (red2[2] + red2[3])) +
                         ((red2[4] + red2[5]) + (red2[6] + red2[7]))) / f32(p.cols) + p.eps);`
		normY = "y *= rr;"
		normU = "u *= rr;"
	}
	src := strings.NewReplacer("__R__", fmt.Sprint(m.Rows), "__S__", fmt.Sprint(m.Sets), "__G__", fmt.Sprint(m.Groups),
		"__WG__", fmt.Sprint(m.Threads()), "__XS__", fmt.Sprint(cols/4),
		"__RED__", fmt.Sprint(64*m.Rows*m.Sets), "__RED2__", fmt.Sprint(8*m.Rows*m.Sets),
		"__CQ__", fmt.Sprint(ChunkOf(c)/4), "__NORMDECL__", decl, "__STAGE__", stage, "__RMS__", rms,
		"__NORMY__", normY, "__NORMU__", normU, "__MATMUL_IO__", read("matmul_io")).Replace(read("matvec"))
	return src + "\n" + pre, nil
}
