// matvec.cu: decode matrix-vector products, one launch per weight.
//
// ck_mv_<codec>   exact: f32 activations dotted with exactly dequantized
//                 weights, f32 accumulation (the CPU's Exact mode).
// ck_mvq_<codec>  (q8_0, q4_0, q4_K, q6_K) the activation quantized to int8
//                 per 32 (d = amax/127, round half to even, as the CPU's
//                 Int8 mode and llama.cpp's q8_1) inside each block, then
//                 __dp4a: a quarter of the activation traffic and of the
//                 instructions per weight.
// ck_mvb_<codec>  exact, N (1..8) activation columns (speculative verify).
//
// Geometry (abi.go): ck_mv_/ck_mvb_ 128 threads = 4 warps; ck_mv_ gives
// each warp MV_R rows, ck_mvb_ one. ck_mvq_ 512 threads, MVQ_R rows per
// warp (16 rows per block), dynamic shared cols + 8*cols/32 bytes. Each
// lane handles MV_U / MVQ_U chunks per step (8 in ck_mvq_* rows of at least
// MVQ_WIDE_COLS), their loads issued together, every row of the warp at once.
// ck_mv_ and ck_mvq_ take an optional RMSNorm of x (nw, eps, plusOne: the
// block computes 1/rms(x) itself), which saves the norm's launch. A warp's lanes stride over
// the row's 32-weight chunks; rows past `rows` are skipped. With W2 the
// warp computes the same rows of W and W2 and writes act(W·x)·(W2·x).
#include "common.cuh"

#define MV_R 2
#define MV_U 2
#define MVQ_R 1
#define MVQ_U 4
// Rows of at least MVQ_WIDE_COLS columns (a down projection) take 8 chunks
// per lane per step in ck_mvq_*: twice the loads in flight where a warp's
// row is long and the grid has few blocks.
#ifndef MVQ_WIDE_COLS
#define MVQ_WIDE_COLS 4096
#endif

template <class C>
__device__ __forceinline__ float dot_chunk(const uint8_t* row, int nchunk, int c, const float* xr) {
  float w[32];
  C::deq(row, nchunk, c, w);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 32; i++) s = fmaf(w[i], xr[i], s);
  return s;
}

// x chunk c, normalized when nw != nullptr: x·inv·w (or ·(1+w)), as the
// CPU's rmsnorm output.
template <class C>
__device__ __forceinline__ void load_xn(const float* x, int c, float* v, const float* __restrict__ nw, float inv,
                                        int plusOne) {
  load_x<C>(x, c, v);
  if (nw) {
    float w[32];
    load_x<C>(nw, c, w);
#pragma unroll
    for (int i = 0; i < 32; i++) v[i] = v[i] * inv * (plusOne ? 1.f + w[i] : w[i]);
  }
}

