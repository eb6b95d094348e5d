// elementwise.cu: embedding lookup, norms, residual add, RoPE, KV write,
// gated activation, argmax and the step-state counter. Shapes and geometry:
// abi.go.
#include "common.cuh"

// ---- embed: out[t] = dequant(table row ids[t]) * scale; grid (T), 128 threads.
template <class C>
__device__ __forceinline__ void embed(float* __restrict__ out, const uint8_t* __restrict__ table,
                                      const int* __restrict__ ids, int dim, int rowBytes, float scale) {
  const int t = blockIdx.x;
  const uint8_t* row = table + (size_t)ids[t] * rowBytes;
  float* o = out + (size_t)t * dim;
  const int nchunk = dim >> 5;
  for (int c = threadIdx.x; c < nchunk; c += blockDim.x) {
    float v[32];
    deq_lin<C>(row, nchunk, c, v);
#pragma unroll
    for (int i = 0; i < 32; i++) o[32 * c + i] = v[i] * scale;
  }
}

#define DEF_EMBED(name, C)                                                                             \
  CK void ck_embed_##name(float* out, const uint8_t* table, const int* ids, int T, int dim, int rowBytes, \
                          float scale) {                                                               \
    ck_pdl();                                                                                          \
    embed<C>(out, table, ids, dim, rowBytes, scale);                                                   \
  }
DEF_EMBED(f32, CF32)
DEF_EMBED(f16, CF16)
DEF_EMBED(bf16, CBF16)
DEF_EMBED(q8_0, CQ8_0)
DEF_EMBED(q4_0, CQ4_0)
DEF_EMBED(q4_K, CQ4_K)
DEF_EMBED(q6_K, CQ6_K)

__device__ __forceinline__ void rms_apply(float* __restrict__ o, const float* xr, const float* __restrict__ w,
                                          int dim, float eps, int plusOne) {
  double ss = 0;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += (double)xr[i] * (double)xr[i];
  ss = block_sum_d(ss);
  const float inv = (float)(1.0 / sqrt(ss / dim + (double)eps));
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = xr[i] * inv;
    if (w) v *= plusOne ? 1.f + w[i] : w[i];
    o[i] = v;
  }
}

// ---- rmsnorm: out = x/rms(x)·w; grid (rows), 256 threads. out may alias x.
CK void __launch_bounds__(256) ck_rmsnorm(float* out, const float* x, const float* __restrict__ w, int rows,
                                          int dim, float eps, int plusOne) {
  ck_pdl();
  const size_t off = (size_t)blockIdx.x * dim;
  rms_apply(out + off, x + off, w, dim, eps, plusOne);
}

// ---- add_rmsnorm: resid += deltaScale·delta; out = rmsnorm(resid)·w.
CK void __launch_bounds__(256) ck_add_rmsnorm(float* resid, const float* __restrict__ delta, float* out,
                                              const float* __restrict__ w, int rows, int dim, float eps,
                                              int plusOne, float deltaScale) {
  ck_pdl();
  const size_t off = (size_t)blockIdx.x * dim;
  float* rr = resid + off;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) rr[i] = rr[i] + deltaScale * delta[off + i];
  __syncthreads();
  rms_apply(out + off, rr, w, dim, eps, plusOne);
}

// ---- add: out = a + bScale·b; grid ceil(n/1024), 256 threads × 4.
CK void ck_add(float* out, const float* a, const float* b, int n, float bScale) {
  ck_pdl();
  const int base = blockIdx.x * 1024 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const int i = base + k * 256;
    if (i < n) out[i] = a[i] + bScale * b[i];
  }
}

// ---- rope: grid (T, heads), 64 threads; each thread rotates pairs.
CK void ck_rope(float* x, const int* pos0, const float* __restrict__ invFreq, int T, int heads, int headDim,
                int rotDims, int neox, float mscale) {
  ck_pdl();
  const int t = blockIdx.x, h = blockIdx.y;
  const int pos = *pos0 + t;
  float* v = x + ((size_t)t * heads + h) * headDim;
  const int half = rotDims >> 1;
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float a = (float)pos * invFreq[i];
    double s, c;
    sincos((double)a, &s, &c);
    const float cs = (float)c * mscale, sn = (float)s * mscale;
    const int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
    const float x0 = v[i0], x1 = v[i1];
    v[i0] = x0 * cs - x1 * sn;
    v[i1] = x1 * cs + x0 * sn;
  }
}

// ---- rope_kv: RoPE on q (in place) and k, and the K/V cache write, in
// one launch (decode and prefill). Grid (T, heads + kvHeads), 64 threads:
// blocks y < heads rotate query head y; the others rotate kv head
// y - heads into cache row (*pos0+t) % ring and copy its v. Token t's q, k,
// v rows start at q + t*qStride, k + t*kvStride, v + t*kvStride (a fused
// qkv buffer: qStride = kvStride = heads*hd + 2*kvHeads*hd). rotDims 0 =
// NoPE (plain cache write).
template <class T>
__device__ __forceinline__ T cvt(float v);
template <>
__device__ __forceinline__ float cvt<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half cvt<__half>(float v) { return __float2half_rn(v); }

