// gemmq.cu: prefill products on the int8 tensor cores, for quantized
// weights (q8_0, q4_0, q4_K, q6_K), as llama.cpp's MMQ computes them:
//
//   ck_quant_q8        the activation X[T][cols] (or act(G)·U, the GLU's
//                      product, fused) rounded to int8 per 32 columns, once
//                      for every product that reads it: Xq int8[T][cols]
//                      and Xds float2[T][cols/32] {d, d·Σq} (d = amax/127,
//                      round half to even: the decode matvec's ck_mvq_* and
//                      the CPU's Int8 mode round the same way);
//   ck_mmq_<codec>     Y[T][rows] = Xq · Wᵀ (+R), 128 tokens × 128 weight
//   ck_mmqs_<codec>    rows a block (ck_mmqs_: 64 tokens, for grids that
//                      would not fill the device).
//
// Each block stages 64 columns at a time (two groups of 32) in shared
// memory, double buffered: the next stage's activation bytes and scales
// arrive by cp.async and its weights are read into registers while the
// current stage is multiplied; the weights are unpacked to int8 in shared
// memory (q4_0 as q−8, q4_K's nibbles as they are with the block minimum
// kept apart, q6_K as q−32). 8 warps, 2 along tokens × 4 along rows, each
// multiply their tile with mma.sync m16n8k32 s8·s8 → s32 (q6_K: two
// m16n8k16, one per 16-column scale) from ldmatrix fragments; every group of
// 32 columns' int32 sums are scaled into f32 accumulators:
//   y += dx·dw·Σ qx·qw − sx·mw   (sx = dx·Σqx, mw the q4_K minimum, else 0).
// cols must be a multiple of 64.
#include "common.cuh"

#define QBN 128        // weight rows per block
#define QBK 64         // columns per stage
#define QLD (QBK + 16)  // shared row stride in bytes: 80, ldmatrix without bank conflicts

// ---- activation quantization: 8 threads per group of 32 (4 values each,
// 16-byte loads), 32 groups a block; grid (ceil(cols/1024), T). With
// u != nullptr the value is act(x)·u (the GLU's product, as ck_act_mul
// computes it).
CK void __launch_bounds__(256) ck_quant_q8(int8_t* __restrict__ xq, float2* __restrict__ xds, const float* __restrict__ x,
                                           const float* __restrict__ u, int T, int cols, int xStride, int uStride, int act) {
  ck_pdl();
  const int t = blockIdx.y, c = (blockIdx.x * 256 + threadIdx.x) * 4;
  if (t >= T || blockIdx.x * 1024 >= cols) return;  // whole blocks only: the shuffles below take the full warp
  const bool ok = c < cols;
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if (ok) {
    v = *reinterpret_cast<const float4*>(x + (size_t)t * xStride + c);
    if (u) {
      const float4 w = *reinterpret_cast<const float4*>(u + (size_t)t * uStride + c);
      v = make_float4(act_fn(v.x, act) * w.x, act_fn(v.y, act) * w.y, act_fn(v.z, act) * w.z, act_fn(v.w, act) * w.w);
    }
  }
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
  for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  const int q0 = __float2int_rn(v.x * id), q1 = __float2int_rn(v.y * id), q2 = __float2int_rn(v.z * id),
            q3 = __float2int_rn(v.w * id);
  int sum = q0 + q1 + q2 + q3;
#pragma unroll
  for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (!ok) return;
  *reinterpret_cast<char4*>(xq + (size_t)t * cols + c) = make_char4((signed char)q0, (signed char)q1, (signed char)q2, (signed char)q3);
  if ((threadIdx.x & 7) == 0) xds[(size_t)t * (cols >> 5) + (c >> 5)] = make_float2(d, d * (float)sum);
}

// ---- weight stage loaders. A thread owns one weight row's half of a
// stage (h = 0, 1 of the stage's chunk pair p: chunks 2p, 2p+1): load()
// reads its bytes into registers, store() writes 32 int8 and one float2
// of scales into the stage's shared row. The float2 is {scale, min} for
// q4_K (w = scale·q − min), {scale of values 0..15, of 16..31} for q6_K,
// {scale, 0} for q8_0 and q4_0.
template <class C>
struct QW;

template <>
struct QW<CQ8_0> {
  static constexpr bool kMin = false, kSplit = false;
  uint4 a, b;
  float d;
  __device__ __forceinline__ void load(const uint8_t* row, int nchunk, int p, int h) {
    const int c = 2 * p + h;
    const uint4* q = reinterpret_cast<const uint4*>(row + c * 32);
    a = q[0];
    b = q[1];
    d = h2f(row + nchunk * 32 + 2 * c);
  }
  __device__ __forceinline__ void store(int8_t* srow, float2* ssc, int h) const {
    uint4* o = reinterpret_cast<uint4*>(srow + 32 * h);
    o[0] = a;
    o[1] = b;
    ssc[h] = make_float2(d, 0.f);
  }
};

