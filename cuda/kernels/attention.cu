// attention.cu: decode (flash-decoding, two passes) and causal prefill
// attention over the KV cache (rows (pos % ring), [kvHeads*hd] each, f32 or
// f16). Scores are q·k·scale, then softcap·tanh(s/softcap) when softcap > 0,
// as the CPU does; f32 arithmetic throughout, softmax with running max.
#include <mma.h>

#include "common.cuh"

template <class T>
__device__ __forceinline__ float ldf(const T* p);
template <>
__device__ __forceinline__ float ldf<float>(const float* p) { return *p; }
template <>
__device__ __forceinline__ float ldf<__half>(const __half* p) { return __half2float(*p); }

__device__ __forceinline__ float score_fix(float s, float softcap) {
  return softcap > 0.f ? tanhf(s / softcap) * softcap : s;
}

// ---- decode pass 1: block (kv head g, split s, token t), 128 threads.
// The visible keys [first, P] are cut into nsplit parts of L keys (L a
// multiple of the tile) on the device, so one grid serves every depth.
#define DEC_MAXO 16  // outputs per thread: G*hd <= 2048

template <class T>
__device__ __forceinline__ void attn_decode(float* __restrict__ partO, float* __restrict__ partML,
                                            const float* __restrict__ q, const T* __restrict__ kc,
                                            const T* __restrict__ vc, const int* pos0, int heads, int kvHeads,
                                            int hd, int ring, int window, float scale, float softcap, int nsplit,
                                            int qStride) {
  extern __shared__ __align__(16) float sm[];
  const int g = blockIdx.x, s = blockIdx.y, t = blockIdx.z, tid = threadIdx.x;
  const int G = heads / kvHeads, KT = hd > 128 ? 16 : 32;
  float* Ks = sm;                       // [KT][hd+1]
  float* Vs = Ks + KT * (hd + 1);       // [KT][hd]
  float* Qs = Vs + KT * hd;             // [G][hd]
  float* Ps = Qs + G * hd;              // [G][KT]
  float* Ms = Ps + G * KT;              // running max [G]
  float* Ls = Ms + G;                   // running sum [G]
  float* Cs = Ls + G;                   // correction [G]

  const int P = *pos0 + t;
  const int first = window > 0 ? max(0, P - window + 1) : 0;
  const int n = P - first + 1;
  int L = (n + nsplit - 1) / nsplit;
  L = (L + KT - 1) / KT * KT;
  const int start = first + s * L, end = min(start + L, P + 1);  // keys [start, end)
  const size_t pbase = ((size_t)t * heads + (size_t)g * G) * nsplit + s;  // head j: pbase + j*nsplit
  if (start >= end) {
    if (tid < G) {
      partML[2 * (pbase + (size_t)tid * nsplit)] = -INFINITY;
      partML[2 * (pbase + (size_t)tid * nsplit) + 1] = 0.f;
    }
    return;
  }
  const int kvDim = kvHeads * hd;
#pragma unroll 4
  for (int i = tid; i < G * hd; i += blockDim.x)
    Qs[i] = q[(size_t)t * (qStride ? qStride : heads * hd) + (size_t)g * G * hd + i];
  if (tid < G) { Ms[tid] = -INFINITY; Ls[tid] = 0.f; }
  float acc[DEC_MAXO];
#pragma unroll
  for (int k = 0; k < DEC_MAXO; k++) acc[k] = 0.f;
  const int lane = tid & 31, warp = tid >> 5;

  for (int k0 = start; k0 < end; k0 += KT) {
    __syncthreads();
#pragma unroll 4
    for (int i = tid * 4; i < KT * hd; i += blockDim.x * 4) {
      const int kj = i / hd, d = i - kj * hd;
      const int p = k0 + kj;
      float4 kv = make_float4(0.f, 0.f, 0.f, 0.f), vv = kv;
      if (p < end) {
        const size_t o = (size_t)(p % ring) * kvDim + (size_t)g * hd + d;
        kv = ld4(kc + o);
        vv = ld4(vc + o);
      }
      float* kd = Ks + kj * (hd + 1) + d;
      kd[0] = kv.x; kd[1] = kv.y; kd[2] = kv.z; kd[3] = kv.w;
      *reinterpret_cast<float4*>(Vs + kj * hd + d) = vv;
    }
    __syncthreads();
    for (int i = tid; i < G * KT; i += blockDim.x) {
      const int j = i / KT, kj = i - j * KT;
      float sc = -INFINITY;
      if (k0 + kj < end) {
        const float* qq = Qs + j * hd;
        const float* kk = Ks + kj * (hd + 1);
        float a = 0.f;
        for (int d = 0; d < hd; d++) a = fmaf(qq[d], kk[d], a);
        sc = score_fix(a * scale, softcap);
      }
      Ps[j * KT + kj] = sc;
    }
    __syncthreads();
    for (int j = warp; j < G; j += blockDim.x >> 5) {
      const float sc = lane < KT ? Ps[j * KT + lane] : -INFINITY;
      const float mold = Ms[j];
      const float mnew = fmaxf(mold, warp_max(sc));
      const float p = sc == -INFINITY ? 0.f : expf(sc - mnew);
      const float sum = warp_sum(p);
      if (lane < KT) Ps[j * KT + lane] = p;
      if (lane == 0) {
        const float corr = mold == -INFINITY ? 0.f : expf(mold - mnew);
        Cs[j] = corr;
        Ls[j] = Ls[j] * corr + sum;
        Ms[j] = mnew;
      }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < DEC_MAXO; k++) {
      const int idx = tid + k * 128;
      if (idx < G * hd) {
        const int j = idx / hd, d = idx - j * hd;
        float a = acc[k] * Cs[j];
        const float* pp = Ps + j * KT;
        for (int kj = 0; kj < KT; kj++) a = fmaf(pp[kj], Vs[kj * hd + d], a);
        acc[k] = a;
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < DEC_MAXO; k++) {
    const int idx = tid + k * 128;
    if (idx < G * hd) {
      const int j = idx / hd, d = idx - j * hd;
      partO[(pbase + (size_t)j * nsplit) * hd + d] = acc[k];
    }
  }
  if (tid < G) {
    partML[2 * (pbase + (size_t)tid * nsplit)] = Ms[tid];
    partML[2 * (pbase + (size_t)tid * nsplit) + 1] = Ls[tid];
  }
}

#define DEC_ARGS(T)                                                                                    \
  float *partO, float *partML, const float *q, const T *kc, const T *vc, const int *pos0, int Tn,       \
      int heads, int kvHeads, int hd, int ring, int window, float scale, float softcap, int nsplit, int qStride

CK void __launch_bounds__(128) ck_attn_decode_f32(DEC_ARGS(float)) {
  ck_pdl();
  attn_decode<float>(partO, partML, q, kc, vc, pos0, heads, kvHeads, hd, ring, window, scale, softcap, nsplit, qStride);
}
CK void __launch_bounds__(128) ck_attn_decode_f16(DEC_ARGS(__half)) {
  ck_pdl();
  attn_decode<__half>(partO, partML, q, kc, vc, pos0, heads, kvHeads, hd, ring, window, scale, softcap, nsplit, qStride);
}

// ---- decode pass 2: block (head, token), hd threads (hd >= 32);
// nsplit <= 256. The parts' maxima and weights go through shared memory so
// that the loads of all parts are in flight together.
CK void ck_attn_combine(float* out, const float* __restrict__ partO, const float* __restrict__ partML,
                        const float* __restrict__ sinks, int T, int heads, int hd, int nsplit) {
  ck_pdl();
  __shared__ float Wm[256], Wl[256];
  __shared__ float red[2];
  const int h = blockIdx.x, t = blockIdx.y, d = threadIdx.x;
  const size_t base = ((size_t)t * heads + h) * nsplit;
  for (int s = d; s < nsplit; s += blockDim.x) {
    Wm[s] = partML[2 * (base + s)];
    Wl[s] = partML[2 * (base + s) + 1];
  }
  __syncthreads();
  if (d < 32) {
    float M = sinks ? sinks[h] : -INFINITY;
    for (int s = d; s < nsplit; s += 32) M = fmaxf(M, Wm[s]);
    M = warp_max(M);
    float L = 0.f;
    for (int s = d; s < nsplit; s += 32) {
      const float w = Wm[s] == -INFINITY ? 0.f : expf(Wm[s] - M);
      L += Wl[s] * w;
      Wm[s] = w;
    }
    L = warp_sum(L);
    if (d == 0) red[0] = L + (sinks ? expf(sinks[h] - M) : 0.f);
  }
  __syncthreads();
  float o = 0.f;
  const float* po = partO + base * hd + d;
#pragma unroll 8
  for (int s = 0; s < nsplit; s++) o += Wm[s] == 0.f ? 0.f : po[(size_t)s * hd] * Wm[s];
  out[((size_t)t * heads + h) * hd + d] = o / red[0];
}

// ---- prefill: block (32 queries, head), 128 threads, f32 tiles of 32 keys.
#define PQ 32
#define PK 32
#define PRE_MAXO 64  // 32*hd/128 outputs per thread, hd <= 256

template <class T>
__device__ __forceinline__ void attn_prefill(float* __restrict__ out, const float* __restrict__ q,
                                             const T* __restrict__ kc, const T* __restrict__ vc, const int* pos0,
                                             int Tn, int heads, int kvHeads, int hd, int ring, int window,
                                             float scale, float softcap, const float* __restrict__ sinks,
                                             int qStride) {
  extern __shared__ __align__(16) float sm[];
  const int t0 = blockIdx.x * PQ, h = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = h / (heads / kvHeads), kvDim = kvHeads * hd;
  float* Qs = sm;                   // [PQ][hd+1]
  float* Ks = Qs + PQ * (hd + 1);   // [PK][hd+1]
  float* Vs = Ks + PK * (hd + 1);   // [PK][hd]
  float* Ss = Vs + PK * hd;         // [PQ][PK+1]
  __shared__ float Ms[PQ], Ls[PQ], Cs[PQ];
  const int P0 = *pos0;
  const int nq = min(PQ, Tn - t0);
#pragma unroll 8
  for (int i = tid; i < PQ * hd; i += blockDim.x) {
    const int qi = i / hd, d = i - qi * hd;
    Qs[qi * (hd + 1) + d] = qi < nq ? q[(size_t)(t0 + qi) * (qStride ? qStride : heads * hd) + (size_t)h * hd + d] : 0.f;
  }
  if (tid < PQ) { Ms[tid] = -INFINITY; Ls[tid] = 0.f; }
  const int pLast = P0 + t0 + nq - 1;  // last query's position
  const int kStart = window > 0 ? max(0, P0 + t0 - window + 1) : 0;
  const int NO = PQ * hd / 128;
  float acc[PRE_MAXO];
#pragma unroll
  for (int k = 0; k < PRE_MAXO; k++) acc[k] = 0.f;

  for (int k0 = kStart; k0 <= pLast; k0 += PK) {
    __syncthreads();
#pragma unroll 4
    for (int i = tid * 4; i < PK * hd; i += blockDim.x * 4) {
      const int kj = i / hd, d = i - kj * hd;
      const int p = k0 + kj;
      float4 kv = make_float4(0.f, 0.f, 0.f, 0.f), vv = kv;
      if (p <= pLast) {
        const size_t o = (size_t)(p % ring) * kvDim + (size_t)g * hd + d;
        kv = ld4(kc + o);
        vv = ld4(vc + o);
      }
      float* kd = Ks + kj * (hd + 1) + d;
      kd[0] = kv.x; kd[1] = kv.y; kd[2] = kv.z; kd[3] = kv.w;
      *reinterpret_cast<float4*>(Vs + kj * hd + d) = vv;
    }
    __syncthreads();
    for (int i = tid; i < PQ * PK; i += blockDim.x) {
      const int qi = i / PK, kj = i - qi * PK;
      const int P = P0 + t0 + qi, p = k0 + kj;
      float sc = -INFINITY;
      if (qi < nq && p <= P && (window <= 0 || p > P - window)) {
        const float* qq = Qs + qi * (hd + 1);
        const float* kk = Ks + kj * (hd + 1);
        float a = 0.f;
        for (int d = 0; d < hd; d++) a = fmaf(qq[d], kk[d], a);
        sc = score_fix(a * scale, softcap);
      }
      Ss[qi * (PK + 1) + kj] = sc;
    }
    __syncthreads();
    for (int qi = warp; qi < PQ; qi += 4) {
      const float sc = Ss[qi * (PK + 1) + lane];
      const float mold = Ms[qi];
      const float mnew = fmaxf(mold, warp_max(sc));
      const float p = sc == -INFINITY ? 0.f : expf(sc - mnew);
      const float sum = warp_sum(p);
      Ss[qi * (PK + 1) + lane] = p;
      if (lane == 0) {
        const float corr = mold == -INFINITY ? (mnew == -INFINITY ? 1.f : 0.f) : expf(mold - mnew);
        Cs[qi] = corr;
        Ls[qi] = Ls[qi] * corr + sum;
        Ms[qi] = mnew;
      }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < PRE_MAXO; k++) {
      if (k < NO) {
        const int idx = tid + k * 128;
        const int qi = idx / hd, d = idx - qi * hd;
        float a = acc[k] * Cs[qi];
        const float* pp = Ss + qi * (PK + 1);
#pragma unroll 8
        for (int kj = 0; kj < PK; kj++) a = fmaf(pp[kj], Vs[kj * hd + d], a);
        acc[k] = a;
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < PRE_MAXO; k++) {
    if (k < NO) {
      const int idx = tid + k * 128;
      const int qi = idx / hd, d = idx - qi * hd;
      if (qi < nq) {
        float L = Ls[qi];
        if (sinks) L += expf(sinks[h] - Ms[qi]);
        out[((size_t)(t0 + qi) * heads + h) * hd + d] = acc[k] / L;
      }
    }
  }
}

#define PRE_ARGS(T)                                                                                    \
  float *out, const float *q, const T *kc, const T *vc, const int *pos0, int Tn, int heads, int kvHeads, \
      int hd, int ring, int window, float scale, float softcap, const float *sinks, int qStride

CK void __launch_bounds__(128) ck_attn_prefill_f32(PRE_ARGS(float)) {
  ck_pdl();
  attn_prefill<float>(out, q, kc, vc, pos0, Tn, heads, kvHeads, hd, ring, window, scale, softcap, sinks, qStride);
}
CK void __launch_bounds__(128) ck_attn_prefill_f16(PRE_ARGS(__half)) {
  ck_pdl();
  attn_prefill<__half>(out, q, kc, vc, pos0, Tn, heads, kvHeads, hd, ring, window, scale, softcap, sinks, qStride);
}

// ---- prefill on the tensor cores: block (64 queries, head), 4 warps of 16
// queries; key tiles of 64. S = Q·Kᵀ and O += P·V with wmma f16 → f32; the
// A operands (Q, P) are split into f16 high and low parts (two products)
// so that only K and V are rounded to f16 (exact for an f16 cache). The
// running output lives in shared memory (f32) so each row can be rescaled.
// hd is 64 or 128 (ck_attn_prefill_* serves the others).
#define FQ 64
#define FK 64

template <class T, int HD>
__device__ __forceinline__ void fa_prefill(float* __restrict__ out, const float* __restrict__ q,
                                           const T* __restrict__ kc, const T* __restrict__ vc, const int* pos0,
                                           int Tn, int heads, int kvHeads, int ring, int window, float scale,
                                           float softcap, const float* __restrict__ sinks, int qStride) {
  using namespace nvcuda;
  constexpr int LD = HD + 8, PLD = FK + 8;
  extern __shared__ __align__(32) uint8_t smem[];
  __half* Qh = reinterpret_cast<__half*>(smem);  // [FQ][LD] high part
  __half* Ql = Qh + FQ * LD;                      // [FQ][LD] low part
  __half* Ks = Ql + FQ * LD;                      // [FK][LD]
  __half* Vs = Ks + FK * LD;                      // [FK][LD]
  float* Ss = reinterpret_cast<float*>(Vs + FK * LD);  // [4][16][FK]
  __half* Ph = reinterpret_cast<__half*>(Ss + 4 * 16 * FK);  // [4][16][PLD]
  __half* Pl = Ph + 4 * 16 * PLD;                            // [4][16][PLD]
  float* Os = reinterpret_cast<float*>(Pl + 4 * 16 * PLD);   // [4][16][HD]
  float* Ms = Os + 4 * 16 * HD;                              // [FQ]
  float* Ls = Ms + FQ;                                       // [FQ]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int t0 = blockIdx.x * FQ, h = blockIdx.y, g = h / (heads / kvHeads), kvDim = kvHeads * HD;
  const int P0 = *pos0, nq = min(FQ, Tn - t0);
#pragma unroll 4
  for (int i = tid * 4; i < FQ * HD; i += blockDim.x * 4) {
    const int r = i / HD, d = i % HD;
    float4 v4 = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r < nq) v4 = ld4(q + (size_t)(t0 + r) * (qStride ? qStride : heads * HD) + (size_t)h * HD + d);
    const float vs[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const __half hi = __float2half_rn(vs[e]);
      Qh[r * LD + d + e] = hi;
      Ql[r * LD + d + e] = __float2half_rn(vs[e] - __half2float(hi));
    }
  }
  for (int i = tid; i < 4 * 16 * HD; i += blockDim.x) Os[i] = 0.f;
  if (tid < FQ) { Ms[tid] = -INFINITY; Ls[tid] = 0.f; }
  const int pLast = P0 + t0 + nq - 1;
  const int kStart = window > 0 ? max(0, P0 + t0 - window + 1) : 0;
  float* S = Ss + warp * 16 * FK;
  __half* PH = Ph + warp * 16 * PLD;
  __half* PL = Pl + warp * 16 * PLD;
  float* O = Os + warp * 16 * HD;
  const int qw = warp * 16;  // this warp's first query row in the tile

  for (int k0 = (kStart / FK) * FK; k0 <= pLast; k0 += FK) {
    __syncthreads();
#pragma unroll 8
    for (int i = tid * 4; i < FK * HD; i += blockDim.x * 4) {
      const int kj = i / HD, d = i % HD, p = k0 + kj;
      float4 kv = make_float4(0.f, 0.f, 0.f, 0.f), vv = kv;
      if (p <= pLast && p >= kStart) {
        const size_t o = (size_t)(p % ring) * kvDim + (size_t)g * HD + d;
        kv = ld4(kc + o);
        vv = ld4(vc + o);
      }
      __half2* kd = reinterpret_cast<__half2*>(Ks + kj * LD + d);
      __half2* vd = reinterpret_cast<__half2*>(Vs + kj * LD + d);
      kd[0] = __floats2half2_rn(kv.x, kv.y); kd[1] = __floats2half2_rn(kv.z, kv.w);
      vd[0] = __floats2half2_rn(vv.x, vv.y); vd[1] = __floats2half2_rn(vv.z, vv.w);
    }
    __syncthreads();
    // S = Q Kᵀ for this warp's 16 rows × 64 keys.
    {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf[FK / 16];
#pragma unroll
      for (int j = 0; j < FK / 16; j++) wmma::fill_fragment(sf[j], 0.f);
#pragma unroll
      for (int kk = 0; kk < HD; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> ah, al;
        wmma::load_matrix_sync(ah, Qh + qw * LD + kk, LD);
        wmma::load_matrix_sync(al, Ql + qw * LD + kk, LD);
#pragma unroll
        for (int j = 0; j < FK / 16; j++) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
          wmma::load_matrix_sync(b, Ks + (16 * j) * LD + kk, LD);
          wmma::mma_sync(sf[j], ah, b, sf[j]);
          wmma::mma_sync(sf[j], al, b, sf[j]);
        }
      }
#pragma unroll
      for (int j = 0; j < FK / 16; j++) wmma::store_matrix_sync(S + 16 * j, sf[j], FK, wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax, row by row: lane and lane+32 hold two keys of the
    // row (consecutive lanes, consecutive words: no bank conflicts).
    for (int r = 0; r < 16; r++) {
      const int P = P0 + t0 + qw + r;
      const bool rowOK = qw + r < nq;
      float sc[2];
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int c = lane + 32 * e, p = k0 + c;
        sc[e] = -INFINITY;
        if (rowOK && p <= P && p >= kStart && (window <= 0 || p > P - window))
          sc[e] = score_fix(S[r * FK + c] * scale, softcap);
      }
      const float mold = Ms[qw + r];
      const float mnew = fmaxf(mold, warp_max(fmaxf(sc[0], sc[1])));
      float sum = 0.f;
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const float p = sc[e] == -INFINITY ? 0.f : expf(sc[e] - mnew);
        sum += p;
        const __half hi = __float2half_rn(p);
        PH[r * PLD + lane + 32 * e] = hi;
        PL[r * PLD + lane + 32 * e] = __float2half_rn(p - __half2float(hi));
      }
      sum = warp_sum(sum);
      const float corr = mold == -INFINITY ? (mnew == -INFINITY ? 1.f : 0.f) : expf(mold - mnew);
#pragma unroll
      for (int d = lane; d < HD; d += 32) O[r * HD + d] *= corr;
      if (lane == 0) {
        Ls[qw + r] = Ls[qw + r] * corr + sum;
        Ms[qw + r] = mnew;
      }
    }
    __syncwarp();
    // O += P V, one 16-column block of O at a time through the S scratch.
#pragma unroll
    for (int j = 0; j < HD / 16; j++) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
      wmma::fill_fragment(of, 0.f);
#pragma unroll
      for (int kk = 0; kk < FK; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> ph, pl;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
        wmma::load_matrix_sync(ph, PH + kk, PLD);
        wmma::load_matrix_sync(pl, PL + kk, PLD);
        wmma::load_matrix_sync(b, Vs + kk * LD + 16 * j, LD);
        wmma::mma_sync(of, ph, b, of);
        wmma::mma_sync(of, pl, b, of);
      }
      wmma::store_matrix_sync(S, of, 16, wmma::mem_row_major);
      __syncwarp();
#pragma unroll
      for (int e = 0; e < 8; e++) {
        const int idx = lane + 32 * e, r = idx >> 4, c = idx & 15;
        O[r * HD + 16 * j + c] += S[idx];
      }
      __syncwarp();
    }
  }
  __syncthreads();
  for (int i = lane; i < 16 * HD; i += 32) {
    const int r = i / HD, d = i % HD, qi = qw + r;
    if (qi < nq) {
      float L = Ls[qi];
      if (sinks) L += expf(sinks[h] - Ms[qi]);
      out[((size_t)(t0 + qi) * heads + h) * HD + d] = O[i] / L;
    }
  }
}

#define FA_ARGS(T)                                                                                     \
  float *out, const float *q, const T *kc, const T *vc, const int *pos0, int Tn, int heads, int kvHeads, \
      int hd, int ring, int window, float scale, float softcap, const float *sinks, int qStride

CK void __launch_bounds__(128) ck_fa_prefill_f32(FA_ARGS(float)) {
  ck_pdl();
  if (hd == 64) fa_prefill<float, 64>(out, q, kc, vc, pos0, Tn, heads, kvHeads, ring, window, scale, softcap, sinks, qStride);
  else fa_prefill<float, 128>(out, q, kc, vc, pos0, Tn, heads, kvHeads, ring, window, scale, softcap, sinks, qStride);
}
CK void __launch_bounds__(128) ck_fa_prefill_f16(FA_ARGS(__half)) {
  ck_pdl();
  if (hd == 64) fa_prefill<__half, 64>(out, q, kc, vc, pos0, Tn, heads, kvHeads, ring, window, scale, softcap, sinks, qStride);
  else fa_prefill<__half, 128>(out, q, kc, vc, pos0, Tn, heads, kvHeads, ring, window, scale, softcap, sinks, qStride);
}

// ---- decode in one pass, the combine fused (flash-decoding): block (kv
// head g, split s, token t), 128 threads = 4 warps, for head dims HD = 64
// or 128 (and 16, the tiny test models', groups of up to 4) and G =
// heads/kvHeads <= GM query heads, which share every K/V read. A key is read by LPK = HD/16 lanes, 16 dims each (f16: two 16-byte
// loads of K and of V; f32: four), so a warp takes KPS = 32/LPK keys a
// step; the four warps stride over the split's keys on their own (online
// softmax per warp, the next step's K/V loaded while this one is computed),
// then merge through shared memory into the split's partial (partO,
// partML as ck_attn_decode_*). The last block of (t, g) to finish (a
// counter per (t, g) in done, zero between launches) combines every
// split's partial into out as ck_attn_combine does, and puts the counter
// back to zero. nsplit <= DEC1_MAXS.
//
// With kNew (one token, T = 1) the kernel also does ck_rope_kv's work: q
// and kNew (the token's k, v rows, not yet rotated nor in the cache) are
// rotated here as ck_rope_kv rotates them (the same float arithmetic); each
// block rotates its group's q, and the block whose keys hold the new
// position writes its k and v into the cache before reading its keys. The
// other blocks never read that row, so no launch is needed between.
#define DEC1_MAXS 64

template <class T>
struct KVRow;  // one lane's 16 elements of a K or V row: dims dim(i), i < 16
template <>
struct KVRow<float> {
  float4 a[4];
  // element i is dim (r + lpk*(i/4))*4 + i%4
  static __device__ __forceinline__ int dim(int r, int lpk, int i) { return (r + lpk * (i >> 2)) * 4 + (i & 3); }
  __device__ __forceinline__ void load(const float* row, int r, int lpk, bool ok) {
#pragma unroll
    for (int j = 0; j < 4; j++)
      a[j] = ok ? *reinterpret_cast<const float4*>(row + (r + lpk * j) * 4) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  __device__ __forceinline__ void get(float* v) const {
#pragma unroll
    for (int j = 0; j < 4; j++) { v[4 * j] = a[j].x; v[4 * j + 1] = a[j].y; v[4 * j + 2] = a[j].z; v[4 * j + 3] = a[j].w; }
  }
};
template <>
struct KVRow<__half> {
  uint4 a[2];
  // element i is dim (r + lpk*(i/8))*8 + i%8
  static __device__ __forceinline__ int dim(int r, int lpk, int i) { return (r + lpk * (i >> 3)) * 8 + (i & 7); }
  __device__ __forceinline__ void load(const __half* row, int r, int lpk, bool ok) {
#pragma unroll
    for (int j = 0; j < 2; j++)
      a[j] = ok ? *reinterpret_cast<const uint4*>(row + (r + lpk * j) * 8) : make_uint4(0u, 0u, 0u, 0u);
  }
  __device__ __forceinline__ void get(float* v) const {
#pragma unroll
    for (int j = 0; j < 2; j++) {
      const __half2* h = reinterpret_cast<const __half2*>(&a[j]);
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const float2 f = __half22float2(h[e]);
        v[8 * j + 2 * e] = f.x;
        v[8 * j + 2 * e + 1] = f.y;
      }
    }
  }
};

template <class T, int HD, int GM>
__device__ __forceinline__ void attn_decode1(float* __restrict__ out, float* __restrict__ partO,
                                             float* __restrict__ partML, unsigned* __restrict__ done,
                                             const float* __restrict__ q, T* kc, T* vc, const int* pos0,
                                             const float* __restrict__ sinks, int heads, int kvHeads, int ring,
                                             int window, float scale, float softcap, int nsplit, int qStride,
                                             const float* __restrict__ kNew, const float* __restrict__ vNew,
                                             const float* __restrict__ invFreq, int rotDims, int neox, float mscale) {
  constexpr int DL = 16, LPK = HD / DL, KPS = 32 / LPK, NW = 4;
  __shared__ __align__(16) float Qs[GM * HD];
  __shared__ __align__(16) float Wo[NW][GM * HD];
  __shared__ float Wm[NW][GM], Wl[NW][GM];
  __shared__ float Cw[GM][DEC1_MAXS], Cl[GM];
  __shared__ int isLast;
  __shared__ float Rc[HD / 2], Rs[HD / 2];
  const int g = blockIdx.x, s = blockIdx.y, t = blockIdx.z, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int G = heads / kvHeads, kvDim = kvHeads * HD;
  // Before ck_pdl's wait (launched as a programmatic dependent, this runs
  // while the kernel before it, the q/k/v product, still does): the
  // position, the RoPE angles, and the block's cached keys and values
  // before P to L2. The position comes from the step's argmax (or the
  // host), kernels earlier than the one before, which were complete and
  // their writes visible before the one before passed its own wait (read
  // past L1: __ldcg); the keys before P were written by earlier steps. q
  // and the new k, v are the kernel before's: read after the wait.
  const int P = __ldcg(pos0) + t;
  const int first = window > 0 ? max(0, P - window + 1) : 0;
  const int n = P - first + 1;
  const int L = (n + nsplit - 1) / nsplit;
  const int start = first + s * L, end = min(start + L, P + 1);  // keys [start, end), maybe empty
  {
    constexpr int LINES = HD * (int)sizeof(T) / 128 > 0 ? HD * (int)sizeof(T) / 128 : 1;  // 128-byte lines a row
    const int old = max(0, min(end, P) - start);                                        // keys before P
    for (int i = tid; i < 2 * old * LINES; i += NW * 32) {
      const int p = start + i / (2 * LINES), l = i % (2 * LINES);
      const T* row = (l < LINES ? kc : vc) + (size_t)(p % ring) * kvDim + (size_t)g * HD;
      asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<const char*>(row) + 128 * (l % LINES)));
    }
  }
  const size_t hbase = (size_t)t * heads + (size_t)g * G;          // the group's first head of token t
  const size_t pbase = hbase * nsplit + s;                         // head j's partial: pbase + j*nsplit
  const float* qt = q + (size_t)t * (qStride ? qStride : heads * HD) + (size_t)g * G * HD;
  const int half = rotDims >> 1;
  if (kNew) {
    // RoPE of position P: the angles as ck_rope_kv computes them.
    for (int i = tid; i < half; i += NW * 32) {
      const float a = (float)P * invFreq[i];
      double sd, cd;
      sincos((double)a, &sd, &cd);
      Rc[i] = (float)cd * mscale;
      Rs[i] = (float)sd * mscale;
    }
  }
  ck_pdl();
  if (kNew) {
    __syncthreads();
    for (int i = tid; i < GM * HD; i += NW * 32) {
      const int h = i / HD, d = i - h * HD;
      float v = 0.f;
      if (h < G) {
        const float* x = qt + h * HD;
        v = x[d];
        if (d < rotDims) {
          // d is i0 or i1 of the pair of frequency j
          const int j = neox ? (d < half ? d : d - half) : d >> 1;
          const bool second = neox ? d >= half : (d & 1);
          const int i0 = neox ? j : 2 * j, i1 = neox ? j + half : 2 * j + 1;
          const float x0 = x[i0], x1 = x[i1];
          v = second ? x1 * Rc[j] + x0 * Rs[j] : x0 * Rc[j] - x1 * Rs[j];
        }
      }
      Qs[i] = v;
    }
    if (start <= P && P < end) {  // this block holds the new key: into the cache first
      const size_t row = (size_t)(P % ring) * kvDim + (size_t)g * HD;
      const float* kx = kNew + (size_t)g * HD;
      for (int d = tid; d < HD; d += NW * 32) {
        float v = kx[d];
        if (d < rotDims) {
          const int j = neox ? (d < half ? d : d - half) : d >> 1;
          const bool second = neox ? d >= half : (d & 1);
          const int i0 = neox ? j : 2 * j, i1 = neox ? j + half : 2 * j + 1;
          const float x0 = kx[i0], x1 = kx[i1];
          v = second ? x1 * Rc[j] + x0 * Rs[j] : x0 * Rc[j] - x1 * Rs[j];
        }
        kc[row + d] = cvt<T>(v);
        vc[row + d] = cvt<T>(vNew[(size_t)g * HD + d]);
      }
    }
    __syncthreads();
  } else {
    for (int i = tid; i < GM * HD; i += NW * 32) Qs[i] = i < G * HD ? qt[i] : 0.f;
  }

  const int kk = lane / LPK, r = lane % LPK;
  float m[GM], lsum[GM], acc[GM][DL];
