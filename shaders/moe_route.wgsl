// MoE routing for every token of the step, on the device: the router logits
// (written by a matmul, [ntok, E]) become probabilities in place (softmax,
// or sigmoid with scoring 1; scoring 2, gpt-oss's, keeps the logits and
// takes the softmax over the k picked ones, which is then always
// normalized), then the top k experts by probability (plus
// the optional selection bias, which does not enter the weights) are picked
// in descending order, lower index first on ties, as a stable sort does.
// The weights are renormalized to sum 1 when norm_topk is set and then
// multiplied by scale. sel[t*k + j] is the j-th pick's expert, wts[t*k + j]
// its weight. Then, for moe_gemm, the picks grouped by expert: after the
// stride*k pick entries of sel, the number of picks of each expert (e
// entries), then each expert's slots t*k + j in token order (stride entries
// per expert; stride is the most tokens of a step). Dispatch (1, 1, 1);
// each thread routes tokens t ≡ lid (mod 64), then groups experts
// e ≡ lid (mod 64).
// 48 bytes, the largest parameter block: see hybridParam in webgpu/hybrid.go.
//!P RouteParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read_write> logits: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> sel: array<u32>;
@group(0) @binding(5) var<storage, read_write> wts: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
    let n = step[1];
    for (var t = lid.x; t < n; t += 64u) {
        let b = t * p.e;
        if (p.scoring == 2u) {
            // top-k of the raw logits; softmax over the picks below.
        } else if (p.scoring == 1u) {
            for (var e = 0u; e < p.e; e++) {
                logits[b + e] = 1.0 / (1.0 + exp(-logits[b + e]));
            }
        } else {
            var m = logits[b];
            for (var e = 1u; e < p.e; e++) {
                m = max(m, logits[b + e]);
            }
            var sum = 0.0;
            for (var e = 0u; e < p.e; e++) {
                let v = exp(logits[b + e] - m);
                logits[b + e] = v;
                sum += v;
            }
            for (var e = 0u; e < p.e; e++) {
                logits[b + e] = logits[b + e] / sum;
            }
        }
        var total = 0.0;
        for (var j = 0u; j < p.k; j++) {
            var best = 0u;
            var bestScore = 0.0;
            var found = false;
            for (var e = 0u; e < p.e; e++) {
                var taken = false;
                for (var q = 0u; q < j; q++) {
                    if (sel[t * p.k + q] == e) {
                        taken = true;
                    }
                }
                if (taken) {
                    continue;
                }
                var sc = logits[b + e];
                if (p.has_bias == 1u) {
                    sc += bias[e];
                }
                if (!found || sc > bestScore) {
                    best = e;
                    bestScore = sc;
                    found = true;
                }
            }
            sel[t * p.k + j] = best;
            wts[t * p.k + j] = logits[b + best];
            total += logits[b + best];
        }
        if (p.scoring == 2u) {
            // The first pick holds the largest logit.
            let m0 = wts[t * p.k];
            total = 0.0;
            for (var j = 0u; j < p.k; j++) {
                let v = exp(wts[t * p.k + j] - m0);
                wts[t * p.k + j] = v;
                total += v;
            }
        }
        for (var j = 0u; j < p.k; j++) {
            var wv = wts[t * p.k + j];
            if (p.norm_topk == 1u || p.scoring == 2u) {
                wv = wv / total;
            }
            wts[t * p.k + j] = wv * p.scale;
        }
    }
    storageBarrier();
    let cbase = p.stride * p.k;
    for (var e = lid.x; e < p.e; e += 64u) {
        var c = 0u;
        for (var s = 0u; s < n * p.k; s++) {
            if (sel[s] == e) {
                sel[cbase + p.e + e * p.stride + c] = s;
                c++;
            }
        }
        sel[cbase + e] = c;
    }
}