template <class T>
__device__ __forceinline__ void rope_kv(float* q, const float* k, const float* v, T* kc, T* vc, const int* pos0,
                                        const float* __restrict__ invFreq, int heads, int kvHeads, int hd,
                                        int rotDims, int neox, float mscale, int qStride, int kvStride, int ring) {
  const int t = blockIdx.x, hh = blockIdx.y;
  const int pos = *pos0 + t, half = rotDims >> 1;
  const float* src;
  float* dst32 = nullptr;
  T* dst = nullptr;
  if (hh < heads) {
    dst32 = q + (size_t)t * qStride + (size_t)hh * hd;
    src = dst32;
  } else {
    const int g = hh - heads;
    src = k + (size_t)t * kvStride + (size_t)g * hd;
    const size_t row = (size_t)(pos % ring) * kvHeads * hd + (size_t)g * hd;
    dst = kc + row;
    const float* vs = v + (size_t)t * kvStride + (size_t)g * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) vc[row + d] = cvt<T>(vs[d]);
    for (int d = rotDims + threadIdx.x; d < hd; d += blockDim.x) dst[d] = cvt<T>(src[d]);
  }
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float a = (float)pos * invFreq[i];
    double sd, cd;
    sincos((double)a, &sd, &cd);
    const float cs = (float)cd * mscale, sn = (float)sd * mscale;
    const int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
    const float x0 = src[i0], x1 = src[i1];
    const float y0 = x0 * cs - x1 * sn, y1 = x1 * cs + x0 * sn;
    if (dst32) { dst32[i0] = y0; dst32[i1] = y1; }
    else { dst[i0] = cvt<T>(y0); dst[i1] = cvt<T>(y1); }
  }
}

#define ROPEKV_ARGS(T)                                                                                 \
  float *q, const float *k, const float *v, T *kc, T *vc, const int *pos0, const float *invFreq, int Tn, \
      int heads, int kvHeads, int hd, int rotDims, int neox, float mscale, int qStride, int kvStride, int ring
CK void ck_rope_kv_f32(ROPEKV_ARGS(float)) {
  ck_pdl();
  rope_kv<float>(q, k, v, kc, vc, pos0, invFreq, heads, kvHeads, hd, rotDims, neox, mscale, qStride, kvStride, ring);
}
CK void ck_rope_kv_f16(ROPEKV_ARGS(__half)) {
  ck_pdl();
  rope_kv<__half>(q, k, v, kc, vc, pos0, invFreq, heads, kvHeads, hd, rotDims, neox, mscale, qStride, kvStride, ring);
}

// ---- kv write: rows (*pos0+t) % ring of the K and V caches; grid (T), 256.

template <class T>
__device__ __forceinline__ void kv_write(T* kc, T* vc, const float* k, const float* v, const int* pos0, int kvDim,
                                         int ring) {
  const int t = blockIdx.x;
  const size_t dst = (size_t)((*pos0 + t) % ring) * kvDim, src = (size_t)t * kvDim;
  for (int i = threadIdx.x; i < kvDim; i += blockDim.x) {
    kc[dst + i] = cvt<T>(k[src + i]);
    vc[dst + i] = cvt<T>(v[src + i]);
  }
}
CK void ck_kv_write_f32(float* kc, float* vc, const float* k, const float* v, const int* pos0, int T, int kvDim,
                        int ring) {
  ck_pdl();
  kv_write<float>(kc, vc, k, v, pos0, kvDim, ring);
}
CK void ck_kv_write_f16(__half* kc, __half* vc, const float* k, const float* v, const int* pos0, int T,
                        int kvDim, int ring) {
  ck_pdl();
  kv_write<__half>(kc, vc, k, v, pos0, kvDim, ring);
}

// ---- act_mul: out[t][i] = act(g[t*gStride+i])·u[t*uStride+i]; grid (ceil(n/256), T).
CK void ck_act_mul(float* out, const float* g, const float* u, int T, int n, int gStride, int uStride, int act) {
  ck_pdl();
  const int i = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (i >= n) return;
  out[(size_t)t * n + i] = act_fn(g[(size_t)t * gStride + i], act) * u[(size_t)t * uStride + i];
}

// ---- argmax over one row, 1024 threads; lowest index wins ties.
__device__ __forceinline__ int block_argmax(const float* __restrict__ v, int n) {
  __shared__ float bv[32];
  __shared__ int bi[32];
  float best = -INFINITY;
  int idx = 0x7fffffff;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float x = v[i];
    if (x > best) { best = x; idx = i; }  // i increases: first max kept
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ob > best || (ob == best && oi < idx)) { best = ob; idx = oi; }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) { bv[warp] = best; bi[warp] = idx; }
  __syncthreads();
  if (warp == 0) {
    best = lane < (int)(blockDim.x >> 5) ? bv[lane] : -INFINITY;
    idx = lane < (int)(blockDim.x >> 5) ? bi[lane] : 0x7fffffff;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
      if (ob > best || (ob == best && oi < idx)) { best = ob; idx = oi; }
    }
    if (lane == 0) bi[0] = idx == 0x7fffffff ? 0 : idx;
  }
  __syncthreads();
  return bi[0];
}

CK void __launch_bounds__(1024) ck_argmax_rows(int* ids, const float* logits, int T, int vocab) {
  ck_pdl();
  const int id = block_argmax(logits + (size_t)blockIdx.x * vocab, vocab);
  if (threadIdx.x == 0) ids[blockIdx.x] = id;
}

// The greedy step of a CUDA graph: the next token feeds embed through
// state[1], the history ring keeps every step's id, the position advances.
CK void __launch_bounds__(1024) ck_argmax_step(const float* logits, int vocab, int* state, int* hist, int histLen) {
  ck_pdl();
  const int id = block_argmax(logits, vocab);
  if (threadIdx.x == 0) {
    state[1] = id;
    if (hist) hist[state[2] % histLen] = id;
    state[2] += 1;
    state[0] += 1;
  }
}

CK void ck_advance(int* state, int n) {
  ck_pdl();
  if (threadIdx.x == 0) state[0] += n;
}
