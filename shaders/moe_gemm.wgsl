// Prefill variant of moe_matmul: the picks grouped by expert, so one
// workgroup reads a row of one expert once for a block of __TB__ of the
// tokens routed to it. moe_route leaves, after the ntok*k picks (stride*k
// entries), the number of picks of each expert (e entries) and then each
// expert's slots in token order (stride entries per expert). Workgroup
// (row, expert, block) computes out[slot*rows + row] for the block's slots,
// as moe_matmul does (gu 1: act(gate)·up over input row slot/k; gu 0:
// the row over input row slot). Dispatch (rows, e, ceil(ntok/__TB__)).
// 48 bytes, the largest parameter block: see hybridParam in webgpu/hybrid.go.
//!P ExpertParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read> sel: array<u32>;
@group(0) @binding(6) var<storage, read> bias: array<f32>;

const TB: u32 = __TB__u;
var<workgroup> red: array<f32, __RED__>;

fn safe_tanh(v: f32) -> f32 {
    let c = clamp(v, -15.0, 15.0);
    let e = exp(2.0 * c);
    return (e - 1.0) / (e + 1.0);
}

// gated is the expert activation of (gate, up): act(g)·u, act 0 = SiLU,
// 1 = GELU (tanh approximation); 2 = gpt-oss's clamped SwiGLU
// (u clamped to ±limit, g to at most limit, (u+1)·g·sigmoid(alpha·g)).
fn gated(g: f32, u: f32) -> f32 {
    if (p.act == 2u) {
        let gg = min(g, p.limit);
        let uu = clamp(u, -p.limit, p.limit);
        return (uu + 1.0) * (gg / (1.0 + exp(-p.alpha * gg)));
    }
    var av: f32;
    if (p.act == 1u) {
        av = 0.5 * g * (1.0 + safe_tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
    } else {
        av = g / (1.0 + exp(-g));
    }
    return av * u;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    codec_init(lid.x, 64u);
    let row = wg.x;
    let ex = wg.y;
    let s0 = wg.z * TB;
    let cbase = p.stride * p.k;
    let lbase = cbase + p.e + ex * p.stride;
    let cnt = sel[cbase + ex];
    var accA: array<f32, __TB__>;
    var accB: array<f32, __TB__>;
    var xrow: array<u32, __TB__>;
    for (var q = 0u; q < TB; q++) {
        accA[q] = 0.0;
        accB[q] = 0.0;
        xrow[q] = 0u;
        if (s0 + q < cnt) {
            let slot = sel[lbase + s0 + q];
            xrow[q] = select(slot, slot / p.k, p.gu == 1u);
        }
    }
    if (row < p.rows && s0 < cnt) {
        let c4 = p.cols / 4u;
        var ra = (ex * p.rows + row) * p.cols;
        var rb = 0u;
        if (p.gu == 1u) {
            ra = (ex * 2u * p.rows + row) * p.cols;
            rb = ra + p.rows * p.cols;
        }
        for (var j = lid.x; j < p.cols / CHUNK; j += 64u) {
            var wa = fetchc(ra + j * CHUNK, p.soff);
            var wb = wa;
            if (p.gu == 1u) {
                wb = fetchc(rb + j * CHUNK, p.soff);
            }
            for (var q = 0u; q < TB; q++) {
                if (s0 + q < cnt) {
                    let xb = xrow[q] * c4 + j * (CHUNK / 4u);
                    var sa = 0.0;
                    var sb = 0.0;
                    for (var i = 0u; i < CHUNK / 4u; i++) {
                        let xv = x[xb + i];
                        sa += dot(wa[i], xv);
                        sb += dot(wb[i], xv);
                    }
                    accA[q] += sa;
                    accB[q] += sb;
                }
            }
        }
    }
    for (var q = 0u; q < TB; q++) {
        red[(2u * q) * 64u + lid.x] = accA[q];
        red[(2u * q + 1u) * 64u + lid.x] = accB[q];
    }
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if (lid.x < s) {
            for (var q = 0u; q < 2u * TB; q++) {
                red[q * 64u + lid.x] += red[q * 64u + lid.x + s];
            }
        }
        workgroupBarrier();
    }
    if (lid.x < TB && row < p.rows && s0 + lid.x < cnt) {
        let slot = sel[lbase + s0 + lid.x];
        var y = red[(2u * lid.x) * 64u];
        if (p.gu == 1u) {
            var u = red[(2u * lid.x + 1u) * 64u];
            if (p.has_bias == 1u) {
                y += bias[ex * 2u * p.rows + row];
                u += bias[ex * 2u * p.rows + p.rows + row];
            }
            y = gated(y, u);
        } else if (p.has_bias == 1u) {
            y += bias[ex * p.rows + row];
        }
        out[slot * p.rows + row] = y;
    }
}
