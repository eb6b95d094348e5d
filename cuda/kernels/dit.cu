// dit.cu: the Z-Image transformer (diffusion/cudadev) on the tensor cores.
// Activations into every product are f16, accumulation f32, the residual
// stream f32:
//   ck_dit_gemm_*     Y = A·Wᵀ, A [M][K] f16, W [N][K] f16 (a linear's
//                     [out][in]); mma.sync m16n8k16 with ldmatrix from a
//                     swizzled shared memory fed by a 3-stage cp.async
//                     pipeline; 128×256×64 block tiles, 8 warps of 64×64.
//                     Epilogues: _h f16 out, _f f32 out, _fb f32 out + bias,
//                     _glu f16 SiLU(c[2j])·c[2j+1] into column j (the gate
//                     and up rows interleaved in W).
//   ck_dit_attn_*     non-causal flash attention over one sequence's rows,
//                     q, k, v f16 in one [rows][3·dim] buffer, out f16.
//   ck_dit_norm       f16 out = norm(x)·w·scale per row (RMS or LayerNorm).
//   ck_dit_norm_add   u += gate·rms(x)·w; then optionally h = rms(u)·w2·s2.
//   ck_dit_qkrope     per head RMS norm (qk-norm) and RoPE of q and k, in place.
#include "common.cuh"

#define DG_BM 128
#define DG_BN 256
#define DG_BK 64
#define DG_ST 3

__device__ __forceinline__ uint32_t dg_smem(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void dg_cp16(uint32_t dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void dg_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void dg_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

__device__ __forceinline__ void dg_ldsm4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void dg_ldsm4t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void dg_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float dg_silu(float x) { return x / (1.f + __expf(-x)); }

// A shared tile row is BK halves (BK 64: 128 bytes, 8 chunks of 16;
// BK 32: 64 bytes, 4 chunks). Chunk c of row r sits at c ^ (r & 7) (BK
// 64) or c ^ ((r >> 1) & 3) (BK 32), so that ldmatrix's 8 rows at one
// chunk and cp.async's stores land on distinct banks.
template <int BK>
__device__ __forceinline__ int dg_off(int r, int c) {
  if (BK == 64) return r * 64 + ((c ^ (r & 7)) << 3);
  return r * 32 + ((c ^ ((r >> 1) & 3)) << 3);
}

enum { DG_H = 0, DG_F = 1, DG_FB = 2, DG_GLU = 3 };

// Block tile (64·WM) × (64·WN) of Y, WM×WN warps of 64×64, K tiles of BK
// in ST stages.
template <int MODE, int WM, int WN, int BK, int ST>
__device__ __forceinline__ void dit_gemm(void* __restrict__ Y, const __half* __restrict__ A,
                                         const __half* __restrict__ W, const float* __restrict__ bias, int M, int N,
                                         int K, int ldy) {
  constexpr int BM = 64 * WM, BN = 64 * WN, NT = 32 * WM * WN, CPR = BK / 8;
  extern __shared__ __align__(128) uint8_t smem[];
  __half* As = reinterpret_cast<__half*>(smem);  // [ST][BM][BK]
  __half* Bs = As + ST * BM * BK;                 // [ST][BN][BK]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int wm = (warp % WM) * 64, wn = (warp / WM) * 64;
  const int KT = K / BK;

  // Loader: chunk i is row i / CPR, column chunk i % CPR.
  auto load = [&](int st, int kt) {
    const int k0 = kt * BK;
    const uint32_t as = dg_smem(As + st * BM * BK), bs = dg_smem(Bs + st * BN * BK);
#pragma unroll
    for (int j = 0; j < BM * CPR / NT; j++) {
      const int i = tid + NT * j, r = i / CPR, c = i % CPR, gm = m0 + r;
      const bool ok = gm < M;
      dg_cp16(as + 2 * dg_off<BK>(r, c), A + (size_t)(ok ? gm : 0) * K + k0 + c * 8, ok);
    }
#pragma unroll
    for (int j = 0; j < BN * CPR / NT; j++) {
      const int i = tid + NT * j, r = i / CPR, c = i % CPR, gn = n0 + r;
      const bool ok = gn < N;
      dg_cp16(bs + 2 * dg_off<BK>(r, c), W + (size_t)(ok ? gn : 0) * K + k0 + c * 8, ok);
    }
  };

  float acc[4][8][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < ST - 1; s++) {
    if (s < KT) load(s, s);
    dg_commit();
  }
  for (int kt = 0; kt < KT; kt++) {
    dg_wait<ST - 2>();
    __syncthreads();  // tile kt landed; every warp is done with tile kt-1's stage
    if (kt + ST - 1 < KT) load((kt + ST - 1) % ST, kt + ST - 1);
    dg_commit();
    const int st = kt % ST;
    const uint32_t as = dg_smem(As + st * BM * BK), bs = dg_smem(Bs + st * BN * BK);
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
      uint32_t a[4][4], b[4][4];
#pragma unroll
      for (int mi = 0; mi < 4; mi++) {
        const int r = wm + mi * 16 + (lane & 15), c = 2 * kk + (lane >> 4);
        dg_ldsm4(a[mi], as + 2 * dg_off<BK>(r, c));
      }
#pragma unroll
      for (int nj = 0; nj < 4; nj++) {
        const int r = wn + nj * 16 + (lane & 7) + ((lane >> 4) << 3), c = 2 * kk + ((lane >> 3) & 1);
        dg_ldsm4(b[nj], bs + 2 * dg_off<BK>(r, c));
      }
#pragma unroll
      for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int nj = 0; nj < 4; nj++) {
          dg_mma(acc[mi][2 * nj], a[mi], b[nj][0], b[nj][1]);
          dg_mma(acc[mi][2 * nj + 1], a[mi], b[nj][2], b[nj][3]);
        }
    }
  }
  dg_wait<0>();

  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int mi = 0; mi < 4; mi++)
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
      const int m = m0 + wm + mi * 16 + g + 8 * hr;
      if (m >= M) continue;
