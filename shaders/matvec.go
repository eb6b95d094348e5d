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

// MatvecCodec reports whether the staged matvec (Matvec, MatvecComb) has
// a form for weights of codec c: a chunk of at most 32 elements that
// divides 256.
func MatvecCodec(c tensor.Codec) bool {
	ch := ChunkOf(c)
	return ch > 0 && ch <= 32 && 256%ch == 0
}

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
	return matvec(c, m, cols, norm, nil)
}

// Comb is the split-K geometry of the attention whose partials a
// MatvecComb stages (attn_combine.wgsl's uniform, fixed per layer).
type Comb struct {
	Heads, HD, Window, SplitLen, MaxSplits int
}

// MatvecCombSharedBytes is the workgroup memory MatvecComb uses.
func MatvecCombSharedBytes(m MatvecShape, cols int, cb Comb) int {
	return MatvecSharedBytes(m, cols) + 8*cb.Heads
}

// MatvecComb is Matvec whose x is attention's output merged from its
// split-K partials (binding 6: attention.wgsl's part buffer) as
// attn_combine.wgsl merges them, bit for bit: the output projection of a
// one-token step then needs no combine dispatch. cols must be
// cb.Heads·cb.HD; bindings as MatmulRowsNorm's (x is bound, not read).
func MatvecComb(c tensor.Codec, m MatvecShape, cols int, cb Comb) (string, error) {
	if cb.Heads <= 0 || cb.HD <= 0 || cb.HD%4 != 0 || cb.Heads*cb.HD != cols || cb.SplitLen <= 0 || cb.MaxSplits <= 0 || cb.Window < 0 {
		return "", fmt.Errorf("shaders: matvec combine %+v over %d inputs", cb, cols)
	}
	return matvec(c, m, cols, false, &cb)
}

func matvec(c tensor.Codec, m MatvecShape, cols int, norm bool, cb *Comb) (string, error) {
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
	prestage := ""
	if cb != nil {
		// Per head: the partials' maximum and the softmax denominator, in
		// attn_combine's order; then each staged vec4 sums its partials'
		// values weighted as attn_combine does and divides by the
		// denominator.
		decl = fmt.Sprintf(`@group(0) @binding(6) var<storage, read> cpart: array<f32>;
const CH: u32 = %du;
const CHD: u32 = %du;
const CWIN: u32 = %du;
const CSL: u32 = %du;
const CMS: u32 = %du;
var<workgroup> cmx: array<f32, %d>;
var<workgroup> cl: array<f32, %d>;`, cb.Heads, cb.HD, cb.Window, cb.SplitLen, cb.MaxSplits, cb.Heads, cb.Heads)
		prestage = `let cpos = step[0] + min(t, cnt - 1u);
    var cspan = cpos + 1u;
    if (CWIN > 0u) {
        cspan = min(cspan, CWIN);
    }
    let ceven = (cspan + CMS - 1u) / CMS;
    let csl = max(1u, (ceven + CSL - 1u) / CSL) * CSL;
    let cns = min((cspan + csl - 1u) / csl, CMS);
    let ctb = min(t, cnt - 1u) * CH;
    for (var h = lid.x; h < CH; h += WG) {
        let cb = (ctb + h) * CMS * (CHD + 2u);
        var mx = -1e30;
        for (var z = 0u; z < cns; z++) {
            mx = max(mx, cpart[cb + z * (CHD + 2u)]);
        }
        var l = 0.0;
        for (var z = 0u; z < cns; z++) {
            let pz = cb + z * (CHD + 2u);
            l += cpart[pz + 1u] * exp(cpart[pz] - mx);
        }
        cmx[h] = mx;
        cl[h] = l;
    }
    workgroupBarrier();`
		stage = `{
            let e0 = 4u * i;
            let h = e0 / CHD;
            let cb = (ctb + h) * CMS * (CHD + 2u) + e0 % CHD;
            var o = vec4<f32>(0.0);
            for (var z = 0u; z < cns; z++) {
                let pz = cb + z * (CHD + 2u);
                let e = exp(cpart[pz - e0 % CHD] - cmx[h]);
                o.x += cpart[pz + 2u] * e;
                o.y += cpart[pz + 3u] * e;
                o.z += cpart[pz + 4u] * e;
                o.w += cpart[pz + 5u] * e;
            }
            v = o / cl[h];
        }`
	}
	src := strings.NewReplacer("__PRESTAGE__", prestage, "__R__", fmt.Sprint(m.Rows), "__S__", fmt.Sprint(m.Sets), "__G__", fmt.Sprint(m.Groups),
		"__WG__", fmt.Sprint(m.Threads()), "__XS__", fmt.Sprint(cols/4),
		"__RED__", fmt.Sprint(64*m.Rows*m.Sets), "__RED2__", fmt.Sprint(8*m.Rows*m.Sets),
		"__CQ__", fmt.Sprint(ChunkOf(c)/4), "__NORMDECL__", decl, "__STAGE__", stage, "__RMS__", rms,
		"__NORMY__", normY, "__NORMU__", normU, "__MATMUL_IO__", read("matmul_io")).Replace(read("matvec"))
	return src + "\n" + pre, nil
}