#pragma unroll
  for (int h = 0; h < GM; h++) {
    m[h] = -INFINITY;
    lsum[h] = 0.f;
#pragma unroll
    for (int i = 0; i < DL; i++) acc[h][i] = 0.f;
  }
  KVRow<T> kr, vr, kn, vn;
  int k0 = start + warp * KPS;
  {
    const int p = k0 + kk;
    const bool ok = p < end;
    const size_t o = (size_t)((ok ? p : 0) % ring) * kvDim + (size_t)g * HD;
    kr.load(kc + o, r, LPK, ok);
    vr.load(vc + o, r, LPK, ok);
  }
  __syncthreads();
  for (; k0 < end; k0 += NW * KPS) {
    const int p = k0 + kk;
    const bool ok = p < end;
    {  // the next step's rows, in flight while this one is computed
      const int pn = p + NW * KPS;
      const bool okn = pn < end;
      const size_t o = (size_t)((okn ? pn : 0) % ring) * kvDim + (size_t)g * HD;
      kn.load(kc + o, r, LPK, okn);
      vn.load(vc + o, r, LPK, okn);
    }
    float kf[DL], vf[DL];
    kr.get(kf);
    vr.get(vf);
#pragma unroll
    for (int h = 0; h < GM; h++) {
      if (h < G) {
        float a = 0.f;
        const float* qh = Qs + h * HD;
#pragma unroll
        for (int i = 0; i < DL; i += 4) {
          const float4 q4 = *reinterpret_cast<const float4*>(qh + KVRow<T>::dim(r, LPK, i));
          a = fmaf(q4.x, kf[i], a);
          a = fmaf(q4.y, kf[i + 1], a);
          a = fmaf(q4.z, kf[i + 2], a);
          a = fmaf(q4.w, kf[i + 3], a);
        }
#pragma unroll
        for (int o = 1; o < LPK; o <<= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
        const float sc = ok ? score_fix(a * scale, softcap) : -INFINITY;
        float mx = sc;
#pragma unroll
        for (int o = LPK; o < 32; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        const float mnew = fmaxf(m[h], mx);  // finite: key k0 is valid
        const float corr = m[h] == -INFINITY ? 0.f : expf(m[h] - mnew);
        const float pw = ok ? expf(sc - mnew) : 0.f;
        lsum[h] = lsum[h] * corr + (r == 0 ? pw : 0.f);
#pragma unroll
        for (int i = 0; i < DL; i++) acc[h][i] = fmaf(pw, vf[i], acc[h][i] * corr);
        m[h] = mnew;
      }
    }
    kr = kn;
    vr = vn;
  }
  // The warp's keys: sum the lanes of equal r, then merge the warps.
#pragma unroll
  for (int h = 0; h < GM; h++) {
    if (h < G) {
#pragma unroll
      for (int o = LPK; o < 32; o <<= 1) {
        lsum[h] += __shfl_xor_sync(0xffffffffu, lsum[h], o);
#pragma unroll
        for (int i = 0; i < DL; i++) acc[h][i] += __shfl_xor_sync(0xffffffffu, acc[h][i], o);
      }
      if (kk == 0) {
#pragma unroll
        for (int i = 0; i < DL; i++) Wo[warp][h * HD + KVRow<T>::dim(r, LPK, i)] = acc[h][i];
      }
      if (lane == 0) {
        Wm[warp][h] = m[h];
        Wl[warp][h] = lsum[h];
      }
    }
  }
  __syncthreads();
  for (int i = tid; i < G * HD; i += NW * 32) {
    const int h = i / HD, d = i - h * HD;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < NW; w++) M = fmaxf(M, Wm[w][h]);
    float o = 0.f, l = 0.f;
#pragma unroll
    for (int w = 0; w < NW; w++) {
      if (Wm[w][h] != -INFINITY) {
        const float c = expf(Wm[w][h] - M);
        o = fmaf(Wo[w][i], c, o);
        l = fmaf(Wl[w][h], c, l);
      }
    }
    partO[(pbase + (size_t)h * nsplit) * HD + d] = o;
    if (d == 0) {
      partML[2 * (pbase + (size_t)h * nsplit)] = M;
      partML[2 * (pbase + (size_t)h * nsplit) + 1] = l;
    }
  }
  // The last block of (t, g) combines.
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    const unsigned prev = atomicAdd(done + (size_t)t * kvHeads + g, 1u);
    isLast = prev == (unsigned)nsplit - 1;
  }
  __syncthreads();
  if (!isLast) return;
  __threadfence();
  const size_t cbase = hbase * nsplit;
  for (int i = tid; i < G * nsplit; i += NW * 32) {
    const int h = i / nsplit, sp = i - h * nsplit;
    Cw[h][sp] = __ldcg(partML + 2 * (cbase + i));
  }
  __syncthreads();
  for (int h = warp; h < G; h += NW) {
    float M = sinks ? sinks[g * G + h] : -INFINITY;
    for (int sp = lane; sp < nsplit; sp += 32) M = fmaxf(M, Cw[h][sp]);
    M = warp_max(M);
    float l = 0.f;
    for (int sp = lane; sp < nsplit; sp += 32) {
      const float w = Cw[h][sp] == -INFINITY ? 0.f : expf(Cw[h][sp] - M);
      l = fmaf(__ldcg(partML + 2 * (cbase + (size_t)h * nsplit + sp) + 1), w, l);
      Cw[h][sp] = w;
    }
    l = warp_sum(l);
    if (lane == 0) Cl[h] = l + (sinks ? expf(sinks[g * G + h] - M) : 0.f);
  }
  __syncthreads();
  for (int i = tid; i < G * HD; i += NW * 32) {
    const int h = i / HD, d = i - h * HD;
    const float* po = partO + (cbase + (size_t)h * nsplit) * HD + d;
    float o0 = 0.f, o1 = 0.f;
    int sp = 0;
    for (; sp + 1 < nsplit; sp += 2) {
      if (Cw[h][sp] != 0.f) o0 = fmaf(__ldcg(po + (size_t)sp * HD), Cw[h][sp], o0);
      if (Cw[h][sp + 1] != 0.f) o1 = fmaf(__ldcg(po + (size_t)(sp + 1) * HD), Cw[h][sp + 1], o1);
    }
    if (sp < nsplit && Cw[h][sp] != 0.f) o0 = fmaf(__ldcg(po + (size_t)sp * HD), Cw[h][sp], o0);
    out[(hbase + h) * HD + d] = (o0 + o1) / Cl[h];
  }
  if (tid == 0) done[(size_t)t * kvHeads + g] = 0u;
}