template <class C>
__device__ __forceinline__ void mv_exact(float* __restrict__ y, const uint8_t* __restrict__ W,
                                         const uint8_t* __restrict__ W2, const float* __restrict__ x,
                                         const float* __restrict__ r, int rows, int cols, int rowBytes, int act,
                                         const float* __restrict__ nw, float eps, int plusOne) {
  const float inv = nw ? block_rms_inv(x, cols, eps) : 1.f;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row0 = (blockIdx.x * 4 + warp) * MV_R;
  if (row0 >= rows) return;
  const int nchunk = cols >> 5;
  float acc[MV_R], acc2[MV_R];
#pragma unroll
  for (int k = 0; k < MV_R; k++) acc[k] = acc2[k] = 0.f;
  for (int c0 = lane; c0 < nchunk; c0 += 32 * MV_U) {
#pragma unroll
    for (int u = 0; u < MV_U; u++) {
      const int c = c0 + 32 * u;
      if (c < nchunk) {
        float xr[32];
        load_xn<C>(x, c, xr, nw, inv, plusOne);
#pragma unroll
        for (int k = 0; k < MV_R; k++) {
          if (row0 + k < rows) {
            acc[k] += dot_chunk<C>(W + (size_t)(row0 + k) * rowBytes, nchunk, c, xr);
            if (W2) acc2[k] += dot_chunk<C>(W2 + (size_t)(row0 + k) * rowBytes, nchunk, c, xr);
          }
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < MV_R; k++) {
    float v = warp_sum(acc[k]);
    if (W2) v = act_fn(v, act) * warp_sum(acc2[k]);
    if (lane == 0 && row0 + k < rows) y[row0 + k] = v + (r ? r[row0 + k] : 0.f);
  }
}

template <class C>
__device__ __forceinline__ void mvb_exact(float* __restrict__ y, const uint8_t* __restrict__ W,
                                          const uint8_t* __restrict__ W2, const float* __restrict__ x,
                                          const float* __restrict__ r, int rows, int cols, int rowBytes, int act,
                                          int n) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * 4 + warp;
  if (row >= rows) return;
  const int nchunk = cols >> 5;
  float acc[8], acc2[8];
#pragma unroll
  for (int j = 0; j < 8; j++) acc[j] = acc2[j] = 0.f;
  const uint8_t* wr = W + (size_t)row * rowBytes;
  const uint8_t* wr2 = W2 ? W2 + (size_t)row * rowBytes : nullptr;
  for (int c = lane; c < nchunk; c += 32) {
    float w[32], w2[32];
    C::deq(wr, nchunk, c, w);
    if (wr2) C::deq(wr2, nchunk, c, w2);
#pragma unroll
    for (int j = 0; j < 8; j++) {
      if (j < n) {
        float xr[32];
        load_x<C>(x + (size_t)j * cols, c, xr);
        float s = 0.f, s2 = 0.f;
#pragma unroll
        for (int i = 0; i < 32; i++) s = fmaf(w[i], xr[i], s);
        acc[j] += s;
        if (wr2) {
#pragma unroll
          for (int i = 0; i < 32; i++) s2 = fmaf(w2[i], xr[i], s2);
          acc2[j] += s2;
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < 8; j++) {
    if (j < n) {
      float v = warp_sum(acc[j]);
      if (wr2) v = act_fn(v, act) * warp_sum(acc2[j]);
      const size_t o = (size_t)j * rows + row;
      if (lane == 0) y[o] = v + (r ? r[o] : 0.f);
    }
  }
}

// Rows per warp of ck_mvq_*: 4 for big matrices (the lm head), where the
// per-block quantization of x is then shared by 64 rows; else 1. abi.go's
// LaunchInt8 mirrors it.
__device__ __forceinline__ int mvq_rows_per_warp(int rows) { return rows >= 32768 ? 4 : 1; }

__device__ __forceinline__ void prefetch_l2(const uint8_t* p, int bytes) {
  for (int o = (threadIdx.x & 31) * 128; o < bytes; o += 32 * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
}

// Quantizes x[cols] (normalized first when nw != nullptr) into shared
// memory: xq int8[cols], xds float2[cols/32]. Every thread of the block
// takes part; ends with a barrier.
__device__ __forceinline__ void quantize_x_shared(const float* __restrict__ x, int cols, int8_t* xq, float2* xds,
                                                  const float* __restrict__ nw, float eps, int plusOne) {
  const float inv = nw ? block_rms_inv(x, cols, eps) : 1.f;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5, nb = cols >> 5;
  // Eight blocks of 32 per warp per round, their loads issued together.
  for (int b0 = warp; b0 < nb; b0 += 8 * nwarps) {
    float v[8];
#pragma unroll
    for (int u = 0; u < 8; u++) {
      const int b = b0 + u * nwarps;
      v[u] = 0.f;
      if (b < nb) {
        v[u] = x[b * 32 + lane];
        if (nw) v[u] = v[u] * inv * (plusOne ? 1.f + nw[b * 32 + lane] : nw[b * 32 + lane]);
      }
    }
#pragma unroll
    for (int u = 0; u < 8; u++) {
      const int b = b0 + u * nwarps;
      if (b < nb) {
        const float amax = warp_max(fabsf(v[u]));
        const float d = amax / 127.f;
        const float id = d != 0.f ? 1.f / d : 0.f;
        const int q = __float2int_rn(v[u] * id);
        xq[b * 32 + lane] = (int8_t)q;
        const float s = warp_sum((float)q);
        if (lane == 0) xds[b] = make_float2(d, d * s);
      }
    }
  }
  __syncthreads();
}

// U chunks per lane per step; RPW rows per warp (mvq_rows_per_warp), their
// chunks interleaved so that the loads of every row are in flight together
// (each row's sum keeps the order of a row alone).
template <class C, int U, int RPW>
__device__ __forceinline__ void mv_q8(float* __restrict__ y, const uint8_t* __restrict__ W,
                                      const uint8_t* __restrict__ W2, const float* __restrict__ x,
                                      const float* __restrict__ r, int rows, int cols, int rowBytes, int act,
                                      const float* __restrict__ nw, float eps, int plusOne, int bx) {
  extern __shared__ __align__(16) uint8_t smem[];
  int8_t* xq = reinterpret_cast<int8_t*>(smem);
  float2* xds = reinterpret_cast<float2*>(smem + cols);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row0 = (bx * (blockDim.x >> 5) + warp) * RPW;
  const int nrow = max(0, min(RPW, rows - row0));
  // The warp's weight rows go to L2 while x is normalized and quantized
  // (and, launched as a dependent, while the kernel before still runs).
  for (int k = 0; k < nrow; k++) {
    prefetch_l2(W + (size_t)(row0 + k) * rowBytes, rowBytes);
    if (W2) prefetch_l2(W2 + (size_t)(row0 + k) * rowBytes, rowBytes);
  }
  ck_pdl();  // x (and y, r) only after the kernel before has finished
  quantize_x_shared(x, cols, xq, xds, nw, eps, plusOne);
  const int nchunk = cols >> 5;
  float acc[RPW], acc2[RPW];
#pragma unroll
  for (int k = 0; k < RPW; k++) acc[k] = acc2[k] = 0.f;
  for (int c0 = lane; c0 < nchunk; c0 += 32 * U) {
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int c = c0 + 32 * u;
      if (c < nchunk) {
#pragma unroll
        for (int k = 0; k < RPW; k++) {
          if (k < nrow) {
            acc[k] += C::dotq(W + (size_t)(row0 + k) * rowBytes, nchunk, c, xq, xds);
            if (W2) acc2[k] += C::dotq(W2 + (size_t)(row0 + k) * rowBytes, nchunk, c, xq, xds);
          }
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < RPW; k++) {
    if (k < nrow) {
      float v = warp_sum(acc[k]);
      if (W2) v = act_fn(v, act) * warp_sum(acc2[k]);
      if (lane == 0) y[row0 + k] = v + (r ? r[row0 + k] : 0.f);
    }
  }
}

#define MV_ARGS                                                                                         \
  float *__restrict__ y, const uint8_t *__restrict__ W, const uint8_t *__restrict__ W2,               \
      const float *__restrict__ x, const float *__restrict__ r, int rows, int cols, int rowBytes, int act

#define DEF_MV(name, C)                                                                                 \
  CK void __launch_bounds__(128) ck_mv_##name(MV_ARGS, const float* nw, float eps, int plusOne) {       \
    ck_pdl();                                                                                           \
    mv_exact<C>(y, W, W2, x, r, rows, cols, rowBytes, act, nw, eps, plusOne);                           \
  }                                                                                                     \
  CK void __launch_bounds__(128) ck_mvb_##name(MV_ARGS, int n) {                                        \
    ck_pdl();                                                                                           \
    mvb_exact<C>(y, W, W2, x, r, rows, cols, rowBytes, act, n);                                         \
  }

DEF_MV(f32, CF32)
DEF_MV(f16, CF16)
DEF_MV(bf16, CBF16)
DEF_MV(q8_0, CQ8_0)
DEF_MV(q4_0, CQ4_0)
DEF_MV(q4_K, CQ4_K)
DEF_MV(q6_K, CQ6_K)

// ck_mvq_*'s body for the rows of block bx. ck_mvq_* and ck_mvq2_* keep
// to 64 registers (two 512-thread blocks a multiprocessor): a grid of a
// few hundred blocks then runs in one or two waves.
template <class C>
__device__ __forceinline__ void mvq(float* __restrict__ y, const uint8_t* __restrict__ W,
                                    const uint8_t* __restrict__ W2, const float* __restrict__ x,
                                    const float* __restrict__ r, int rows, int cols, int rowBytes, int act,
                                    const float* __restrict__ nw, float eps, int plusOne, int bx) {
  if (mvq_rows_per_warp(rows) == 4) mv_q8<C, MVQ_U, 4>(y, W, W2, x, r, rows, cols, rowBytes, act, nw, eps, plusOne, bx);
  else if (cols >= MVQ_WIDE_COLS) mv_q8<C, 8, 1>(y, W, W2, x, r, rows, cols, rowBytes, act, nw, eps, plusOne, bx);
  else mv_q8<C, MVQ_U, 1>(y, W, W2, x, r, rows, cols, rowBytes, act, nw, eps, plusOne, bx);
}

#define DEF_MVQ(name, C)                                                                                \
  CK void __launch_bounds__(512, 2) ck_mvq_##name(MV_ARGS, const float* nw, float eps, int plusOne) {   \
    mvq<C>(y, W, W2, x, r, rows, cols, rowBytes, act, nw, eps, plusOne, blockIdx.x);                    \
  }

DEF_MVQ(q8_0, CQ8_0)
DEF_MVQ(q4_0, CQ4_0)
DEF_MVQ(q4_K, CQ4_K)
DEF_MVQ(q6_K, CQ6_K)

// ---- ck_mvq2_<a>_<b>: two ck_mvq_ products of one x in one launch, y =
// [WA·x; WB·x] (+ r, rows rowsA + rowsB), WA in codec a, WB in codec b: a
// layer's [q;k] and v where v has a codec of its own (q4_K_M's q6_K v in
// some layers). The first blocks take WA's rows as ck_mvq_a's would, the
// rest WB's, one row a warp (rowsA and rowsB under 32768, abi.go
// MatvecPairArgs).
#define DEF_MVQ2(na, CA, nb, CB)                                                                        \
  CK void __launch_bounds__(512, 2) ck_mvq2_##na##_##nb(                                                \
      float* __restrict__ y, const uint8_t* __restrict__ WA, const uint8_t* __restrict__ WB,            \
      const float* __restrict__ x, const float* __restrict__ r, int rowsA, int rowsB, int cols,         \
      int rowBytesA, int rowBytesB, const float* nw, float eps, int plusOne) {                          \
    const int perA = blockDim.x >> 5, nbA = (rowsA + perA - 1) / perA;                                  \
    if ((int)blockIdx.x < nbA)                                                                          \
      mv_q8<CA, MVQ_U, 1>(y, WA, nullptr, x, r, rowsA, cols, rowBytesA, 0, nw, eps, plusOne, blockIdx.x); \
    else                                                                                                \
      mv_q8<CB, MVQ_U, 1>(y + rowsA, WB, nullptr, x, r ? r + rowsA : nullptr, rowsB, cols, rowBytesB, 0, \
                          nw, eps, plusOne, blockIdx.x - nbA);                                          \
  }
DEF_MVQ2(q4_K, CQ4_K, q6_K, CQ6_K)
