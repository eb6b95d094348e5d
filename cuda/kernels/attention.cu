// attention.cu: decode (flash-decoding, two passes) and causal prefill
// attention over the KV cache (rows (pos % ring), [kvHeads*hd] each, f32 or
// f16). Scores are q·k·scale, then softcap·tanh(s/softcap) when softcap > 0,
// as the CPU does; f32 arithmetic throughout, softmax with running max.
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
                                            int hd, int ring, int window, float scale, float softcap, int nsplit) {
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
  for (int i = tid; i < G * hd; i += blockDim.x)
    Qs[i] = q[((size_t)t * heads + (size_t)g * G) * hd + i];
  if (tid < G) { Ms[tid] = -INFINITY; Ls[tid] = 0.f; }
  float acc[DEC_MAXO];
#pragma unroll
  for (int k = 0; k < DEC_MAXO; k++) acc[k] = 0.f;
  const int lane = tid & 31, warp = tid >> 5;

  for (int k0 = start; k0 < end; k0 += KT) {
    __syncthreads();
    for (int i = tid; i < KT * hd; i += blockDim.x) {
      const int kj = i / hd, d = i - kj * hd;
      const int p = k0 + kj;
      float kv = 0.f, vv = 0.f;
      if (p < end) {
        const size_t o = (size_t)(p % ring) * kvDim + (size_t)g * hd + d;
        kv = ldf<T>(kc + o);
        vv = ldf<T>(vc + o);
      }
      Ks[kj * (hd + 1) + d] = kv;
      Vs[kj * hd + d] = vv;
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
      int heads, int kvHeads, int hd, int ring, int window, float scale, float softcap, int nsplit

CK void __launch_bounds__(128) ck_attn_decode_f32(DEC_ARGS(float)) {
  attn_decode<float>(partO, partML, q, kc, vc, pos0, heads, kvHeads, hd, ring, window, scale, softcap, nsplit);
}
CK void __launch_bounds__(128) ck_attn_decode_f16(DEC_ARGS(__half)) {
  attn_decode<__half>(partO, partML, q, kc, vc, pos0, heads, kvHeads, hd, ring, window, scale, softcap, nsplit);
}

// ---- decode pass 2: block (head, token), hd threads.
CK void ck_attn_combine(float* out, const float* __restrict__ partO, const float* __restrict__ partML,
                        const float* __restrict__ sinks, int T, int heads, int hd, int nsplit) {
  const int h = blockIdx.x, t = blockIdx.y, d = threadIdx.x;
  const size_t base = ((size_t)t * heads + h) * nsplit;
  float M = -INFINITY;
  for (int s = 0; s < nsplit; s++) M = fmaxf(M, partML[2 * (base + s)]);
  if (sinks) M = fmaxf(M, sinks[h]);
  float L = 0.f, o = 0.f;
  for (int s = 0; s < nsplit; s++) {
    const float m = partML[2 * (base + s)];
    if (m == -INFINITY) continue;
    const float w = expf(m - M);
    L += partML[2 * (base + s) + 1] * w;
    o += partO[(base + s) * hd + d] * w;
  }
  if (sinks) L += expf(sinks[h] - M);
  out[((size_t)t * heads + h) * hd + d] = o / L;
}

// ---- prefill: block (32 queries, head), 128 threads, f32 tiles of 32 keys.
#define PQ 32
#define PK 32
#define PRE_MAXO 64  // 32*hd/128 outputs per thread, hd <= 256

template <class T>
__device__ __forceinline__ void attn_prefill(float* __restrict__ out, const float* __restrict__ q,
                                             const T* __restrict__ kc, const T* __restrict__ vc, const int* pos0,
                                             int Tn, int heads, int kvHeads, int hd, int ring, int window,
                                             float scale, float softcap, const float* __restrict__ sinks) {
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
  for (int i = tid; i < PQ * hd; i += blockDim.x) {
    const int qi = i / hd, d = i - qi * hd;
    Qs[qi * (hd + 1) + d] = qi < nq ? q[((size_t)(t0 + qi) * heads + h) * hd + d] : 0.f;
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
    for (int i = tid; i < PK * hd; i += blockDim.x) {
      const int kj = i / hd, d = i - kj * hd;
      const int p = k0 + kj;
      float kv = 0.f, vv = 0.f;
      if (p <= pLast) {
        const size_t o = (size_t)(p % ring) * kvDim + (size_t)g * hd + d;
        kv = ldf<T>(kc + o);
        vv = ldf<T>(vc + o);
      }
      Ks[kj * (hd + 1) + d] = kv;
      Vs[kj * hd + d] = vv;
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
      int hd, int ring, int window, float scale, float softcap, const float *sinks

CK void __launch_bounds__(128) ck_attn_prefill_f32(PRE_ARGS(float)) {
  attn_prefill<float>(out, q, kc, vc, pos0, Tn, heads, kvHeads, hd, ring, window, scale, softcap, sinks);
}
CK void __launch_bounds__(128) ck_attn_prefill_f16(PRE_ARGS(__half)) {
  attn_prefill<__half>(out, q, kc, vc, pos0, Tn, heads, kvHeads, hd, ring, window, scale, softcap, sinks);
}