#pragma unroll
      for (int ni = 0; ni < 8; ni++) {
        const int n = n0 + wn + ni * 8 + 2 * t4;
        if (n >= N) continue;
        const float c0 = acc[mi][ni][2 * hr], c1 = acc[mi][ni][2 * hr + 1];
        if (MODE == DG_H) {
          *reinterpret_cast<__half2*>(reinterpret_cast<__half*>(Y) + (size_t)m * ldy + n) = __floats2half2_rn(c0, c1);
        } else if (MODE == DG_F) {
          *reinterpret_cast<float2*>(reinterpret_cast<float*>(Y) + (size_t)m * ldy + n) = make_float2(c0, c1);
        } else if (MODE == DG_FB) {
          *reinterpret_cast<float2*>(reinterpret_cast<float*>(Y) + (size_t)m * ldy + n) =
              make_float2(c0 + bias[n], c1 + bias[n + 1]);
        } else {
          reinterpret_cast<__half*>(Y)[(size_t)m * ldy + (n >> 1)] = __float2half_rn(dg_silu(c0) * c1);
        }
      }
    }
}

#define DIT_GEMM_ARGS                                                                                     \
  void *Y, const __half *A, const __half *W, const float *bias, int M, int N, int K, int ldy
#define DEF_DIT_GEMM(name, MODE, WM, WN, BK, ST)                                                          \
  CK void __launch_bounds__(32 * WM * WN, 1) ck_dit_gemm_##name(DIT_GEMM_ARGS) {                          \
    dit_gemm<MODE, WM, WN, BK, ST>(Y, A, W, bias, M, N, K, ldy);                                          \
  }
