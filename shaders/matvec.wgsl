// The decode matvec with x staged in workgroup memory: y[t, o] = Σ_i
// W[o, i]·x[t, i] for one token per workgroup row (grid z), same bindings,
// uniform and epilogue as matmul.wgsl (modes 0/1/2, bias, softcap), the
// same partial sums in the same order per output.
//
// Why: matmul.wgsl's decode workgroups each read the whole x row (and with
// a fused RMSNorm its norm weights too) for only __R__ rows of weights, so
// for a q4_0 weight of 16k rows the x side moved three times the weight's
// bytes through L1 and the fused norm ran at 40% of the plain kernel's
// speed. Here a workgroup stages x once (normalized, with the fused norm)
// and then walks __G__ groups of __S__·__R__ rows: __S__ sets of 64
// threads, each thread __R__ rows at a time with one 16-byte load per row
// per chunk, x read from workgroup memory.
//
// The fused-norm variant multiplies by RMSNorm(x): it stages x·w (w the
// norm weights of binding 6, plus one when act bit 1 is set) and scales
// each sum by 1/sqrt(mean(x²) + eps), eps the uniform's last field.
// The combine variant (MatvecComb) stages x as attn_combine.wgsl would
// write it, from attention's split-K partials (binding 6), so a one-token
// step's output projection spends no combine dispatch.
// Dispatch (min(g, 65535), ceil(g/65535), tokens), g = ceil(rows / (__G__·__S__·__R__)).
__MATMUL_IO__
__NORMDECL__

const R: u32 = __R__u;
const S: u32 = __S__u;
const G: u32 = __G__u;
const WG: u32 = __WG__u;
var<workgroup> xs: array<vec4<f32>, __XS__>;
var<workgroup> red: array<f32, __RED__>; // S·R·64 partial sums
var<workgroup> red2: array<f32, __RED2__>; // S·R·8

@compute @workgroup_size(__WG__)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    codec_init(lid.x, WG);
    let wgi = wg.x + wg.y * nwg.x;
    var base = 0u;
    var cnt = step[1];
    if (p.sel == 1u) {
        base = step[2];
        cnt = step[3];
    } else if (p.sel == 2u) {
        cnt = step[3];
    }
    let t = wg.z;
    let c4 = p.cols / 4u;
    // Tokens past the end stage the last token's x and write nothing.
    let xb = (base + min(t, cnt - 1u)) * c4;
    var ss = 0.0;
    __PRESTAGE__
    for (var i = lid.x; i < c4; i += WG) {
        var v = x[xb + i];
        __STAGE__
        xs[i] = v;
    }
    __RMS__
    workgroupBarrier();

    let s = lid.x / 64u;
    let lane = lid.x % 64u;
    let nc = p.cols / CHUNK;
    for (var gi = 0u; gi < G; gi++) {
        let row0 = ((wgi * G + gi) * S + s) * R;
        // Rows past the end read the last row again (in bounds, uniform
        // control flow) and are not written.
        var rb: array<u32, __R__>;
        for (var r = 0u; r < R; r++) {
            rb[r] = min(row0 + r, p.rows - 1u) * p.cols;
        }
        var acc: array<f32, __R__>;
        for (var r = 0u; r < R; r++) {
            acc[r] = 0.0;
        }
        for (var j = lane; j < nc; j += 64u) {
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
            var part: array<f32, __R__>;
            for (var r = 0u; r < R; r++) {
                part[r] = 0.0;
            }
            var xsum = vec4<f32>(0.0);
            for (var q = 0u; q < CHUNK / 4u; q++) {
                let xv = xs[xo + q];
                if (AFFINE) {
                    xsum += xv;
                }
                for (var r = 0u; r < R; r++) {
                    part[r] += dot(wv[r][q], xv);
                }
            }
            let xt = (xsum.x + xsum.y) + (xsum.z + xsum.w);
            for (var r = 0u; r < R; r++) {
                acc[r] += ws[r] * part[r] - wm[r] * xt;
            }
        }
        for (var r = 0u; r < R; r++) {
            red[(s * R + r) * 64u + lane] = acc[r];
        }
        workgroupBarrier();
        for (var i = lid.x; i < S * R * 8u; i += WG) {
            let b = (i / 8u) * 64u + (i % 8u) * 8u;
            red2[i] = ((red[b] + red[b + 1u]) + (red[b + 2u] + red[b + 3u])) +
                      ((red[b + 4u] + red[b + 5u]) + (red[b + 6u] + red[b + 7u]));
        }
        workgroupBarrier();
        for (var i = lid.x; i < S * R; i += WG) {
            let row = ((wgi * G + gi) * S) * R + i; // i = set·R + r
            let b = i * 8u;
            var y = ((red2[b] + red2[b + 1u]) + (red2[b + 2u] + red2[b + 3u])) +
                    ((red2[b + 4u] + red2[b + 5u]) + (red2[b + 6u] + red2[b + 7u]));
            __NORMY__
            if (p.mode == 2u) {
                // Interleaved gate/up rows: the gate row is even, its up
                // row the next one (R is even, so both are this thread's).
                if (row < p.rows && t < cnt && row % 2u == 0u) {
                    let c = b + 8u;
                    var u = ((red2[c] + red2[c + 1u]) + (red2[c + 2u] + red2[c + 3u])) +
                            ((red2[c + 4u] + red2[c + 5u]) + (red2[c + 6u] + red2[c + 7u]));
                    __NORMU__
                    store_gated(row, t, y, u);
                }
            } else if (row < p.rows && t < cnt) {
                store(row, t, y);
            }
        }
        workgroupBarrier();
    }
}
