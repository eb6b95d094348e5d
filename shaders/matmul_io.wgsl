// The interface every matmul-shaped kernel shares (matmul.wgsl and
// gemm.wgsl; one bind group layout, so a session binds a projection once
// and dispatches whichever kernel suits the step): the parameters, the step
// buffer, the weight of any codec, x, out and bias. See matmul.wgsl for
// their meaning.
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
    act: u32,
    _p1: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