#define DEC1_ARGS(T)                                                                                        \
  float *out, float *partO, float *partML, unsigned *done, const float *q, T *kc, T *vc, const int *pos0,    \
      const float *sinks, int Tn, int heads, int kvHeads, int ring, int window, float scale, float softcap,    \
      int nsplit, int qStride, const float *kNew, const float *vNew, const float *invFreq, int rotDims,        \
      int neox, float mscale
#define DEF_DEC1(name, T, HD, GM)                                                                            \
  CK void __launch_bounds__(128) ck_attn_dec1_##name(DEC1_ARGS(T)) {                                        \
    attn_decode1<T, HD, GM>(out, partO, partML, done, q, kc, vc, pos0, sinks, heads, kvHeads, ring, window, \
                            scale, softcap, nsplit, qStride, kNew, vNew, invFreq, rotDims, neox, mscale);   \
  }
DEF_DEC1(f32_16_4, float, 16, 4)
DEF_DEC1(f32_64_4, float, 64, 4)
DEF_DEC1(f32_64_8, float, 64, 8)
DEF_DEC1(f32_128_4, float, 128, 4)
DEF_DEC1(f32_128_8, float, 128, 8)
DEF_DEC1(f16_16_4, __half, 16, 4)
DEF_DEC1(f16_64_4, __half, 64, 4)
DEF_DEC1(f16_64_8, __half, 64, 8)
DEF_DEC1(f16_128_4, __half, 128, 4)
DEF_DEC1(f16_128_8, __half, 128, 8)