// The tiling of every product (kernels.DiTGemm*): 128×256, K tiles of 64,
// 3 stages (144 KiB of shared memory).
DEF_DIT_GEMM(h, DG_H, 2, 4, 64, 3)
DEF_DIT_GEMM(f, DG_F, 2, 4, 64, 3)
DEF_DIT_GEMM(fb, DG_FB, 2, 4, 64, 3)
DEF_DIT_GEMM(glu, DG_GLU, 2, 4, 64, 3)
#ifdef DIT_GEMM_VARIANTS
// Other tilings, for the benchmark's comparison only (compiled into a
// cubin with -DDIT_GEMM_VARIANTS; not in kernels.ptx):
// ck_dit_gemm_v<WM><WN>_<BK>_<ST>, f16 out.
DEF_DIT_GEMM(v24_64_4, DG_H, 2, 4, 64, 4)
DEF_DIT_GEMM(v24_32_4, DG_H, 2, 4, 32, 4)
DEF_DIT_GEMM(v42_64_3, DG_H, 4, 2, 64, 3)
DEF_DIT_GEMM(v22_64_3, DG_H, 2, 2, 64, 3)
DEF_DIT_GEMM(v22_64_4, DG_H, 2, 2, 64, 4)
DEF_DIT_GEMM(v22_32_5, DG_H, 2, 2, 32, 5)
#endif

// ---- attention ----
// Block: NW warps of 16 query rows each; key/value tiles of 64 rows
// double-buffered by cp.async as f16 in shared memory ([64][HD+8]).
// Scores in log2 units (scale·log2 e folded in), exp2; P rounded to f16
// for the P·V product; the row sums in f32.
#define DA_BK 64

template <int HD, int NW>
__device__ __forceinline__ void dit_attn(__half* __restrict__ out, const __half* __restrict__ qkv, int n, int heads,
                                         int ld, int ldo, float scale) {
  constexpr int LD = HD + 8, KS = HD / 16, ND = HD / 8, T = 32 * NW;
  extern __shared__ __align__(128) uint8_t smem[];
  __half* Ks = reinterpret_cast<__half*>(smem);  // [2][DA_BK][LD]
  __half* Vs = Ks + 2 * DA_BK * LD;               // [2][DA_BK][LD]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int h = blockIdx.y, q0 = blockIdx.x * 16 * NW;
  const int D = heads * HD;
  const __half* qb = qkv + (size_t)h * HD;
  const __half* kb = qb + D;
  const __half* vb = qb + 2 * D;
  const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;

  uint32_t qf[KS][4];
#pragma unroll
  for (int ks = 0; ks < KS; ks++)
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int r = (i & 1) ? r1 : r0, c = ks * 16 + 2 * t4 + ((i & 2) ? 8 : 0);
      qf[ks][i] = r < n ? *reinterpret_cast<const uint32_t*>(qb + (size_t)r * ld + c) : 0u;
    }
  float o[ND][4];