template <>
struct QW<CQ4_0> {
  static constexpr bool kMin = false, kSplit = false;
  uint4 a;
  float d;
  __device__ __forceinline__ void load(const uint8_t* row, int nchunk, int p, int h) {
    const int c = 2 * p + h;
    a = *reinterpret_cast<const uint4*>(row + c * 16);
    d = h2f(row + nchunk * 16 + 2 * c);
  }
  __device__ __forceinline__ void store(int8_t* srow, float2* ssc, int h) const {
    // value j (0..15) is byte j's low nibble, value 16+j its high nibble.
    const uint32_t w[4] = {a.x, a.y, a.z, a.w};
    uint4 lo, hi;
    uint32_t* L = reinterpret_cast<uint32_t*>(&lo);
    uint32_t* H = reinterpret_cast<uint32_t*>(&hi);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      L[i] = __vsubss4(w[i] & 0x0f0f0f0fu, 0x08080808u);
      H[i] = __vsubss4((w[i] >> 4) & 0x0f0f0f0fu, 0x08080808u);
    }
    uint4* o = reinterpret_cast<uint4*>(srow + 32 * h);
    o[0] = lo;
    o[1] = hi;
    ssc[h] = make_float2(d, 0.f);
  }
};

// q4_K: the chunk pair (2p, 2p+1) shares 32 bytes, low nibbles chunk 2p's
// values, high nibbles chunk 2p+1's. Thread h reads bytes 16h..16h+15: the
// values 16h.. of both chunks; its scales are chunk 2p+h's.
template <>
struct QW<CQ4_K> {
  static constexpr bool kMin = true, kSplit = false;
  uint4 a;
  float2 s;
  __device__ __forceinline__ void load(const uint8_t* row, int, int p, int h) {
    const uint8_t* blk = row + (p >> 2) * 144;
    a = *reinterpret_cast<const uint4*>(blk + 16 + 32 * (p & 3) + 16 * h);
    int sc, m;
    q4k_scale_min((2 * p + h) & 7, blk + 4, sc, m);
    s = make_float2(h2f(blk) * (float)sc, h2f(blk + 2) * (float)m);
  }
  __device__ __forceinline__ void store(int8_t* srow, float2* ssc, int h) const {
    uint4 lo, hi;
    lo.x = a.x & 0x0f0f0f0fu; lo.y = a.y & 0x0f0f0f0fu; lo.z = a.z & 0x0f0f0f0fu; lo.w = a.w & 0x0f0f0f0fu;
    hi.x = (a.x >> 4) & 0x0f0f0f0fu; hi.y = (a.y >> 4) & 0x0f0f0f0fu;
    hi.z = (a.z >> 4) & 0x0f0f0f0fu; hi.w = (a.w >> 4) & 0x0f0f0f0fu;
    *reinterpret_cast<uint4*>(srow + 16 * h) = lo;
    *reinterpret_cast<uint4*>(srow + 32 + 16 * h) = hi;
    ssc[h] = s;
  }
};

// q6_K: chunk c's 32 values in order (deq_lin<CQ6_K>'s layout), two
// scales of 16.
template <>
struct QW<CQ6_K> {
  static constexpr bool kMin = false, kSplit = true;
  uint4 l0, l1, h0, h1;
  float2 s;
  int lsh, hsh;
  __device__ __forceinline__ void load(const uint8_t* row, int nchunk, int p, int h) {
    const int c = 2 * p + h, b = c >> 3, half = (c >> 2) & 1, part = c & 3;
    const uint8_t* blk = row + b * 208;
    const float d = h2f(row + (nchunk >> 3) * 208 + 2 * b);
    const uint4* ql = reinterpret_cast<const uint4*>(blk + 64 * half + (part & 1) * 32);
    const uint4* qh = reinterpret_cast<const uint4*>(blk + 128 + 32 * half);
    l0 = ql[0]; l1 = ql[1]; h0 = qh[0]; h1 = qh[1];
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192) + 8 * half + 2 * part;
    s = make_float2(d * (float)sc[0], d * (float)sc[1]);
    lsh = (part >> 1) * 4;
    hsh = 2 * part;
  }
  __device__ __forceinline__ uint32_t v4(uint32_t l, uint32_t hb) const {
    return __vsubss4(((l >> lsh) & 0x0f0f0f0fu) | (((hb >> hsh) & 0x03030303u) << 4), 0x20202020u);
  }
  __device__ __forceinline__ void store(int8_t* srow, float2* ssc, int h) const {
    uint4 a, b;
    a.x = v4(l0.x, h0.x); a.y = v4(l0.y, h0.y); a.z = v4(l0.z, h0.z); a.w = v4(l0.w, h0.w);
    b.x = v4(l1.x, h1.x); b.y = v4(l1.y, h1.y); b.z = v4(l1.z, h1.z); b.w = v4(l1.w, h1.w);
    uint4* o = reinterpret_cast<uint4*>(srow + 32 * h);
    o[0] = a;
    o[1] = b;
    ssc[h] = s;
  }
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global → shared, zero-filled when !ok (src must still be valid).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(ok ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p))
               : "memory");
}

