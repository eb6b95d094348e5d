// The interface every matmul-shaped kernel shares (matmul.wgsl and
// gemm.wgsl; one bind group layout, so a session binds a projection once
// and dispatches whichever kernel suits the step): the parameters, the step
// buffer, the weight of any codec, x, out and bias (see matmul.wgsl for
// their meaning), and the epilogue that writes one output.
//!P MatmulParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;

fn safe_tanh(v: f32) -> f32 {
    let c = clamp(v, -15.0, 15.0);
    let e = exp(2.0 * c);
    return (e - 1.0) / (e + 1.0);
}

// store finishes output (row, token t) of the sum y: the bias, then mode 1
// adds alpha·y to out (a residual), mode 0 writes softcap(alpha·y).
fn store(row: u32, t: u32, y0: f32) {
    var y = y0;
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

// store_gated finishes output (row/2, token t) of interleaved gate/up rows
// (mode 2): act(g)·u, act bit 0: 0 = SiLU, 1 = GELU (tanh approximation).
fn store_gated(row: u32, t: u32, g: f32, u: f32) {
    var a: f32;
    if ((p.act & 1u) == 1u) {
        a = 0.5 * g * (1.0 + safe_tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
    } else {
        a = g / (1.0 + exp(-g));
    }
    out[p.out_off + t * p.out_stride + row / 2u] = a * u;
}
