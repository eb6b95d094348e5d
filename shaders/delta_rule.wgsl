// qwen3_next gated DeltaNet, step 2: the delta-rule recurrence of one value
// head per workgroup, thread j owning column j of the head's [dk, dv] state
// S (resident in state, [vh, dk, dv]; zeros at position 0; a ring of
// `slots` states, slot L % slots holding S after L positions: a step reads
// its start's slot and writes S after each of its last `slots` tokens, so
// the session can rewind up to slots-1 positions exactly). Per token, with
// the conv output row (cdim wide: q, k per key head, then v per value head),
// q and k L2-normalized (q also scaled by 1/√dk), β = sigmoid(b) and
// g = negA·softplus(a + dt_bias) from the ba row (grouped per key head:
// [b (r), a (r)]):
//   S = exp(g)·S;  S += k ⊗ β(v − Sᵀk);  o = Sᵀq
// then the gated RMSNorm o·rsqrt(mean(o²)+eps)·w·SiLU(z), z from the qkvz
// row. out[t*vh*dv + vi*dv + j]. dk <= 128, dv <= 128. Dispatch (vh, 1, 1).
// 48 bytes, the largest parameter block: see hybridParam in webgpu/hybrid.go.
//!P DeltaRuleParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> conv: array<f32>;
@group(0) @binding(3) var<storage, read> qkvz: array<f32>;
@group(0) @binding(4) var<storage, read> ba: array<f32>;
@group(0) @binding(5) var<storage, read> hw: array<f32>; // [dt_bias (vh) | negA (vh) | norm w (dv)]
@group(0) @binding(6) var<storage, read_write> state: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;

var<workgroup> kv: array<f32, 256>; // normalized q (dk), then k (dk)
var<workgroup> red: array<f32, 128>;

fn wsum(v: f32, lid: u32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = 64u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let vi = wg.x;
    let j = lid.x;
    let live = j < p.dv;
    let r = p.vh / p.kh;
    let g = vi / r;
    let kd = p.kh * p.dk;
    let group = 2u * p.dk + 2u * r * p.dv;
    let pos = step[0];
    let fresh = pos == 0u;
    let sz = p.vh * p.dk * p.dv;
    let rd = (pos % p.slots) * sz;
    var S: array<f32, 128>;
    for (var i = 0u; i < p.dk; i++) {
        S[i] = 0.0;
        if (live && !fresh) {
            S[i] = state[rd + (vi * p.dk + i) * p.dv + j];
        }
    }
    let scale = 1.0 / sqrt(f32(p.dk));
    let n = step[1];
    for (var t = 0u; t < n; t++) {
        let row = t * p.cdim;
        // Normalized q and k of the head's key group, shared.
        var sq = 0.0;
        var sk = 0.0;
        for (var i = lid.x; i < p.dk; i += 128u) {
            let qv = conv[row + g * p.dk + i];
            let kv2 = conv[row + kd + g * p.dk + i];
            sq += qv * qv;
            sk += kv2 * kv2;
        }
        let nq = wsum(sq, lid.x);
        let nk = wsum(sk, lid.x);
        let iq = scale / sqrt(nq + 1e-6);
        let ik = 1.0 / sqrt(nk + 1e-6);
        for (var i = lid.x; i < p.dk; i += 128u) {
            kv[i] = conv[row + g * p.dk + i] * iq;
            kv[p.dk + i] = conv[row + kd + g * p.dk + i] * ik;
        }
        workgroupBarrier();
        let bb = ba[t * 2u * p.vh + g * 2u * r + vi % r];
        let aa = ba[t * 2u * p.vh + g * 2u * r + r + vi % r];
        let beta = 1.0 / (1.0 + exp(-bb));
        var sp = aa + hw[vi];
        if (sp <= 20.0) {
            sp = log(1.0 + exp(sp));
        }
        let decay = exp(hw[p.vh + vi] * sp);
        var o = 0.0;
        if (live) {
            var mem = 0.0;
            for (var i = 0u; i < p.dk; i++) {
                S[i] *= decay;
                mem += kv[p.dk + i] * S[i];
            }
            let v = conv[row + 2u * kd + vi * p.dv + j];
            let d = (v - mem) * beta;
            for (var i = 0u; i < p.dk; i++) {
                S[i] += kv[p.dk + i] * d;
                o += kv[i] * S[i];
            }
        }
        let ss = wsum(o * o, lid.x);
        if (live) {
            let z = qkvz[t * p.rw + g * group + 2u * p.dk + r * p.dv + (vi % r) * p.dv + j];
            let y = o / sqrt(ss / f32(p.dv) + p.eps) * hw[2u * p.vh + j] * (z / (1.0 + exp(-z)));
            out[t * p.vh * p.dv + vi * p.dv + j] = y;
            if (t + p.slots >= n) {
                let wr = ((pos + t + 1u) % p.slots) * sz;
                for (var i = 0u; i < p.dk; i++) {
                    state[wr + (vi * p.dk + i) * p.dv + j] = S[i];
                }
            }
        }
        workgroupBarrier();
    }
}