#pragma unroll
  for (int j = 0; j < ND; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) o[j][e] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const float sl2 = scale * 1.4426950408889634f;

  constexpr int CH = HD / 8;  // 16-byte chunks a row
  auto issue = [&](int buf, int k0) {
    const uint32_t ks = dg_smem(Ks + buf * DA_BK * LD), vs = dg_smem(Vs + buf * DA_BK * LD);
#pragma unroll
    for (int i = tid; i < DA_BK * CH; i += T) {
      const int r = i / CH, c = i % CH, p = k0 + r;
      const bool ok = p < n;
      const size_t off = (size_t)(ok ? p : 0) * ld + c * 8;
      dg_cp16(ks + 2 * (r * LD + c * 8), kb + off, ok);
      dg_cp16(vs + 2 * (r * LD + c * 8), vb + off, ok);
    }
  };
  const int nt = (n + DA_BK - 1) / DA_BK;
  issue(0, 0);
  dg_commit();
  for (int kt = 0; kt < nt; kt++) {
    if (kt + 1 < nt) issue((kt + 1) & 1, (kt + 1) * DA_BK);
    dg_commit();
    dg_wait<1>();
    __syncthreads();
    const __half* K_ = Ks + (kt & 1) * DA_BK * LD;
    const __half* V_ = Vs + (kt & 1) * DA_BK * LD;
    float s[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[j][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
#pragma unroll
      for (int j = 0; j < 8; j += 2) {
        uint32_t r[4];
        dg_ldsm4(r, dg_smem(K_ + (8 * (j + (lane >> 4)) + (lane & 7)) * LD + ks * 16 + ((lane >> 3) & 1) * 8));
        dg_mma(s[j], qf[ks], r[0], r[1]);
        dg_mma(s[j + 1], qf[ks], r[2], r[3]);
      }
    const int k0 = kt * DA_BK;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int p = k0 + 8 * j + 2 * t4 + (e & 1);
        const float v = p < n ? s[j][e] * sl2 : -INFINITY;
        s[j][e] = v;
        mx[e >> 1] = fmaxf(mx[e >> 1], v);
      }
    float corr[2];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
      mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
      mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
      const float mn = fmaxf(m[hr], mx[hr]);
      corr[hr] = exp2f(m[hr] - mn);
      m[hr] = mn;
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const float p = exp2f(s[j][e] - m[e >> 1]);
        s[j][e] = p;
        sum[e >> 1] += p;
      }
    l[0] = l[0] * corr[0] + sum[0];
    l[1] = l[1] * corr[1] + sum[1];
#pragma unroll
    for (int j = 0; j < ND; j++) {
      o[j][0] *= corr[0]; o[j][1] *= corr[0];
      o[j][2] *= corr[1]; o[j][3] *= corr[1];
    }
#pragma unroll
    for (int ss = 0; ss < DA_BK / 16; ss++) {
      uint32_t pa[4];
      __half2 h0 = __floats2half2_rn(s[2 * ss][0], s[2 * ss][1]);
      __half2 h1 = __floats2half2_rn(s[2 * ss][2], s[2 * ss][3]);
      __half2 h2 = __floats2half2_rn(s[2 * ss + 1][0], s[2 * ss + 1][1]);
      __half2 h3 = __floats2half2_rn(s[2 * ss + 1][2], s[2 * ss + 1][3]);
      pa[0] = *reinterpret_cast<uint32_t*>(&h0);
      pa[1] = *reinterpret_cast<uint32_t*>(&h1);
      pa[2] = *reinterpret_cast<uint32_t*>(&h2);
      pa[3] = *reinterpret_cast<uint32_t*>(&h3);
#pragma unroll
      for (int j = 0; j < ND; j += 2) {
        uint32_t r[4];
        dg_ldsm4t(r, dg_smem(V_ + (16 * ss + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + 8 * (j + (lane >> 4))));
        dg_mma(o[j], pa, r[0], r[1]);
        dg_mma(o[j + 1], pa, r[2], r[3]);
      }
    }
    __syncthreads();  // done with this buffer before the next issue overwrites it
  }
#pragma unroll
  for (int hr = 0; hr < 2; hr++) {
    l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 1);
    l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 2);
    const int r = hr ? r1 : r0;
    if (r >= n) continue;
    const float inv = 1.f / l[hr];
    __half* dst = out + (size_t)r * ldo + (size_t)h * HD + 2 * t4;
#pragma unroll
    for (int j = 0; j < ND; j++)
      *reinterpret_cast<__half2*>(dst + 8 * j) = __floats2half2_rn(o[j][2 * hr] * inv, o[j][2 * hr + 1] * inv);
  }
}

#define DEF_DIT_ATTN(HD, NW)                                                                                \
  CK void __launch_bounds__(32 * NW) ck_dit_attn_##HD(__half* out, const __half* qkv, int n, int heads, int ld, \
                                                      int ldo, float scale) {                               \
    dit_attn<HD, NW>(out, qkv, n, heads, ld, ldo, scale);                                                   \
  }
DEF_DIT_ATTN(32, 4)
DEF_DIT_ATTN(64, 4)
DEF_DIT_ATTN(128, 4)

