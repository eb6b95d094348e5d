// Tiled prefill GEMM: y[t, o] = Σ_i W[o, i]·x[t, i] (+ bias[o]) for many
// tokens, a drop-in for the matmul kernel's prefill use (same bindings, same
// uniform P, same `step` token selection, same epilogue; see matmul.wgsl).
//
// One workgroup of __NT__ threads computes a tile of __BM__ output rows x
// __BN__ tokens. The inner dimension is walked in steps of __BK__: each step
// stages the W tile (dequantized through the codec prelude's fetch4) and the
// x tile into workgroup memory, transposed so that index [k][v] holds four
// consecutive rows (tokens) at one k; each thread then accumulates a
// register micro-tile of __TM__ rows x __TN__ tokens as outer products of
// vec4 loads: per k, one vec4 read per four rows and per four tokens feeds
// all __TM__·__TN__ fused multiply-adds.
// The next step's tile is loaded from memory into registers while the
// current one is multiplied (and with __NB__ = 2 stored into a second
// buffer). Every output is one sequential fma chain over
// i, so the result does not depend on the tiling.
//
// Dispatch (min(g, 65535), ceil(g/65535), ceil(ntok/__BN__)) with
// g = ceil(rows/__BM__): x and y count row tiles, z token tiles. Workgroups
// past the rows or the selected tokens return at once. Rows past the end
// read the last row (in bounds) and are not written, tokens past the end
// the last selected token's x; inner-dimension steps past cols read zeros,
// so cols needs only be a multiple of the codec's CHUNK.
__MATMUL_IO__

const BM: u32 = __BM__u; // rows per tile
const BN: u32 = __BN__u; // tokens per tile
const BK: u32 = __BK__u; // inner-dimension step
const MT: u32 = __MT__u; // threads along rows: BM / TM
const NY: u32 = __NY__u; // threads along tokens: BN / TN

// ws[b][k][v] = W rows 4v..4v+3 at inner index k of the step in buffer b;
// xs likewise for tokens. With two buffers the next step is stored while
// the current one is multiplied, and one barrier per step suffices.
// __NB__·4·BK·(BM+BN) bytes, within WebGPU's default 16 KiB.
var<workgroup> ws: array<array<array<vec4<f32>, __BM4__>, __BK__>, __NB__>;
var<workgroup> xs: array<array<array<vec4<f32>, __BN4__>, __BK__>, __NB__>;

// Weight elements k..k+3 of the row starting at element rb; zeros past the
// row's end (the last step of a cols that is not a multiple of BK).
fn wk4(rb: u32, k: u32) -> vec4<f32> {
    if (k >= p.cols) {
        return vec4<f32>(0.0);
    }
    return fetch4(rb + k, p.soff);
}

// Elements k..k+3 of the x row starting at vec4 xb.
fn xk4(xb: u32, k: u32) -> vec4<f32> {
    if (k >= p.cols) {
        return vec4<f32>(0.0);
    }
    return x[xb + k / 4u];
}

// emit4 finishes rows o..o+3 of token t (the matmul kernel's epilogue);
// in the gated variant (GemmTiling.Gated), mode 2 (interleaved gate/up
// rows, an even row count): the pairs (o, o+1) and (o+2, o+3) through
// store_gated.
fn emit4(o: u32, t: u32, cnt: u32, y4: vec4<f32>) {
    if (t >= cnt) {
        return;
    }
__GATED__
    for (var r = 0u; r < 4u; r++) {
        if (o + r < p.rows) {
            store(o + r, t, y4[r]);
        }
    }
}

@compute @workgroup_size(__NT__)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let row0 = (wg.x + wg.y * nwg.x) * BM;
    var base = 0u;
    var cnt = step[1];
    if (p.sel == 1u) {
        base = step[2];
        cnt = step[3];
    } else if (p.sel == 2u) {
        cnt = step[3];
    }
    let t0 = wg.z * BN;
    // Uniform: the workgroup id, the uniform buffer and a read-only buffer.
    if (row0 >= p.rows || t0 >= cnt) {
        return;
    }
    let l = lid.x;
    let tx = l % MT;
    let ty = l / MT;
    let c4 = p.cols / 4u;
    let last = p.rows - 1u;
__SETUP__
__ACC__
    let nk = (p.cols + BK - 1u) / BK;
__LOOP__
__EPI__
}
