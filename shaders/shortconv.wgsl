// LFM2 gated short convolution, after the fused in-projection: a row of bcx
// holds B, C and x (3h wide). Per channel c, the gated input B⊙x goes
// through a depthwise causal convolution of k taps (taps[c*k + j], oldest
// first) over the last k-1 gated inputs, kept on the device in state
// ([k-1, h], oldest first; treated as zeros at position 0), then is gated
// by C: y[t*h + c] = C·(bias[c] + Σ_j taps[c*k+j]·win[j]). One thread per
// channel walks the step's tokens in order. state is a ring of `slots`
// windows: slot L % slots holds the window after L positions; a step reads
// its start's slot and writes the window after each of its last `slots`
// tokens, so the session can rewind up to slots-1 positions exactly.
// Dispatch (ceil(h/64), 1, 1).
// 48 bytes, the largest parameter block: see hybridParam in webgpu/hybrid.go.
//!P ShortConvParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> bcx: array<f32>;
@group(0) @binding(3) var<storage, read> taps: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> state: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let c = wg.x * 64u + lid.x;
    if (c >= p.h) {
        return;
    }
    let pos = step[0];
    let fresh = pos == 0u;
    let ws = (p.k - 1u) * p.h;
    let rd = (pos % p.slots) * ws;
    var win: array<f32, 16>;
    for (var j = 0u; j + 1u < p.k; j++) {
        win[j] = select(state[rd + j * p.h + c], 0.0, fresh);
    }
    let n = step[1];
    for (var t = 0u; t < n; t++) {
        let r = t * 3u * p.h;
        win[p.k - 1u] = bcx[r + c] * bcx[r + 2u * p.h + c];
        var acc = 0.0;
        if (p.has_bias == 1u) {
            acc = bias[c];
        }
        for (var j = 0u; j < p.k; j++) {
            acc += taps[c * p.k + j] * win[j];
        }
        y[t * p.h + c] = bcx[r + p.h + c] * acc;
        for (var j = 0u; j + 1u < p.k; j++) {
            win[j] = win[j + 1u];
        }
        if (t + p.slots >= n) {
            let wr = ((pos + t + 1u) % p.slots) * ws;
            for (var j = 0u; j + 1u < p.k; j++) {
                state[wr + j * p.h + c] = win[j];
            }
        }
    }
}
