// y = x·Wᵀ (+ b) for rows [row0, row0+rows) of x [*, in] into the same
// rows of y [*, out], W [out, in] in the codec of the prelude appended to
// this module (fetch4 over w; in a multiple of the codec's block). One
// invocation per output value over the (x, y) grid of 256-wide workgroups.
//!P LinearParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let idx = (wg.y * nwg.x + wg.x) * 256u + lid.x;
    if (idx >= p.rows * p.n_out) {
        return;
    }
    let t = p.row0 + idx / p.n_out;
    let o = idx % p.n_out;
    let xb = t * p.n_in;
    let wb = o * p.n_in;
    var acc = 0.0;
    for (var i = 0u; i < p.n_in; i += 4u) {
        let xv = vec4<f32>(x[xb + i], x[xb + i + 1u], x[xb + i + 2u], x[xb + i + 3u]);
        acc += dot(fetch4(wb + i, p.soff), xv);
    }
    if (p.has_bias == 1u) {
        acc += bias[o];
    }
    y[t * p.n_out + o] = acc;
}
