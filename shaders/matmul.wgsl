// y[t, o] = Σ_i W[o, i]·x[t, i] (+ bias[o]) for one weight of any codec
// (the codec prelude defines fetchc, which returns CHUNK consecutive
// elements from one 16-byte load). One workgroup of 64 threads computes
// one output row for a block of __TB__ tokens, so the weight row is read once
// per token block: __TB__ = 1 is the decode matvec, larger blocks the prefill
// GEMM. Dispatch (min(rows, 65535), ceil(rows/65535), ceil(ntok/__TB__)).
//
// Which rows of x: sel 0 = rows 0..step.ntok, sel 1 = the head rows
// step[2]..step[2]+step[3], sel 2 = rows 0..step[3]. Output row t (relative).
// mode 0: out = softcap(alpha * y); mode 1: out += alpha * y (residual add).
// Output element (t, o) is out[out_off + t*out_stride + o], so q/k/v or
// gate/up projections can write side by side into one activation row.
struct P {
    rows: u32,
    cols: u32,
    soff: u32,
    mode: u32,
    alpha: f32,
    softcap: f32,
    sel: u32,
    has_bias: u32,
    out_stride: u32,
    out_off: u32,
    _p0: u32,
    _p1: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;

const TB: u32 = __TB__u;
var<workgroup> red: array<f32, __RED__>;

fn safe_tanh(v: f32) -> f32 {
    let c = clamp(v, -15.0, 15.0);
    let e = exp(2.0 * c);
    return (e - 1.0) / (e + 1.0);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wg.x + wg.y * nwg.x;
    var base = 0u;
    var cnt = step[1];
    if (p.sel == 1u) {
        base = step[2];
        cnt = step[3];
    } else if (p.sel == 2u) {
        cnt = step[3];
    }
    let t0 = wg.z * TB;
    var acc: array<f32, __TB__>;
    for (var k = 0u; k < TB; k++) {
        acc[k] = 0.0;
    }
    if (row < p.rows) {
        let c4 = p.cols / 4u;
        let rbase = row * p.cols;
        // One 16-byte weight load per thread per iteration (CHUNK elements).
        for (var j = lid.x; j < p.cols / CHUNK; j += 64u) {
            var wv = fetchc(rbase + j * CHUNK, p.soff);
            for (var k = 0u; k < TB; k++) {
                if (t0 + k < cnt) {
                    let xb = (base + t0 + k) * c4 + j * (CHUNK / 4u);
                    var s = 0.0;
                    for (var q = 0u; q < CHUNK / 4u; q++) {
                        s += dot(wv[q], x[xb + q]);
                    }
                    acc[k] += s;
                }
            }
        }
    }
    for (var k = 0u; k < TB; k++) {
        red[k * 64u + lid.x] = acc[k];
    }
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if (lid.x < s) {
            for (var k = 0u; k < TB; k++) {
                red[k * 64u + lid.x] += red[k * 64u + lid.x + s];
            }
        }
        workgroupBarrier();
    }
    if (lid.x < TB && row < p.rows) {
        let t = t0 + lid.x;
        if (t < cnt) {
            var y = red[lid.x * 64u];
            if (p.has_bias == 1u) {
                y += bias[row];
            }
            let o = p.out_off + t * p.out_stride + row;
            if (p.mode == 1u) {
                out[o] += p.alpha * y;
            } else {
                y *= p.alpha;
                if (p.softcap > 0.0) {
                    y = p.softcap * safe_tanh(y / p.softcap);
                }
                out[o] = y;
            }
        }
    }
}
