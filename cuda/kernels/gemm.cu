// gemm.cu: prefill products Y[T][rows] = X[T][cols]·Wᵀ (+R) on the tensor
// cores: each block dequantizes a 128-row × 64-column tile of W to f16 and
// converts a 64-token × 64-column tile of X to f16 in shared memory, and 8
// warps (4 along rows × 2 along tokens, 32×32 each) multiply them with
// wmma 16×16×16 f16 → f32. The next tile is read into registers while the
// current one is multiplied. cols must be a multiple of 64.
#include <mma.h>

#include "common.cuh"
using namespace nvcuda;

#define GBN 128
#define GBM 64
#define GBK 64
#define GLD (GBK + 8)

template <class C>
__device__ __forceinline__ void gemm(float* __restrict__ Y, const uint8_t* __restrict__ W, const float* __restrict__ X,
                                     const float* __restrict__ R, int rows, int cols, int rowBytes, int T) {
  extern __shared__ __align__(16) uint8_t smem[];
  __half* Ws = reinterpret_cast<__half*>(smem);  // [GBN][GLD]
  __half* Xs = Ws + GBN * GLD;                    // [GBM][GLD]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int n0 = blockIdx.x * GBN, m0 = blockIdx.y * GBM;
  const int nchunk = cols >> 5;
  // W loader: row n0 + tid/2, chunk (k0/32) + tid%2.
  const int wr = tid >> 1, wc = tid & 1;
  const bool wok = n0 + wr < rows;
  const uint8_t* wrow = W + (size_t)(wok ? n0 + wr : 0) * rowBytes;
  // X loader: token m0 + tid/4, columns 16*(tid%4) .. +16.
  const int xr = tid >> 2, xc = (tid & 3) * 16;
  const bool xok = m0 + xr < T;
  const float* xrow = X + (size_t)(xok ? m0 + xr : 0) * cols;

  float wv[32], xv[16];
  auto fetch = [&](int k0) {
    if (wok) deq_lin<C>(wrow, nchunk, (k0 >> 5) + wc, wv);
    else {
#pragma unroll
      for (int i = 0; i < 32; i++) wv[i] = 0.f;
    }
    if (xok) {
#pragma unroll
      for (int i = 0; i < 16; i += 8) load8f(xrow + k0 + xc + i, xv + i);
    } else {
#pragma unroll
      for (int i = 0; i < 16; i++) xv[i] = 0.f;
    }
  };
  // 16-byte stores: a quarter warp's 8 stores land on distinct banks.
  auto pack8 = [](const float* v) {
    uint4 u;
    __half2 h0 = __floats2half2_rn(v[0], v[1]), h1 = __floats2half2_rn(v[2], v[3]);
    __half2 h2 = __floats2half2_rn(v[4], v[5]), h3 = __floats2half2_rn(v[6], v[7]);
    u.x = *reinterpret_cast<uint32_t*>(&h0); u.y = *reinterpret_cast<uint32_t*>(&h1);
    u.z = *reinterpret_cast<uint32_t*>(&h2); u.w = *reinterpret_cast<uint32_t*>(&h3);
    return u;
  };
  auto stash = [&]() {
    uint4* wd = reinterpret_cast<uint4*>(Ws + wr * GLD + wc * 32);
#pragma unroll
    for (int i = 0; i < 4; i++) wd[i] = pack8(wv + 8 * i);
    uint4* xd = reinterpret_cast<uint4*>(Xs + xr * GLD + xc);
#pragma unroll
    for (int i = 0; i < 2; i++) xd[i] = pack8(xv + 8 * i);
  };

  const int wn = (warp & 3) * 32, wm = (warp >> 2) * 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.f);

  fetch(0);
  for (int k0 = 0; k0 < cols; k0 += GBK) {
    __syncthreads();
    stash();
    __syncthreads();
    if (k0 + GBK < cols) fetch(k0 + GBK);
#pragma unroll
    for (int kk = 0; kk < GBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b[2];
#pragma unroll
      for (int i = 0; i < 2; i++) wmma::load_matrix_sync(a[i], Xs + (wm + 16 * i) * GLD + kk, GLD);
#pragma unroll
      for (int j = 0; j < 2; j++) wmma::load_matrix_sync(b[j], Ws + (wn + 16 * j) * GLD + kk, GLD);
#pragma unroll
      for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
  __syncthreads();
  // Epilogue through a 16×16 f32 scratch per warp (bounds, residual).
  float* scr = reinterpret_cast<float*>(smem) + warp * 256;
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++) {
      wmma::store_matrix_sync(scr, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
#pragma unroll
      for (int e = 0; e < 8; e++) {
        const int idx = lane + 32 * e, r = idx >> 4, c = idx & 15;
        const int m = m0 + wm + 16 * i + r, n = n0 + wn + 16 * j + c;
        if (m < T && n < rows) {
          const size_t o = (size_t)m * rows + n;
          Y[o] = scr[idx] + (R ? R[o] : 0.f);
        }
      }
      __syncwarp();
    }
}

#define DEF_GEMM(name, C)                                                                              \
  CK void __launch_bounds__(256) ck_gemm_##name(float* Y, const uint8_t* W, const float* X, const float* R, \
                                                int rows, int cols, int rowBytes, int T) {             \
    ck_pdl();                                                                                          \
    gemm<C>(Y, W, X, R, rows, cols, rowBytes, T);                                                      \
  }
DEF_GEMM(f32, CF32)
DEF_GEMM(f16, CF16)
DEF_GEMM(bf16, CBF16)
DEF_GEMM(q8_0, CQ8_0)
DEF_GEMM(q4_0, CQ4_0)
DEF_GEMM(q4_K, CQ4_K)
DEF_GEMM(q6_K, CQ6_K)