__device__ __forceinline__ void mma_k32(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_k16(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

template <class C, int BM>
__device__ __forceinline__ void mmq(float* __restrict__ Y, const uint8_t* __restrict__ W, const int8_t* __restrict__ Xq,
                                    const float2* __restrict__ Xds, const float* __restrict__ R, int rows, int cols,
                                    int rowBytes, int T) {
  using L = QW<C>;
  constexpr int MI = BM / 32;  // m16 tiles per warp (warp tile BM/2 tokens × 32 rows)
  constexpr int NJ = 4;        // n8 tiles per warp
  constexpr int XS = BM * QLD, WS = QBN * QLD;  // bytes of a stage's X and W tiles
  extern __shared__ __align__(16) uint8_t smem[];
  int8_t* Xs = reinterpret_cast<int8_t*>(smem);                     // [2][BM][QLD]
  int8_t* Ws = Xs + 2 * XS;                                          // [2][QBN][QLD]
  float2* Xsc = reinterpret_cast<float2*>(Ws + 2 * WS);              // [2][BM][2]
  float2* Wsc = Xsc + 2 * BM * 2;                                    // [2][QBN][2]

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int n0 = blockIdx.x * QBN, m0 = blockIdx.y * BM;
  const int nchunk = cols >> 5, nb = cols >> 5, nk = cols / QBK;

  // Weight loader: row n0 + tid/2, half tid%2 of each stage.
  const int wr = tid >> 1, wh = tid & 1;
  const bool wok = n0 + wr < rows;
  const uint8_t* wrow = W + (size_t)(wok ? n0 + wr : 0) * rowBytes;
  L wl;
  auto wload = [&](int kt) {
    if (wok) wl.load(wrow, nchunk, kt, wh);
  };
  auto wstore = [&](int st) {
    int8_t* srow = Ws + st * WS + wr * QLD;
    float2* ssc = Wsc + (st * QBN + wr) * 2;
    if (wok) wl.store(srow, ssc, wh);
    else {
      *reinterpret_cast<uint4*>(srow + 32 * wh) = make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(srow + 32 * wh + 16) = make_uint4(0, 0, 0, 0);
      ssc[wh] = make_float2(0.f, 0.f);
    }
  };
  // Activation loader: BM rows × 64 bytes and BM × 2 float2 a stage, by cp.async.
  auto xload = [&](int kt, int st) {
    const int k0 = kt * QBK;
#pragma unroll
    for (int i = tid; i < BM * 4; i += 256) {
      const int r = i >> 2, c = i & 3;
      const bool ok = m0 + r < T;
      const int8_t* src = Xq + (size_t)(ok ? m0 + r : 0) * cols + k0 + 16 * c;
      cp_async16(Xs + st * XS + r * QLD + 16 * c, src, ok);
    }
    if (tid < BM) {
      const bool ok = m0 + tid < T;
      const float2* src = Xds + (size_t)(ok ? m0 + tid : 0) * nb + 2 * kt;
      cp_async16(Xsc + (st * BM + tid) * 2, src, ok);
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };

  const int wm = (warp >> 2) * (BM / 2), wn = (warp & 3) * 32;
  float acc[MI][NJ][4];
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

  xload(0, 0);
  wload(0);
  wstore(0);
  cp_async_wait_all();
  __syncthreads();

  for (int kt = 0; kt < nk; kt++) {
    const int st = kt & 1;
    const bool more = kt + 1 < nk;
    if (more) {
      xload(kt + 1, st ^ 1);
      wload(kt + 1);
    }
    const int8_t* xs = Xs + st * XS;
    const int8_t* ws = Ws + st * WS;
    const float2* xsc = Xsc + st * BM * 2;
    const float2* wsc = Wsc + st * QBN * 2;
#pragma unroll
    for (int kc = 0; kc < 2; kc++) {
      uint32_t a[MI][4], b[NJ][2];
#pragma unroll
      for (int i = 0; i < MI; i++)
        ldsm_x4(a[i], xs + (wm + 16 * i + (lane & 15)) * QLD + kc * 32 + (lane >> 4) * 16);
#pragma unroll
      for (int j = 0; j < NJ; j += 2) {
        uint32_t r[4];
        ldsm_x4(r, ws + (wn + 8 * (j + (lane >> 4)) + (lane & 7)) * QLD + kc * 32 + ((lane >> 3) & 1) * 16);
        b[j][0] = r[0]; b[j][1] = r[1]; b[j + 1][0] = r[2]; b[j + 1][1] = r[3];
      }
      float2 xd[MI][2], wd[NJ][2];
#pragma unroll
      for (int i = 0; i < MI; i++) {
        xd[i][0] = xsc[(wm + 16 * i + g) * 2 + kc];
        xd[i][1] = xsc[(wm + 16 * i + g + 8) * 2 + kc];
      }
#pragma unroll
      for (int j = 0; j < NJ; j++) {
        wd[j][0] = wsc[(wn + 8 * j + 2 * t4) * 2 + kc];
        wd[j][1] = wsc[(wn + 8 * j + 2 * t4 + 1) * 2 + kc];
      }
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NJ; j++) {
          // c0: (row g, col 2t4), c1: (g, 2t4+1), c2: (g+8, 2t4), c3: (g+8, 2t4+1)
          if constexpr (L::kSplit) {
            int c[4] = {0, 0, 0, 0}, e[4] = {0, 0, 0, 0};
            mma_k16(c, a[i][0], a[i][1], b[j][0]);
            mma_k16(e, a[i][2], a[i][3], b[j][1]);
#pragma unroll
            for (int q = 0; q < 4; q++) {
              const float dx = xd[i][q >> 1].x;
              const float2 w = wd[j][q & 1];
              acc[i][j][q] = fmaf(dx, w.x * (float)c[q] + w.y * (float)e[q], acc[i][j][q]);
            }
          } else {
            int c[4] = {0, 0, 0, 0};
            mma_k32(c, a[i], b[j][0], b[j][1]);
#pragma unroll
            for (int q = 0; q < 4; q++) {
              const float2 x = xd[i][q >> 1], w = wd[j][q & 1];
              acc[i][j][q] = fmaf(x.x * w.x, (float)c[q], acc[i][j][q]);
              if constexpr (L::kMin) acc[i][j][q] = fmaf(-x.y, w.y, acc[i][j][q]);
            }
          }
        }
    }
    if (more) wstore(st ^ 1);
    cp_async_wait_all();
    __syncthreads();
  }

  // Epilogue: straight from the fragments, two columns a store.
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
      for (int hr = 0; hr < 2; hr++) {
        const int m = m0 + wm + 16 * i + g + 8 * hr, n = n0 + wn + 8 * j + 2 * t4;
        if (m >= T) continue;
        const size_t o = (size_t)m * rows + n;
        float v0 = acc[i][j][2 * hr], v1 = acc[i][j][2 * hr + 1];
        if (n + 1 < rows && (o & 1) == 0) {
          if (R) {
            const float2 r = *reinterpret_cast<const float2*>(R + o);
            v0 += r.x;
            v1 += r.y;
          }
          *reinterpret_cast<float2*>(Y + o) = make_float2(v0, v1);
        } else {
          if (n < rows) Y[o] = v0 + (R ? R[o] : 0.f);
          if (n + 1 < rows) Y[o + 1] = v1 + (R ? R[o + 1] : 0.f);
        }
      }
}

#define DEF_MMQ(name, C)                                                                                          \
  CK void __launch_bounds__(256) ck_mmq_##name(float* Y, const uint8_t* W, const int8_t* Xq, const float2* Xds,   \
                                               const float* R, int rows, int cols, int rowBytes, int T) {         \
    ck_pdl();                                                                                                     \
    mmq<C, 128>(Y, W, Xq, Xds, R, rows, cols, rowBytes, T);                                                       \
  }                                                                                                               \
  CK void __launch_bounds__(256) ck_mmqs_##name(float* Y, const uint8_t* W, const int8_t* Xq, const float2* Xds,  \
                                                const float* R, int rows, int cols, int rowBytes, int T) {        \
    ck_pdl();                                                                                                     \
    mmq<C, 64>(Y, W, Xq, Xds, R, rows, cols, rowBytes, T);                                                        \
  }
DEF_MMQ(q8_0, CQ8_0)
DEF_MMQ(q4_0, CQ4_0)
DEF_MMQ(q4_K, CQ4_K)
DEF_MMQ(q6_K, CQ6_K)
