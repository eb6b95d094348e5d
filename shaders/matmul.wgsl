// y[t, o] = Σ_i W[o, i]·x[t, i] (+ bias[o]) for one weight of any codec
// (the codec prelude defines fetchc, which returns CHUNK consecutive
// elements from one 16-byte load). One workgroup of 64 threads computes
// __R__ consecutive output rows for a block of __TB__ tokens: each thread
// walks its share of the inner dimension, and per CHUNK issues __R__
// independent 16-byte weight loads (one per row) that share one read of x,
// then does __R__ x __TB__ dot products from registers. So a weight row is
// read once per token block and x once per __R__ rows: __TB__ = 1 is the
// decode matvec, larger blocks the prefill GEMM. The partial sums meet in a
// two-level reduction (two barriers). Dispatch (min(g, 65535),
// ceil(g/65535), ceil(ntok/__TB__)) with g = ceil(rows/__R__).
//
// Which rows of x: sel 0 = rows 0..step.ntok, sel 1 = the head rows
// step[2]..step[2]+step[3], sel 2 = rows 0..step[3]. Output row t (relative).
// mode 0: out = softcap(alpha * y); mode 1: out += alpha * y (residual add);
// mode 2: the rows are interleaved gate/up pairs of a gated FFN (R even)
// and out[row/2] = act(y_gate) * y_up, act bit 0: 0 = SiLU, 1 = GELU (tanh).
//
// The fused-norm variant (MatmulRowsNorm) multiplies by RMSNorm(x) instead
// of x: it reads the raw row, its norm weights from binding 6 (plus one
// when act bit 1 is set, Gemma's 1+w) and eps from the last field, and
// scales each sum by 1/sqrt(mean(x²) + eps) from the sums of squares its
// threads gather while reading x: the norm costs no dispatch and no pass of
// its own.
// Output element (t, o) is out[out_off + t*out_stride + o], so q/k/v or
// gate/up projections can write side by side into one activation row.
__MATMUL_IO__
__NORMDECL__

const TB: u32 = __TB__u;
const R: u32 = __R__u;
const NO: u32 = __NO__u; // R * TB outputs per workgroup
const NN: u32 = __NN__u; // sums per thread: the outputs, then (fused norm) TB sums of squares
var<workgroup> red: array<f32, __RED__>; // NN * 64 partial sums
var<workgroup> red2: array<f32, __RED2__>; // NN * 8

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    codec_init(lid.x, 64u);
    let row0 = (wg.x + wg.y * nwg.x) * R;
    var base = 0u;
    var cnt = step[1];
    if (p.sel == 1u) {
        base = step[2];
        cnt = step[3];
    } else if (p.sel == 2u) {
        cnt = step[3];
    }
    let t0 = wg.z * TB;
    var acc: array<f32, __NN__>;
    for (var k = 0u; k < NN; k++) {
        acc[k] = 0.0;
    }
    // Rows past the end read the last row again (in bounds, uniform
    // control flow) and are not written.
    var rb: array<u32, __R__>;
    for (var r = 0u; r < R; r++) {
        rb[r] = min(row0 + r, p.rows - 1u) * p.cols;
    }
    // Tokens past the end read the last valid token's x.
    var xt: array<u32, __TB__>;
    let c4 = p.cols / 4u;
    for (var k = 0u; k < TB; k++) {
        xt[k] = (base + min(t0 + k, cnt - 1u)) * c4;
    }
    if (row0 < p.rows && t0 < cnt) {
        let nc = p.cols / CHUNK;
        for (var j = lid.x; j < nc; j += 64u) {
            // Quantized values, their chunk's scale applied once to the
            // chunk's sum: the decode matvec of a 4-bit weight is bound by
            // unpacking arithmetic, and a multiply per element was a fifth
            // of it.
            var wv: array<array<vec4<f32>, __CQ__>, __R__>;
            var ws: array<f32, __R__>;
            var wm: array<f32, __R__>;
            for (var r = 0u; r < R; r++) {
                wv[r] = fetchq(rb[r] + j * CHUNK, p.soff);
                let sm = chunkscales(rb[r] + j * CHUNK, p.soff);
                ws[r] = sm.x;
                wm[r] = sm.y;
            }
            let xo = j * (CHUNK / 4u);
            for (var k = 0u; k < TB; k++) {
                var part: array<f32, __R__>;
                for (var r = 0u; r < R; r++) {
                    part[r] = 0.0;
                }
                var xsum = vec4<f32>(0.0);
                for (var q = 0u; q < CHUNK / 4u; q++) {
                    __XLOAD__
                    if (AFFINE) {
                        xsum += xv;
                    }
                    for (var r = 0u; r < R; r++) {
                        part[r] += dot(wv[r][q], xv);
                    }
                }
                let xs = (xsum.x + xsum.y) + (xsum.z + xsum.w);
                for (var r = 0u; r < R; r++) {
                    acc[r * TB + k] += ws[r] * part[r] - wm[r] * xs;
                }
            }
        }
    }
    for (var k = 0u; k < NN; k++) {
        red[k * 64u + lid.x] = acc[k];
    }
    workgroupBarrier();
    for (var i = lid.x; i < NN * 8u; i += 64u) {
        let b = (i / 8u) * 64u + (i % 8u) * 8u;
        red2[i] = ((red[b] + red[b + 1u]) + (red[b + 2u] + red[b + 3u])) +
                  ((red[b + 4u] + red[b + 5u]) + (red[b + 6u] + red[b + 7u]));
    }
    workgroupBarrier();
    for (var i = lid.x; i < NO; i += 64u) {
        let r = i / TB;
        let k = i % TB;
        let row = row0 + r;
        let t = t0 + k;
        if (p.mode == 2u) {
            if (row < p.rows && t < cnt && r % 2u == 0u) {
                let b = i * 8u;
                let c = b + TB * 8u; // the up row: r + 1, same token
                var g = ((red2[b] + red2[b + 1u]) + (red2[b + 2u] + red2[b + 3u])) +
                        ((red2[b + 4u] + red2[b + 5u]) + (red2[b + 6u] + red2[b + 7u]));
                var u = ((red2[c] + red2[c + 1u]) + (red2[c + 2u] + red2[c + 3u])) +
                        ((red2[c + 4u] + red2[c + 5u]) + (red2[c + 6u] + red2[c + 7u]));
                __NORMGU__
                store_gated(row, t, g, u);
            }
        } else if (row < p.rows && t < cnt) {
            let b = i * 8u;
            var y = ((red2[b] + red2[b + 1u]) + (red2[b + 2u] + red2[b + 3u])) +
                    ((red2[b + 4u] + red2[b + 5u]) + (red2[b + 6u] + red2[b + 7u]));
            __NORMY__
            store(row, t, y);
        }
    }
}
