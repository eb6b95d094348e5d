// common.cuh: the device layout of every weight codec (see abi.go, Repack)
// and the helpers the kernels share. Each codec is a struct with:
//   deq(row, nchunk, c, v)   the 32 weights of chunk c of a row, as f32, in
//                            the order xpos gives;
//   xpos(c, i)               the element index within the row of v[i];
//   dot(row, nchunk, c, x)   Σ w·x over chunk c with f32 x (exact);
//   dotq(row, nchunk, c, xq, xds)  the same with x quantized to int8 per
//                            32 (xq int8[cols], xds float2 {d, d·Σq} per 32).
// A chunk is 32 weights; nchunk = cols/32. Rows are 16-byte aligned.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define CK extern "C" __global__

// Programmatic dependent launch (PDL). Inside the decode's CUDA graphs the
// backend launches kernels with programmatic stream serialization on sm_90
// (kernels.Dependent): a kernel may then start while the one before it on the
// stream still runs. ck_pdl() waits (griddepcontrol.wait) until the kernels
// before this one have finished and their writes are visible, then lets the
// next kernel start launching (griddepcontrol.launch_dependents), whose blocks
// in turn wait in their ck_pdl(). Every kernel calls it before it reads or
// writes any buffer another kernel touches (read-only weights may be read, or
// prefetched, before). Compiled only into the sm_90 cubin; the sm_80 cubin and
// the compute_80 PTX have no such instructions (and are never launched so),
// and in an ordinary launch both instructions return at once.
__device__ __forceinline__ void ck_pdl() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ float h2f(const uint8_t* p) {
  return __half2float(*reinterpret_cast<const __half*>(p));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ void load8f(const float* p, float* v) {
  float4 a = *reinterpret_cast<const float4*>(p);
  float4 b = *reinterpret_cast<const float4*>(p + 4);
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
  v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}

// ---- f32 ----
struct CF32 {
  static __device__ __forceinline__ int xpos(int c, int i) { return c * 32 + i; }
  static __device__ __forceinline__ void deq(const uint8_t* row, int, int c, float* v) {
    const float* p = reinterpret_cast<const float*>(row) + c * 32;
#pragma unroll
    for (int i = 0; i < 32; i += 8) load8f(p + i, v + i);
  }
};

// ---- f16 ----
struct CF16 {
  static __device__ __forceinline__ int xpos(int c, int i) { return c * 32 + i; }
  static __device__ __forceinline__ void deq(const uint8_t* row, int, int c, float* v) {
    const uint4* p = reinterpret_cast<const uint4*>(row + c * 64);
#pragma unroll
    for (int k = 0; k < 4; k++) {
      uint4 u = p[k];
      const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
      for (int j = 0; j < 4; j++) {
        float2 f = __half22float2(h[j]);
        v[8 * k + 2 * j] = f.x;
        v[8 * k + 2 * j + 1] = f.y;
      }
    }
  }
};

// ---- bf16 ----
struct CBF16 {
  static __device__ __forceinline__ int xpos(int c, int i) { return c * 32 + i; }
  static __device__ __forceinline__ void deq(const uint8_t* row, int, int c, float* v) {
    const uint4* p = reinterpret_cast<const uint4*>(row + c * 64);
#pragma unroll
    for (int k = 0; k < 4; k++) {
      uint4 u = p[k];
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int j = 0; j < 4; j++) {
        v[8 * k + 2 * j] = __uint_as_float(w[j] << 16);
        v[8 * k + 2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
      }
    }
  }
};

// ---- q8_0, planar per row: qs[nchunk][32] int8, then d[nchunk] f16 ----
struct CQ8_0 {
  static __device__ __forceinline__ int xpos(int c, int i) { return c * 32 + i; }
  static __device__ __forceinline__ void deq(const uint8_t* row, int nchunk, int c, float* v) {
    const float d = h2f(row + nchunk * 32 + 2 * c);
    const uint4* p = reinterpret_cast<const uint4*>(row + c * 32);
#pragma unroll
    for (int k = 0; k < 2; k++) {
      uint4 u = p[k];
      const int8_t* q = reinterpret_cast<const int8_t*>(&u);
#pragma unroll
      for (int j = 0; j < 16; j++) v[16 * k + j] = d * (float)q[j];
    }
  }
  static __device__ __forceinline__ float dotq(const uint8_t* row, int nchunk, int c, const int8_t* xq,
                                               const float2* xds) {
    const float d = h2f(row + nchunk * 32 + 2 * c);
    const uint4* p = reinterpret_cast<const uint4*>(row + c * 32);
    const int4* x = reinterpret_cast<const int4*>(xq + c * 32);
    uint4 a = p[0], b = p[1];
    int4 xa = x[0], xb = x[1];
    int s = 0;
    s = __dp4a((int)a.x, xa.x, s); s = __dp4a((int)a.y, xa.y, s);
    s = __dp4a((int)a.z, xa.z, s); s = __dp4a((int)a.w, xa.w, s);
    s = __dp4a((int)b.x, xb.x, s); s = __dp4a((int)b.y, xb.y, s);
    s = __dp4a((int)b.z, xb.z, s); s = __dp4a((int)b.w, xb.w, s);
    return d * xds[c].x * (float)s;
  }
};

// ---- q4_0, planar per row: qs[nchunk][16] nibbles, then d[nchunk] f16 ----
struct CQ4_0 {
  static __device__ __forceinline__ int xpos(int c, int i) { return c * 32 + i; }
  static __device__ __forceinline__ void deq(const uint8_t* row, int nchunk, int c, float* v) {
    const float d = h2f(row + nchunk * 16 + 2 * c);
    uint4 u = *reinterpret_cast<const uint4*>(row + c * 16);
    const uint8_t* q = reinterpret_cast<const uint8_t*>(&u);
#pragma unroll
    for (int j = 0; j < 16; j++) {
      v[j] = d * (float)((int)(q[j] & 15) - 8);
      v[j + 16] = d * (float)((int)(q[j] >> 4) - 8);
    }
  }
  static __device__ __forceinline__ float dotq(const uint8_t* row, int nchunk, int c, const int8_t* xq,
                                               const float2* xds) {
    const float d = h2f(row + nchunk * 16 + 2 * c);
    uint4 u = *reinterpret_cast<const uint4*>(row + c * 16);
    const int4* x = reinterpret_cast<const int4*>(xq + c * 32);
    int4 xa = x[0], xb = x[1];
    int s = 0;
    s = __dp4a((int)(u.x & 0x0f0f0f0f), xa.x, s); s = __dp4a((int)((u.x >> 4) & 0x0f0f0f0f), xb.x, s);
    s = __dp4a((int)(u.y & 0x0f0f0f0f), xa.y, s); s = __dp4a((int)((u.y >> 4) & 0x0f0f0f0f), xb.y, s);
    s = __dp4a((int)(u.z & 0x0f0f0f0f), xa.z, s); s = __dp4a((int)((u.z >> 4) & 0x0f0f0f0f), xb.z, s);
    s = __dp4a((int)(u.w & 0x0f0f0f0f), xa.w, s); s = __dp4a((int)((u.w >> 4) & 0x0f0f0f0f), xb.w, s);
    const float2 ds = xds[c];
    return d * (ds.x * (float)s - 8.0f * ds.y);
  }
};

// ---- q4_K, GGUF blocks of 144 B: d, dmin (f16), scales[12], qs[128] ----
__device__ __forceinline__ void q4k_scale_min(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

struct CQ4_K {
  static __device__ __forceinline__ int xpos(int c, int i) { return c * 32 + i; }
  static __device__ __forceinline__ void deq(const uint8_t* row, int, int c, float* v) {
    const uint8_t* blk = row + (c >> 3) * 144;
    const int j = c & 7;
    int sc, m;
    q4k_scale_min(j, blk + 4, sc, m);
    const float d = h2f(blk) * (float)sc, mn = h2f(blk + 2) * (float)m;
    const uint4* p = reinterpret_cast<const uint4*>(blk + 16 + 32 * (j >> 1));
    const int sh = 4 * (j & 1);
#pragma unroll
    for (int k = 0; k < 2; k++) {
      uint4 u = p[k];
      const uint8_t* q = reinterpret_cast<const uint8_t*>(&u);
#pragma unroll
      for (int i = 0; i < 16; i++) v[16 * k + i] = d * (float)((q[i] >> sh) & 15) - mn;
    }
  }
  static __device__ __forceinline__ float dotq(const uint8_t* row, int, int c, const int8_t* xq,
                                               const float2* xds) {
    const uint8_t* blk = row + (c >> 3) * 144;
    const int j = c & 7;
    int sc, m;
    q4k_scale_min(j, blk + 4, sc, m);
    const uint4* p = reinterpret_cast<const uint4*>(blk + 16 + 32 * (j >> 1));
    const int sh = 4 * (j & 1);
    const int4* x = reinterpret_cast<const int4*>(xq + c * 32);
    uint4 a = p[0], b = p[1];
    int4 xa = x[0], xb = x[1];
    int s = 0;
    s = __dp4a((int)((a.x >> sh) & 0x0f0f0f0f), xa.x, s); s = __dp4a((int)((a.y >> sh) & 0x0f0f0f0f), xa.y, s);
    s = __dp4a((int)((a.z >> sh) & 0x0f0f0f0f), xa.z, s); s = __dp4a((int)((a.w >> sh) & 0x0f0f0f0f), xa.w, s);
    s = __dp4a((int)((b.x >> sh) & 0x0f0f0f0f), xb.x, s); s = __dp4a((int)((b.y >> sh) & 0x0f0f0f0f), xb.y, s);
    s = __dp4a((int)((b.z >> sh) & 0x0f0f0f0f), xb.z, s); s = __dp4a((int)((b.w >> sh) & 0x0f0f0f0f), xb.w, s);
    const float2 ds = xds[c];
    return h2f(blk) * (float)sc * ds.x * (float)s - h2f(blk + 2) * (float)m * ds.y;
  }
};

// ---- q6_K, planar per row: [ql[128] qh[64] scales[16]] per block (208 B),
// then d[nblocks] f16. Chunk c: block c>>3, half (c>>2)&1, group g = c&3:
// the 8 l's g*8..g*8+7 of the half's four 32-element parts.
struct CQ6_K {
  static __device__ __forceinline__ int xpos(int c, int i) {
    return (c >> 3) * 256 + ((c >> 2) & 1) * 128 + (i >> 3) * 32 + (c & 3) * 8 + (i & 7);
  }
  static __device__ __forceinline__ void deq(const uint8_t* row, int nchunk, int c, float* v) {
    const int b = c >> 3, half = (c >> 2) & 1, g = c & 3;
    const uint8_t* blk = row + b * 208;
    const float d = h2f(row + (nchunk >> 3) * 208 + 2 * b);
    const uint8_t* ql = blk + 64 * half + 8 * g;
    const uint8_t* qh = blk + 128 + 32 * half + 8 * g;
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192) + 8 * half + (g >> 1);
    uint2 la = *reinterpret_cast<const uint2*>(ql);
    uint2 lb = *reinterpret_cast<const uint2*>(ql + 32);
    uint2 hh = *reinterpret_cast<const uint2*>(qh);
    const uint8_t* A = reinterpret_cast<const uint8_t*>(&la);
    const uint8_t* B = reinterpret_cast<const uint8_t*>(&lb);
    const uint8_t* H = reinterpret_cast<const uint8_t*>(&hh);
    const float d0 = d * sc[0], d1 = d * sc[2], d2 = d * sc[4], d3 = d * sc[6];
#pragma unroll
    for (int i = 0; i < 8; i++) {
      v[i] = d0 * (float)((int)((A[i] & 15) | (((H[i] >> 0) & 3) << 4)) - 32);
      v[8 + i] = d1 * (float)((int)((B[i] & 15) | (((H[i] >> 2) & 3) << 4)) - 32);
      v[16 + i] = d2 * (float)((int)((A[i] >> 4) | (((H[i] >> 4) & 3) << 4)) - 32);
      v[24 + i] = d3 * (float)((int)((B[i] >> 4) | (((H[i] >> 6) & 3) << 4)) - 32);
    }
  }
  static __device__ __forceinline__ float dotq(const uint8_t* row, int nchunk, int c, const int8_t* xq,
                                               const float2* xds) {
    const int b = c >> 3, half = (c >> 2) & 1, g = c & 3;
    const uint8_t* blk = row + b * 208;
    const float d = h2f(row + (nchunk >> 3) * 208 + 2 * b);
    const uint8_t* ql = blk + 64 * half + 8 * g;
    const uint8_t* qh = blk + 128 + 32 * half + 8 * g;
    // The half's eight scales in one load; part p's is byte (g>>1) + 2p.
    const uint2 sc8 = *reinterpret_cast<const uint2*>(blk + 192 + 8 * half);
    const unsigned long long sc64 = ((unsigned long long)sc8.y << 32) | sc8.x;
    const int scb = 8 * (g >> 1);
    uint2 la = *reinterpret_cast<const uint2*>(ql);
    uint2 lb = *reinterpret_cast<const uint2*>(ql + 32);
    uint2 hh = *reinterpret_cast<const uint2*>(qh);
    const int xb = b * 256 + half * 128 + g * 8;   // element of part 0
    const int xblk = b * 8 + half * 4;              // x block of part 0
    float acc = 0.f;
    const uint32_t A[2] = {la.x, la.y}, B[2] = {lb.x, lb.y}, H[2] = {hh.x, hh.y};
#pragma unroll
    for (int part = 0; part < 4; part++) {
      const int2 xv = *reinterpret_cast<const int2*>(xq + xb + part * 32);
      const int xw[2] = {xv.x, xv.y};
      int s = 0;
#pragma unroll
      for (int k = 0; k < 2; k++) {
        uint32_t q;
        switch (part) {
          case 0: q = (A[k] & 0x0f0f0f0f) | ((H[k] << 4) & 0x30303030); break;
          case 1: q = (B[k] & 0x0f0f0f0f) | ((H[k] << 2) & 0x30303030); break;
          case 2: q = ((A[k] >> 4) & 0x0f0f0f0f) | (H[k] & 0x30303030); break;
          default: q = ((B[k] >> 4) & 0x0f0f0f0f) | ((H[k] >> 2) & 0x30303030); break;
        }
        s = __dp4a((int)__vsubss4(q, 0x20202020u), xw[k], s);
      }
      acc += (float)(int8_t)(sc64 >> (scb + 16 * part)) * xds[xblk + part].x * (float)s;
    }
    return d * acc;
  }
};

// deq_lin: the 32 weights at row elements [32c, 32c+32), in order (GEMM
// tiles and embed rows). Every codec but q6_K has xpos(c, i) = 32c + i.
template <class C>
__device__ __forceinline__ void deq_lin(const uint8_t* row, int nchunk, int c, float* v) { C::deq(row, nchunk, c, v); }
template <>
__device__ __forceinline__ void deq_lin<CQ6_K>(const uint8_t* row, int nchunk, int c, float* v) {
  const int b = c >> 3, half = (c >> 2) & 1, part = c & 3;
  const uint8_t* blk = row + b * 208;
  const float d = h2f(row + (nchunk >> 3) * 208 + 2 * b);
  const uint8_t* ql = blk + 64 * half + (part & 1) * 32;
  const uint8_t* qh = blk + 128 + 32 * half;
  const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192) + 8 * half + 2 * part;
  const int lsh = (part >> 1) * 4, hsh = 2 * part;
  const float d0 = d * sc[0], d1 = d * sc[1];
#pragma unroll
  for (int k = 0; k < 2; k++) {
    uint4 L = *reinterpret_cast<const uint4*>(ql + 16 * k);
    uint4 H = *reinterpret_cast<const uint4*>(qh + 16 * k);
    const uint8_t* A = reinterpret_cast<const uint8_t*>(&L);
    const uint8_t* B = reinterpret_cast<const uint8_t*>(&H);
#pragma unroll
    for (int i = 0; i < 16; i++)
      v[16 * k + i] = (k ? d1 : d0) * (float)((int)(((A[i] >> lsh) & 15) | (((B[i] >> hsh) & 3) << 4)) - 32);
  }
}

