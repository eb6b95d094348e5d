// flash.cu: causal prefill attention on the tensor cores, FlashAttention-2
// style, with everything a warp owns in registers: block (64 queries,
// head), 4 warps of 16 queries, key tiles of 64 in shared memory as f16.
// S = Q·Kᵀ and O += P·V with mma.sync m16n8k16 f16 → f32; the scores' C
// fragments become P's A fragments without leaving the registers, the
// online softmax's row max and the rescale of O stay in the registers too.
// As ck_fa_prefill_* (attention.cu, which this replaces in the session),
// the A operands Q and P are split into f16 high and low parts (two
// products) so that only K and V are rounded to f16: exact for an f16
// cache. Masks (causal, sliding window), softcap and sinks as there.
// hd is 64 or 128; blocks run longest (latest queries) first. The next
// key tile is fetched by cp.async while the current one is multiplied.
#include "common.cuh"

#define FLQ 64  // queries per block
#define FLK 64  // keys per tile

__device__ __forceinline__ uint32_t fl_smem(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void fl_ldsm_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(fl_smem(p))
               : "memory");
}

__device__ __forceinline__ void fl_ldsm_x4_t(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(fl_smem(p))
               : "memory");
}

// 16 bytes global → shared, zero-filled when !ok (src must still be valid).
__device__ __forceinline__ void fl_cp16(void* dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(fl_smem(dst)), "l"(src), "r"(ok ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void fl_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// (a, b) as f16 high parts and the f16 rounding of what they leave.
__device__ __forceinline__ void fl_split(float a, float b, uint32_t& hi, uint32_t& lo) {
  const __half2 h = __floats2half2_rn(a, b);
  const float2 f = __half22float2(h);
  const __half2 l = __floats2half2_rn(a - f.x, b - f.y);
  hi = *reinterpret_cast<const uint32_t*>(&h);
  lo = *reinterpret_cast<const uint32_t*>(&l);
}

__device__ __forceinline__ uint2 fl_h4(float4 v) {
  const __half2 a = __floats2half2_rn(v.x, v.y), b = __floats2half2_rn(v.z, v.w);
  return make_uint2(*reinterpret_cast<const uint32_t*>(&a), *reinterpret_cast<const uint32_t*>(&b));
}

template <class T, int HD>
__device__ __forceinline__ void flash_prefill(float* __restrict__ out, const float* __restrict__ q,
                                              const T* __restrict__ kc, const T* __restrict__ vc, const int* pos0,
                                              int Tn, int heads, int kvHeads, int ring, int window, float scale,
                                              float softcap, const float* __restrict__ sinks, int qStride) {
  constexpr int LD = HD + 8;  // halves a shared row: 16-byte multiple, ldmatrix without bank conflicts
  constexpr int KS = HD / 16, ND = HD / 8;
  extern __shared__ __align__(16) uint8_t smem[];
  __half* Ks = reinterpret_cast<__half*>(smem);  // [FLK][LD]
  __half* Vs = Ks + FLK * LD;                     // [FLK][LD]
  // The next tile's K and V as the cache holds them, arriving by cp.async
  // while this one is multiplied (shared memory sized for f32).
  T* Kst = reinterpret_cast<T*>(Vs + FLK * LD);  // [FLK][HD]
  T* Vst = Kst + FLK * HD;                        // [FLK][HD]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int t0 = (gridDim.x - 1 - blockIdx.x) * FLQ, h = blockIdx.y, kvh = h / (heads / kvHeads), kvDim = kvHeads * HD;
  const int P0 = *pos0, nq = min(FLQ, Tn - t0);
  const int qs = qStride ? qStride : heads * HD;
  const int r0 = warp * 16 + g, r1 = r0 + 8;  // this thread's two query rows in the block
  const int Pr0 = P0 + t0 + r0, Pr1 = P0 + t0 + r1;

  uint32_t qh[KS][4], ql[KS][4];
#pragma unroll
  for (int ks = 0; ks < KS; ks++)
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int r = (i & 1) ? r1 : r0, c = ks * 16 + 2 * t4 + ((i & 2) ? 8 : 0);
      float2 v = make_float2(0.f, 0.f);
      if (r < nq) v = *reinterpret_cast<const float2*>(q + (size_t)(t0 + r) * qs + (size_t)h * HD + c);
      fl_split(v.x, v.y, qh[ks][i], ql[ks][i]);
    }
  float o[ND][4];
#pragma unroll
  for (int n = 0; n < ND; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) o[n][e] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  const int pLast = P0 + t0 + nq - 1;
  const int kStart = window > 0 ? max(0, P0 + t0 - window + 1) : 0;
  constexpr int CE = 16 / sizeof(T);  // cache elements a 16-byte copy
  auto issue = [&](int k0) {
#pragma unroll 4
    for (int i = tid * CE; i < FLK * HD; i += 128 * CE) {
      const int kj = i / HD, d = i % HD, p = k0 + kj;
      const bool ok = p <= pLast && p >= kStart;  // zeros elsewhere
      const size_t off = ok ? (size_t)(p % ring) * kvDim + (size_t)kvh * HD + d : 0;
      fl_cp16(Kst + i, kc + off, ok);
      fl_cp16(Vst + i, vc + off, ok);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  int k0 = (kStart / FLK) * FLK;
  if (k0 <= pLast) issue(k0);
  for (; k0 <= pLast; k0 += FLK) {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncthreads();  // tile k0 staged; every warp is done with the f16 tiles
#pragma unroll 4
    for (int i = tid * 4; i < FLK * HD; i += 128 * 4) {
      const int kj = i / HD, d = i % HD;
      *reinterpret_cast<uint2*>(Ks + kj * LD + d) = fl_h4(ld4(Kst + i));
      *reinterpret_cast<uint2*>(Vs + kj * LD + d) = fl_h4(ld4(Vst + i));
    }
    __syncthreads();  // f16 tiles ready; the staging is free for the next tile
    if (k0 + FLK <= pLast) issue(k0 + FLK);
    // S = Q·Kᵀ: 16 rows × 64 keys a warp, 8 tiles of 8 keys.
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
        fl_ldsm_x4(r, Ks + (8 * (j + (lane >> 4)) + (lane & 7)) * LD + ks * 16 + ((lane >> 3) & 1) * 8);
        fl_mma(s[j], qh[ks], r[0], r[1]);
        fl_mma(s[j], ql[ks], r[0], r[1]);
        fl_mma(s[j + 1], qh[ks], r[2], r[3]);
        fl_mma(s[j + 1], ql[ks], r[2], r[3]);
      }
    // Masks, scale, softcap; the rows' maxima over the quad. A tile every
    // key of which every query of the block sees needs no mask.
    float mx[2] = {-INFINITY, -INFINITY};
    const int qLo = P0 + t0, kHi = k0 + FLK - 1;
    if (nq == FLQ && kHi <= qLo && k0 >= kStart && (window <= 0 || k0 > qLo + FLQ - 1 - window)) {
#pragma unroll
      for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const float v = score_fix(s[j][e] * scale, softcap);
          s[j][e] = v;
          mx[e >> 1] = fmaxf(mx[e >> 1], v);
        }
    } else {
#pragma unroll
      for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int hr = e >> 1, p = k0 + 8 * j + 2 * t4 + (e & 1), P = hr ? Pr1 : Pr0;
          const bool ok = (hr ? r1 : r0) < nq && p <= P && p >= kStart && (window <= 0 || p > P - window);
          const float v = ok ? score_fix(s[j][e] * scale, softcap) : -INFINITY;
          s[j][e] = v;
          mx[hr] = fmaxf(mx[hr], v);
        }
    }
    float corr[2];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
      mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
      mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
      const float mnew = fmaxf(m[hr], mx[hr]);
      corr[hr] = m[hr] == -INFINITY ? (mnew == -INFINITY ? 1.f : 0.f) : expf(m[hr] - mnew);
      m[hr] = mnew;
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int hr = e >> 1;
        const float p = s[j][e] == -INFINITY ? 0.f : expf(s[j][e] - m[hr]);
        s[j][e] = p;
        sum[hr] += p;
      }
    l[0] = l[0] * corr[0] + sum[0];
    l[1] = l[1] * corr[1] + sum[1];
#pragma unroll
    for (int n = 0; n < ND; n++) {
      o[n][0] *= corr[0]; o[n][1] *= corr[0];
      o[n][2] *= corr[1]; o[n][3] *= corr[1];
    }
    // O += P·V, 16 keys a step.
#pragma unroll
    for (int ss = 0; ss < FLK / 16; ss++) {
      uint32_t ph[4], pl[4];
      fl_split(s[2 * ss][0], s[2 * ss][1], ph[0], pl[0]);
      fl_split(s[2 * ss][2], s[2 * ss][3], ph[1], pl[1]);
      fl_split(s[2 * ss + 1][0], s[2 * ss + 1][1], ph[2], pl[2]);
      fl_split(s[2 * ss + 1][2], s[2 * ss + 1][3], ph[3], pl[3]);
#pragma unroll
      for (int n = 0; n < ND; n += 2) {
        uint32_t r[4];
        fl_ldsm_x4_t(r, Vs + (16 * ss + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + 8 * (n + (lane >> 4)));
        fl_mma(o[n], ph, r[0], r[1]);
        fl_mma(o[n], pl, r[0], r[1]);
        fl_mma(o[n + 1], ph, r[2], r[3]);
        fl_mma(o[n + 1], pl, r[2], r[3]);
      }
    }
  }
#pragma unroll
  for (int hr = 0; hr < 2; hr++) {
    l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 1);
    l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 2);
    if (sinks) l[hr] += expf(sinks[h] - m[hr]);
  }
