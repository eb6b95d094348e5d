// dit.cu: the Z-Image transformer (diffusion/cudadev) on the tensor cores.
// Activations into every product are f16, accumulation f32, the residual
// stream f32:
//   ck_dit_gemm_*     Y = A·Wᵀ, A [M][K] f16, W [N][K] f16 (a linear's
//                     [out][in]); mma.sync m16n8k16 with ldmatrix from a
//                     swizzled shared memory fed by a multi-stage cp.async
//                     pipeline; 128×128 block tiles of 4 warps of 64×64,
//                     two blocks an SM (tilings _a, _b: see below).
//                     Epilogues: _h f16 out, _f f32 out, _fb f32 out + bias,
//                     _glu f16 SiLU(c[2j])·c[2j+1] into column j (the gate
//                     and up rows interleaved in W).
//   ck_dit_attn_*     non-causal flash attention over one sequence's rows,
//                     q, k, v f16 in one [rows][3·dim] buffer, out f16
//                     (head dim 32, 64: 16 query rows a warp, q in
//                     registers; ck_dit_attn2_128: 32 rows a warp sharing
//                     each k and v fragment, q from shared memory).
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
  asm(
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
template <int MODE, int WM, int WN, int BK, int ST, bool PF>
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
    // Fragments of step kk into buffer f (PF: the next step's are read
    // while this one's are multiplied).
    uint32_t a[PF ? 2 : 1][4][4], b[PF ? 2 : 1][4][4];
    auto frag = [&](int f, int kk) {
#pragma unroll
      for (int mi = 0; mi < 4; mi++) {
        const int r = wm + mi * 16 + (lane & 15), c = 2 * kk + (lane >> 4);
        dg_ldsm4(a[f][mi], as + 2 * dg_off<BK>(r, c));
      }
#pragma unroll
      for (int nj = 0; nj < 4; nj++) {
        const int r = wn + nj * 16 + (lane & 7) + ((lane >> 4) << 3), c = 2 * kk + ((lane >> 3) & 1);
        dg_ldsm4(b[f][nj], bs + 2 * dg_off<BK>(r, c));
      }
    };
    if (PF) frag(0, 0);
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
      const int f = PF ? (kk & 1) : 0;
      if (PF) {
        if (kk + 1 < BK / 16) frag((kk + 1) & 1, kk + 1);
      } else {
        frag(0, kk);
      }
#pragma unroll
      for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int nj = 0; nj < 4; nj++) {
          dg_mma(acc[mi][2 * nj], a[f][mi], b[f][nj][0], b[f][nj][1]);
          dg_mma(acc[mi][2 * nj + 1], a[f][mi], b[f][nj][2], b[f][nj][3]);
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
#define DEF_DIT_GEMM(name, MODE, WM, WN, BK, ST, PF)                                                      \
  CK void __launch_bounds__(32 * WM * WN, 1) ck_dit_gemm_##name(DIT_GEMM_ARGS) {                          \
    ck_pdl();                                                                                             \
    dit_gemm<MODE, WM, WN, BK, ST, PF>(Y, A, W, bias, M, N, K, ldy);                                      \
  }
