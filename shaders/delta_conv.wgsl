// qwen3_next gated DeltaNet, step 1: the causal depthwise conv + SiLU over
// the [q | k | v] channels (cdim = 2*kh*dk + vh*dv), read from the qkvz
// projection rows (rw wide), which transformers groups per key head:
// [q (dk), k (dk), v (r*dv), z (r*dv)] for each of the kh key heads, r =
// vh/kh. The last k-1 conv inputs per channel stay on the device in state
// ([k-1, cdim], oldest first; zeros at position 0), a ring of `slots`
// windows as in shortconv.wgsl (slot L % slots: the window after L positions).
// out[t*cdim + c] = SiLU(Σ_j taps[c*k+j]·win[j]). Dispatch (ceil(cdim/64), 1, 1).
// 48 bytes, the largest parameter block: see hybridParam in webgpu/hybrid.go.
//!P DeltaConvParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> qkvz: array<f32>;
@group(0) @binding(3) var<storage, read> taps: array<f32>;
@group(0) @binding(4) var<storage, read_write> state: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let c = wg.x * 64u + lid.x;
    if (c >= p.cdim) {
        return;
    }
    let kd = p.kh * p.dk;
    let group = 2u * p.dk + 2u * p.r * p.dv;
    var src: u32;
    if (c < kd) {
        src = (c / p.dk) * group + c % p.dk;
    } else if (c < 2u * kd) {
        let cc = c - kd;
        src = (cc / p.dk) * group + p.dk + cc % p.dk;
    } else {
        let cc = c - 2u * kd;
        let gw = p.r * p.dv;
        src = (cc / gw) * group + 2u * p.dk + cc % gw;
    }
    let pos = step[0];
    let fresh = pos == 0u;
    let ws = (p.k - 1u) * p.cdim;
    let rd = (pos % p.slots) * ws;
    var win: array<f32, 16>;
    for (var j = 0u; j + 1u < p.k; j++) {
        win[j] = select(state[rd + j * p.cdim + c], 0.0, fresh);
    }
    let n = step[1];
    for (var t = 0u; t < n; t++) {
        win[p.k - 1u] = qkvz[t * p.rw + src];
        var acc = 0.0;
        for (var j = 0u; j < p.k; j++) {
            acc += taps[c * p.k + j] * win[j];
        }
        out[t * p.cdim + c] = acc / (1.0 + exp(-acc));
        for (var j = 0u; j + 1u < p.k; j++) {
            win[j] = win[j + 1u];
        }
        if (t + p.slots >= n) {
            let wr = ((pos + t + 1u) % p.slots) * ws;
            for (var j = 0u; j + 1u < p.k; j++) {
                state[wr + j * p.cdim + c] = win[j];
            }
        }
    }
}
