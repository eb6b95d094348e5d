// Softmax attention without a mask over n rows, one head of width d per
// workgroup z: out[i] = Σ_j softmax_j(q[i]·k[j]·scale) v[j], where row i
// of head z starts at (row0 + i)·stride + z·d in q, k, v and out (d ≤
// 1024). One workgroup of 64 per query row: each key's score is a
// workgroup reduction; the softmax is online (running max and sum), each
// invocation accumulating the output channels c ≡ lid (mod 64).
// Dispatch (n, 1, heads) up to 65535 rows, then rows continue in y.
//!P AttentionFullParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

var<workgroup> red: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = wg.y * nwg.x + wg.x;
    if (i >= p.n) {
        return;
    }
    var acc: array<f32, 16>;
    for (var t = 0u; t < 16u; t++) {
        acc[t] = 0.0;
    }
    var m = -3.0e38;
    var l = 0.0;
    let qb = (p.row0 + i) * p.stride + wg.z * p.d;
    for (var j = 0u; j < p.n; j++) {
        let kb = (p.row0 + j) * p.stride + wg.z * p.d;
        var s = 0.0;
        for (var c = lid.x; c < p.d; c += 64u) {
            s += q[qb + c] * k[kb + c];
        }
        red[lid.x] = s;
        workgroupBarrier();
        for (var h = 32u; h > 0u; h >>= 1u) {
            if (lid.x < h) {
                red[lid.x] += red[lid.x + h];
            }
            workgroupBarrier();
        }
        let score = red[0] * p.scale;
        workgroupBarrier();
        let mn = max(m, score);
        let corr = exp(m - mn);
        let e = exp(score - mn);
        l = l * corr + e;
        var t = 0u;
        for (var c = lid.x; c < p.d; c += 64u) {
            acc[t] = acc[t] * corr + e * v[kb + c];
            t++;
        }
        m = mn;
    }
    var t = 0u;
    for (var c = lid.x; c < p.d; c += 64u) {
        out[qb + c] = acc[t] / l;
        t++;
    }
}