// The products' two tilings (kernels.DiTGemmTiling): _a 128×128 blocks of
// 4 warps, K tiles of 64 in 3 stages (96 KiB, two blocks an SM); _b the
// same blocks with K tiles of 32 in 5 stages (80 KiB), quicker where N is
// narrow (≤ 4096: more blocks along M share each weight tile).
#ifndef DIT_PF
#define DIT_PF false
#endif
#define DEF_DIT_GEMM2(name, MODE)                   \
  DEF_DIT_GEMM(name##_a, MODE, 2, 2, 64, 3, DIT_PF) \
  DEF_DIT_GEMM(name##_b, MODE, 2, 2, 32, 5, DIT_PF)
DEF_DIT_GEMM2(h, DG_H)
DEF_DIT_GEMM2(f, DG_F)
DEF_DIT_GEMM2(fb, DG_FB)
DEF_DIT_GEMM2(glu, DG_GLU)
#ifdef DIT_GEMM_VARIANTS
// The mma.sync ceiling: each warp iters × 8 independent m16n8k16 f16 → f32
// products on registers (no memory); 4096 flops each.
CK void __launch_bounds__(256) ck_dit_mma_peak(float* out, int iters) {
  ck_pdl();
  uint32_t a[4] = {threadIdx.x, threadIdx.x * 3u, threadIdx.x * 5u, threadIdx.x * 7u};
  float c[8][4] = {};
  for (int i = 0; i < iters; i++) {
#pragma unroll
    for (int j = 0; j < 8; j++) dg_mma(c[j], a, a[j & 3], a[(j + 1) & 3]);
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 8; j++) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  if (s == 1.2345f) out[0] = s;
}
// Other tilings, for the benchmark's comparison only (compiled into a
// cubin with -DDIT_GEMM_VARIANTS; not in kernels.ptx):
// ck_dit_gemm_v<WM><WN>_<BK>_<ST>, f16 out.
DEF_DIT_GEMM(v24_64_3, DG_H, 2, 4, 64, 3, false)
DEF_DIT_GEMM(v24_64_3p, DG_H, 2, 4, 64, 3, true)
DEF_DIT_GEMM(v22_64_3, DG_H, 2, 2, 64, 3, false)
DEF_DIT_GEMM(v22_64_3p, DG_H, 2, 2, 64, 3, true)
DEF_DIT_GEMM(v22_32_5, DG_H, 2, 2, 32, 5, false)
DEF_DIT_GEMM(v22_32_5p, DG_H, 2, 2, 32, 5, true)
DEF_DIT_GEMM(v22_32_4p, DG_H, 2, 2, 32, 4, true)
DEF_DIT_GEMM(v22_64_2p, DG_H, 2, 2, 64, 2, true)
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
    const bool full = k0 + DA_BK <= n;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int p = k0 + 8 * j + 2 * t4 + (e & 1);
        const float v = (full || p < n) ? s[j][e] * sl2 : -INFINITY;
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
    ck_pdl();                                                                                               \
    dit_attn<HD, NW>(out, qkv, n, heads, ld, ldo, scale);                                                   \
  }
DEF_DIT_ATTN(32, 4)
DEF_DIT_ATTN(64, 4)
#ifdef DIT_GEMM_VARIANTS
DEF_DIT_ATTN(128, 4)
#endif

// dit_attn2: the same with 32 query rows a warp (two m16 tiles sharing
// every K and V fragment read from shared memory), Q staged in shared
// memory and read by ldmatrix each key tile; 4 warps, 128 queries a block.
template <int HD, int BKV>
__device__ __forceinline__ void dit_attn2(__half* __restrict__ out, const __half* __restrict__ qkv, int n, int heads,
                                          int ld, int ldo, float scale) {
  constexpr int LD = HD + 8, KS = HD / 16, ND = HD / 8, T = 128, BQ = 128, CH = HD / 8;
  extern __shared__ __align__(128) uint8_t smem[];
  __half* Qs = reinterpret_cast<__half*>(smem);  // [BQ][LD]
  __half* Ks = Qs + BQ * LD;                      // [2][BKV][LD]
  __half* Vs = Ks + 2 * BKV * LD;               // [2][BKV][LD]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int h = blockIdx.y, q0 = blockIdx.x * BQ;
  const int D = heads * HD;
  const __half* qb = qkv + (size_t)h * HD;
  const __half* kb = qb + D;
  const __half* vb = qb + 2 * D;
  {
    const uint32_t qs = dg_smem(Qs);
    for (int i = tid; i < BQ * CH; i += T) {
      const int r = i / CH, c = i % CH, p = q0 + r;
      const bool ok = p < n;
      dg_cp16(qs + 2 * (r * LD + c * 8), qb + (size_t)(ok ? p : 0) * ld + c * 8, ok);
    }
  }
  auto issue = [&](int buf, int k0) {
    const uint32_t ks = dg_smem(Ks + buf * BKV * LD), vs = dg_smem(Vs + buf * BKV * LD);
#pragma unroll
    for (int i = tid; i < BKV * CH; i += T) {
      const int r = i / CH, c = i % CH, p = k0 + r;
      const bool ok = p < n;
      const size_t off = (size_t)(ok ? p : 0) * ld + c * 8;
      dg_cp16(ks + 2 * (r * LD + c * 8), kb + off, ok);
      dg_cp16(vs + 2 * (r * LD + c * 8), vb + off, ok);
    }
  };
  float o[2][ND][4];
#pragma unroll
  for (int mi = 0; mi < 2; mi++)
#pragma unroll
    for (int j = 0; j < ND; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) o[mi][j][e] = 0.f;
  float m[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}}, l[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
  const float sl2 = scale * 1.4426950408889634f;
  const int nt = (n + BKV - 1) / BKV;
  issue(0, 0);
  dg_commit();  // Q and the first tile
  for (int kt = 0; kt < nt; kt++) {
    if (kt + 1 < nt) issue((kt + 1) & 1, (kt + 1) * BKV);
    dg_commit();
    dg_wait<1>();
    __syncthreads();
    const __half* K_ = Ks + (kt & 1) * BKV * LD;
    const __half* V_ = Vs + (kt & 1) * BKV * LD;
    float s[2][BKV / 8][4];
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
      for (int j = 0; j < BKV / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[mi][j][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
      uint32_t qa[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; mi++)
        dg_ldsm4(qa[mi], dg_smem(Qs + (warp * 32 + mi * 16 + (lane & 15)) * LD + ks * 16 + (lane >> 4) * 8));
#pragma unroll
      for (int j = 0; j < BKV / 8; j += 2) {
        uint32_t r[4];
        dg_ldsm4(r, dg_smem(K_ + (8 * (j + (lane >> 4)) + (lane & 7)) * LD + ks * 16 + ((lane >> 3) & 1) * 8));
#pragma unroll
        for (int mi = 0; mi < 2; mi++) {
          dg_mma(s[mi][j], qa[mi], r[0], r[1]);
          dg_mma(s[mi][j + 1], qa[mi], r[2], r[3]);
        }
      }
    }
    const int k0 = kt * BKV;
    const bool full = k0 + BKV <= n;
#pragma unroll
    for (int mi = 0; mi < 2; mi++) {
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int j = 0; j < BKV / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int p = k0 + 8 * j + 2 * t4 + (e & 1);
          const float v = (full || p < n) ? s[mi][j][e] * sl2 : -INFINITY;
          s[mi][j][e] = v;
          mx[e >> 1] = fmaxf(mx[e >> 1], v);
        }
      float corr[2];
#pragma unroll
      for (int hr = 0; hr < 2; hr++) {
        mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
        mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
        const float mn = fmaxf(m[mi][hr], mx[hr]);
        corr[hr] = exp2f(m[mi][hr] - mn);
        m[mi][hr] = mn;
      }
      float sum[2] = {0.f, 0.f};
#pragma unroll
      for (int j = 0; j < BKV / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const float p = exp2f(s[mi][j][e] - m[mi][e >> 1]);
          s[mi][j][e] = p;
          sum[e >> 1] += p;
        }
      l[mi][0] = l[mi][0] * corr[0] + sum[0];
      l[mi][1] = l[mi][1] * corr[1] + sum[1];
#pragma unroll
      for (int j = 0; j < ND; j++) {
        o[mi][j][0] *= corr[0]; o[mi][j][1] *= corr[0];
        o[mi][j][2] *= corr[1]; o[mi][j][3] *= corr[1];
      }
    }
#pragma unroll
    for (int ss = 0; ss < BKV / 16; ss++) {
      uint32_t pa[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; mi++) {
        __half2 h0 = __floats2half2_rn(s[mi][2 * ss][0], s[mi][2 * ss][1]);
        __half2 h1 = __floats2half2_rn(s[mi][2 * ss][2], s[mi][2 * ss][3]);
        __half2 h2 = __floats2half2_rn(s[mi][2 * ss + 1][0], s[mi][2 * ss + 1][1]);
        __half2 h3 = __floats2half2_rn(s[mi][2 * ss + 1][2], s[mi][2 * ss + 1][3]);
        pa[mi][0] = *reinterpret_cast<uint32_t*>(&h0);
        pa[mi][1] = *reinterpret_cast<uint32_t*>(&h1);
        pa[mi][2] = *reinterpret_cast<uint32_t*>(&h2);
        pa[mi][3] = *reinterpret_cast<uint32_t*>(&h3);
      }
#pragma unroll
      for (int j = 0; j < ND; j += 2) {
        uint32_t r[4];
        dg_ldsm4t(r, dg_smem(V_ + (16 * ss + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + 8 * (j + (lane >> 4))));
#pragma unroll
        for (int mi = 0; mi < 2; mi++) {
          dg_mma(o[mi][j], pa[mi], r[0], r[1]);
          dg_mma(o[mi][j + 1], pa[mi], r[2], r[3]);
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int mi = 0; mi < 2; mi++)
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
      float lt = l[mi][hr];
      lt += __shfl_xor_sync(0xffffffffu, lt, 1);
      lt += __shfl_xor_sync(0xffffffffu, lt, 2);
      const int r = q0 + warp * 32 + mi * 16 + g + 8 * hr;
      if (r >= n) continue;
      const float inv = 1.f / lt;
      __half* dst = out + (size_t)r * ldo + (size_t)h * HD + 2 * t4;
#pragma unroll
      for (int j = 0; j < ND; j++)
        *reinterpret_cast<__half2*>(dst + 8 * j) = __floats2half2_rn(o[mi][j][2 * hr] * inv, o[mi][j][2 * hr + 1] * inv);
    }
}

// Head dim 128 (Z-Image): 269 TFLOP/s on the H200 at 4128 rows, 30 heads
// (ck_dit_attn_128: 188-201).
CK void __launch_bounds__(128) ck_dit_attn2_128(__half* out, const __half* qkv, int n, int heads, int ld, int ldo,
                                                float scale) {
  ck_pdl();
  dit_attn2<128, 64>(out, qkv, n, heads, ld, ldo, scale);
}
#ifdef DIT_GEMM_VARIANTS
CK void __launch_bounds__(128) ck_dit_attn2b_128(__half* out, const __half* qkv, int n, int heads, int ld, int ldo,
                                                 float scale) {
  ck_pdl();
  dit_attn2<128, 32>(out, qkv, n, heads, ld, ldo, scale);
}
#endif

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
  ck_pdl();
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
  ck_pdl();
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
  ck_pdl();
  const int item = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (item >= rows * 2 * heads) return;
  const int row = item / (2 * heads), hh = item % (2 * heads);
  const float* nw = hh < heads ? qn : kn;
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
}