// Four consecutive values of a KV cache row as f32 (16-byte f32 or
// 8-byte f16 loads; the offset is a multiple of 4).
__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 ld4(const __half* p) {
  uint2 u = *reinterpret_cast<const uint2*>(p);
  float2 a = __half22float2(*reinterpret_cast<__half2*>(&u.x)), b = __half22float2(*reinterpret_cast<__half2*>(&u.y));
  return make_float4(a.x, a.y, b.x, b.y);
}

// The x positions of chunk c of a codec are contiguous except for q6_K.
template <class C>
__device__ __forceinline__ void load_x(const float* x, int c, float* v) {
#pragma unroll
  for (int i = 0; i < 32; i += 8) load8f(x + C::xpos(c, i), v + i);
}

// Block-wide sum in double (any block of whole warps, ≤ 1024 threads): the CPU accumulates the mean of
// squares in float64.
__device__ __forceinline__ double block_sum_d(double v) {
  __shared__ double part[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) part[0] = v;
  }
  __syncthreads();
  double r = part[0];
  __syncthreads();
  return r;
}

// 1/rms(x) over n values, as the CPU: mean of squares in float64.
__device__ __forceinline__ float block_rms_inv(const float* __restrict__ x, int n, float eps) {
  double ss = 0;
#pragma unroll 8
  for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)x[i] * (double)x[i];
  ss = block_sum_d(ss);
  return (float)(1.0 / sqrt(ss / n + (double)eps));
}

__device__ __forceinline__ float act_fn(float g, int act) {
  if (act == 1) {
    // gelu_tanh as cpu/kernel: v / (1 + exp(-2·√(2/π)·(v + 0.044715 v³)))
    float t = g * g * 0.044715f;
    float a = -1.5957691216057308f * (g + g * t);
    return g / (1.0f + __expf(a));
  }
  return g / (1.0f + __expf(-g));
}
