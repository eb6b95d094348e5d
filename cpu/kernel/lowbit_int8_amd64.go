//go:build amd64 && !purego

package kernel

import "github.com/cortiq/cortiq/tensor"

// SIMD Int8 dots of the lowbit codecs (lowbit_int8_amd64.s): bit-identical
// to dotLowbitInt8. nb counts 32-blocks; xs and hs are the activation's
// d·Σq per block and Σq per half block (q8x.s, q8x.hs).

//go:noescape
func dotQ4_1I8AVX2(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ4_1I8VNNI(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ5_0I8AVX2(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ5_0I8VNNI(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ5_1I8AVX2(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ5_1I8VNNI(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotIQ4_NLI8AVX2(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotIQ4_NLI8VNNI(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotMXFP4I8AVX2(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotMXFP4I8VNNI(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ4_KI8AVX2(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ4_KI8VNNI(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ6_KI8AVX2(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ6_KI8VNNI(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ5_KI8AVX2(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ5_KI8VNNI(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ2_KI8AVX2(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ2_KI8VNNI(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ3_KI8AVX2(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotQ3_KI8VNNI(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotIQ4_XSI8AVX2(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

//go:noescape
func dotIQ4_XSI8VNNI(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

// Exact-mode row decoders (bit-identical to tensor.Dequantize); nb counts
// 32-blocks.

//go:noescape
func decQ4_1AVX2(dst *float32, w *byte, nb int)

//go:noescape
func decQ5_0AVX2(dst *float32, w *byte, nb int)

//go:noescape
func decQ5_1AVX2(dst *float32, w *byte, nb int)

//go:noescape
func decIQ4_NLAVX2(dst *float32, w *byte, nb int)

//go:noescape
func decMXFP4AVX2(dst *float32, w *byte, nb int)

//go:noescape
func decQ5_KAVX2(dst *float32, w *byte, nb int)

//go:noescape
func decQ2_KAVX2(dst *float32, w *byte, nb int)

//go:noescape
func decQ3_KAVX2(dst *float32, w *byte, nb int)

//go:noescape
func decIQ4_XSAVX2(dst *float32, w *byte, nb int)

// lowbitDecoders holds each codec's AVX2 row decoder.
var lowbitDecoders = [tensor.NumCodecs]func(dst *float32, w *byte, nb int){
	tensor.Q4_1:   decQ4_1AVX2,
	tensor.Q5_0:   decQ5_0AVX2,
	tensor.Q5_1:   decQ5_1AVX2,
	tensor.Q2_K:   decQ2_KAVX2,
	tensor.Q3_K:   decQ3_KAVX2,
	tensor.Q5_K:   decQ5_KAVX2,
	tensor.IQ4_NL: decIQ4_NLAVX2,
	tensor.IQ4_XS: decIQ4_XSAVX2,
	tensor.MXFP4:  decMXFP4AVX2,
}

// Int8 GEMM tiles of the lowbit codecs (lowbit_gemm_amd64.s).

//go:noescape
func gemmQ5MVNNI(wp *byte, xp *byte, nb int, out *[128]float32)

//go:noescape
func gemmLUT4VNNI(wp *byte, xp *byte, nb int, out *[128]float32, lut *byte)

// lowbitTile is the tile kernel of Int8-mode MatMul for codec c on its
// packed weights (lowbit_pack.go), or nil if c is not packed.
func lowbitTile(c tensor.Codec) func(wp, xp *byte, nb int, out *[128]float32) {
	if !lowbitPackable(c) {
		return nil
	}
	switch {
	case c == tensor.Q5_0:
		return gemmQ8_0VNNI
	case c == tensor.Q4_1:
		return gemmQ4_KVNNI
	case q5Codec(c):
		return gemmQ5MVNNI
	case lut4Codec(c):
		return func(wp, xp *byte, nb int, out *[128]float32) { gemmLUT4VNNI(wp, xp, nb, out, &iq4LUT[0]) }
	}
	return nil
}

type lowbitDot func(w *byte, xq *int8, xd *float32, xs *float32, hs *int32, nb int) float32

// lowbitDots holds each codec's AVX2 and VNNI dot.
var lowbitDots = [tensor.NumCodecs][2]lowbitDot{
	tensor.Q4_1:   {dotQ4_1I8AVX2, dotQ4_1I8VNNI},
	tensor.Q5_0:   {dotQ5_0I8AVX2, dotQ5_0I8VNNI},
	tensor.Q5_1:   {dotQ5_1I8AVX2, dotQ5_1I8VNNI},
	tensor.Q2_K:   {dotQ2_KI8AVX2, dotQ2_KI8VNNI},
	tensor.Q3_K:   {dotQ3_KI8AVX2, dotQ3_KI8VNNI},
	tensor.Q4_K:   {dotQ4_KI8AVX2, dotQ4_KI8VNNI},
	tensor.Q5_K:   {dotQ5_KI8AVX2, dotQ5_KI8VNNI},
	tensor.Q6_K:   {dotQ6_KI8AVX2, dotQ6_KI8VNNI},
	tensor.IQ4_NL: {dotIQ4_NLI8AVX2, dotIQ4_NLI8VNNI},
	tensor.IQ4_XS: {dotIQ4_XSI8AVX2, dotIQ4_XSI8VNNI},
	tensor.MXFP4:  {dotMXFP4I8AVX2, dotMXFP4I8VNNI},
}

// useLowbitInt8 installs the lowbit Int8 kernels (levels AVX2 and up; the
// VNNI dots from AVX512VNNI) and the SIMD row decoders, which the Exact
// MatVec (decodedRows) and MatMul of these codecs use.
func useLowbitInt8(vnni bool) {
	for c, dec := range lowbitDecoders {
		if dec != nil {
			decoders[c] = func(dst []float32, row []byte) {
				if len(dst) > 0 {
					dec(&dst[0], &row[0], len(dst)/32)
				}
			}
		}
	}
	if !lowbitInt8 {
		return
	}
	for c, k := range lowbitDots {
		f := k[0]
		if vnni {
			f = k[1]
		}
		if f == nil {
			continue
		}
		int8Kernels[c] = func(y []float32, data []byte, rb int, qx *q8x) {
			for i := range y {
				y[i] = f(&data[i*rb], &qx.q[0], &qx.d[0], &qx.s[0], &qx.hs[0], len(qx.d))
			}
		}
	}
}
