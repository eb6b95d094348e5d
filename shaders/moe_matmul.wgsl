// Expert matvecs of a routed MoE FFN over stacked expert banks, reading only
// the rows of the experts the router picked (sel, [ntok*k], from moe_route).
// Workgroup (row, token t) loops over the token's k picks; for pick j
// (slot = t*k + j, expert e = sel[slot]):
//   gu 1: the bank holds, per expert, its gate rows then its up rows
//         (2*rows rows of cols); out[slot*rows + row] = act(g)·u over input
//         row t (see gated for act).
//   gu 0: the bank holds rows rows per expert; out[slot*rows + row] =
//         W_e[row]·x[slot] (the down projection of each pick's activation).
// Dispatch (min(rows, 65535), ceil(rows/65535), ntok).
// 48 bytes, the largest parameter block: see hybridParam in webgpu/hybrid.go.
//!P ExpertParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read> sel: array<u32>;
@group(0) @binding(6) var<storage, read> bias: array<f32>;

var<workgroup> red: array<f32, 128>;

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

fn dotrow(r: u32, xrow: u32, lid: u32) -> f32 {
    let c4 = p.cols / 4u;
    let rbase = r * p.cols;
    var acc = 0.0;
    for (var j = lid; j < p.cols / CHUNK; j += 64u) {
        var wv = fetchc(rbase + j * CHUNK, p.soff);
        let xb = xrow * c4 + j * (CHUNK / 4u);
        for (var q = 0u; q < CHUNK / 4u; q++) {
            acc += dot(wv[q], x[xb + q]);
        }
    }
    return acc;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    codec_init(lid.x, 64u);
    let row = wg.x + wg.y * nwg.x;
    let t = wg.z;
    let live = row < p.rows && t < step[1];
    for (var j = 0u; j < p.k; j++) {
        let slot = t * p.k + j;
        var a = 0.0;
        var b = 0.0;
        if (live) {
            let e = sel[slot];
            if (p.gu == 1u) {
                a = dotrow(e * 2u * p.rows + row, t, lid.x);
                b = dotrow(e * 2u * p.rows + p.rows + row, t, lid.x);
            } else {
                a = dotrow(e * p.rows + row, slot, lid.x);
            }
        }
        red[lid.x] = a;
        red[64u + lid.x] = b;
        workgroupBarrier();
        for (var s = 32u; s > 0u; s >>= 1u) {
            if (lid.x < s) {
                red[lid.x] += red[lid.x + s];
                red[64u + lid.x] += red[64u + lid.x + s];
            }
            workgroupBarrier();
        }
        if (lid.x == 0u && live) {
            let e = sel[slot];
            var y = red[0];
            if (p.gu == 1u) {
                var u = red[64];
                if (p.has_bias == 1u) {
                    y += bias[e * 2u * p.rows + row];
                    u += bias[e * 2u * p.rows + p.rows + row];
                }
                y = gated(y, u);
            } else if (p.has_bias == 1u) {
                y += bias[e * p.rows + row];
            }
            out[slot * p.rows + row] = y;
        }
        workgroupBarrier();
    }
}