#pragma unroll
  for (int hr = 0; hr < 2; hr++) {
    const int r = hr ? r1 : r0;
    if (r >= nq) continue;
    float* dst = out + ((size_t)(t0 + r) * heads + h) * HD + 2 * t4;
#pragma unroll
    for (int n = 0; n < ND; n++)
      *reinterpret_cast<float2*>(dst + 8 * n) = make_float2(o[n][2 * hr] / l[hr], o[n][2 * hr + 1] / l[hr]);
  }
}

#define FL_ARGS(T)                                                                                     \
  float *out, const float *q, const T *kc, const T *vc, const int *pos0, int Tn, int heads, int kvHeads, \
      int hd, int ring, int window, float scale, float softcap, const float *sinks, int qStride

// One entry per cache type and head dim (hd must match; registers are
// allocated per entry, and head dim 128 needs twice 64's).
#define DEF_FLASH(T, name, HD)                                                                                 \
  CK void __launch_bounds__(128) ck_flash_prefill_##name##_##HD(FL_ARGS(T)) {                                \
    ck_pdl();                                                                                                \
    flash_prefill<T, HD>(out, q, kc, vc, pos0, Tn, heads, kvHeads, ring, window, scale, softcap, sinks, qStride); \
  }
DEF_FLASH(float, f32, 64)
DEF_FLASH(float, f32, 128)
DEF_FLASH(__half, f16, 64)
DEF_FLASH(__half, f16, 128)