// ---- row kernels: one block of 256 threads a row ----
__device__ __forceinline__ float dg_block_sum(float v, float* red) {
  v = warp_sum(v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // red is free (an earlier sum has been read)
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < (blockDim.x >> 5) ? red[lane] : 0.f;
  return warp_sum(t);
}

// out[row] = f16(norm(x[row])·w·scale): mode 0 RMS (eps), 1 LayerNorm
// without affine (eps); w and scale may be null.
CK void __launch_bounds__(256) ck_dit_norm(__half* out, const float* x, const float* w, const float* scale, int D,
                                           float eps, int mode) {
  __shared__ float red[32];
  const float* xr = x + (size_t)blockIdx.x * D;
  __half* orow = out + (size_t)blockIdx.x * D;
  float mean = 0.f;
  if (mode == 1) {
    float s = 0.f;
    for (int i = threadIdx.x; i < D; i += blockDim.x) s += xr[i];
    mean = dg_block_sum(s, red) / D;
  }
  float ss = 0.f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    const float d = xr[i] - mean;
    ss += d * d;
  }
  const float inv = rsqrtf(dg_block_sum(ss, red) / D + eps);
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float v = (xr[i] - mean) * inv;
    if (w) v *= w[i];
    if (scale) v *= scale[i];
    orow[i] = __float2half_rn(v);
  }
}

// u[row] += gate·rms(x[row])·w (gate null: ungated); then, with h, h[row] =
// f16(rms(u[row])·w2·s2) (w2, s2 may be null).
CK void __launch_bounds__(256) ck_dit_norm_add(float* u, const float* x, const float* w, const float* gate,
                                               __half* h, const float* w2, const float* s2, int D, float eps) {
  __shared__ float red[32];
  const float* xr = x + (size_t)blockIdx.x * D;
  float* ur = u + (size_t)blockIdx.x * D;
  float ss = 0.f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) ss += xr[i] * xr[i];
  const float inv = rsqrtf(dg_block_sum(ss, red) / D + eps);
  float su = 0.f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float v = xr[i] * inv;
    if (w) v *= w[i];
    if (gate) v *= gate[i];
    const float nu = ur[i] + v;
    ur[i] = nu;
    su += nu * nu;
  }
  if (!h) return;
  const float inv2 = rsqrtf(dg_block_sum(su, red) / D + eps);
  __half* hr = h + (size_t)blockIdx.x * D;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float v = ur[i] * inv2;
    if (w2) v *= w2[i];
    if (s2) v *= s2[i];
    hr[i] = __float2half_rn(v);
  }
}

// q and k heads of qkv [rows][ld] (q at column 0, k at heads·hd): RMS norm
// over the head (weights qn, kn; null: none) then the rotation of each pair
// (2i, 2i+1) by rope[row][2i], rope[row][2i+1] (cos, sin); one warp a
// (row, q-or-k head), hd ≤ 256 and even.
CK void __launch_bounds__(256) ck_dit_qkrope(__half* qkv, const float* rope, const float* qn, const float* kn,
                                             int rows, int heads, int hd, int ld, float eps) {
  const int item = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (item >= rows * 2 * heads) return;
  const int row = item / (2 * heads), hh = item % (2 * heads);
  const float* nw = hh < heads ? qn : kn;
  const int hw = hh < heads ? hh : hh - heads;
  __half* x = qkv + (size_t)row * ld + (size_t)hh * hd;
  const float* cs = rope + (size_t)row * hd;
  float2 v[4];
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const int p = lane + 32 * j;
    if (2 * p < hd) {
      v[j] = __half22float2(*reinterpret_cast<const __half2*>(x + 2 * p));
      ss += v[j].x * v[j].x + v[j].y * v[j].y;
    }
  }
  float inv = 1.f;
  if (nw) inv = rsqrtf(warp_sum(ss) / hd + eps);
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const int p = lane + 32 * j;
    if (2 * p < hd) {
      float a = v[j].x, b = v[j].y;
      if (nw) {
        a *= inv * nw[2 * p];
        b *= inv * nw[2 * p + 1];
      }
      const float c = cs[2 * p], s = cs[2 * p + 1];
      *reinterpret_cast<__half2*>(x + 2 * p) = __floats2half2_rn(a * c - b * s, a * s + b * c);
    }
  }
  (void)hw;
}
