// harness.cu: checks every kernel of ../kernels.cu against a plain CPU loop
// on random data, then times them on llama-1b shapes (hidden 2048, ffn
// 8192, 32 heads / 8 kv heads of 64, vocab 128256: synth's "llama-1b") and
// a whole decode step as a CUDA graph. Build and run on the GPU machine:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o harness cuda/kernels/test/harness.cu && ./harness [mode]
//
// (CUDA 11.8 here: add -ccbin g++-11.) Modes: none = everything; check =
// the checks only; mv = checks, then the int8-activation matvecs; attn =
// checks, then decode attention by depth (two-pass vs ck_attn_dec1_*, and
// by split count); step = attn, then whole decode steps at depths 511 and
// 2047 with each attention path (q4_0, q8_0, q4_K).
//
// Exit status 1 when any check fails. Tolerances (max error over outputs,
// relative to Σ|w·x| of the output or to max|ref|):
//   exact matvec/embed/norms/rope/attention (f32 accumulate): 1e-4;
//   int8-activation matvec (ck_mvq_*): 1e-4 against the same int8 arithmetic
//     done on the CPU (the CPU's Int8 mode); its distance from the exact
//     product is reported (llama.cpp's MMQ has the same activation rounding);
//   GEMM (f16 tiles): 1e-4 against the product of the f16-rounded operands;
//     its distance from the exact product is reported;
//   int8 GEMM (ck_quant_q8 + ck_mmq_*/ck_mmqs_*): the quantization exactly
//     the CPU's (the GLU-fused one within one step, expf against __expf),
//     the product 1e-4 against the same int8 arithmetic on the CPU; its
//     distance from the exact product is reported;
//   flash prefill (ck_flash_prefill_*): as ck_fa_prefill_*, 1e-4 with an
//     f16 cache, 2e-3 with an f32 one (K and V rounded to f16).
// `./harness prefill` runs the checks, then the prefill GEMMs (f16 wmma
// against int8 mma) and a whole prefill's GEMM/attention/rest split.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../kernels.cu"

#define CUDA(x)                                                                      \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      exit(2);                                                                       \
    }                                                                                \
  } while (0)

static int failures = 0;
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd() {
  rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}
static float frand() { return (rnd() & 0xffffff) / float(0x1000000) * 2.f - 1.f; }

static uint16_t f2h(float f) { __half h = __float2half_rn(f); uint16_t u; memcpy(&u, &h, 2); return u; }
static float h2f_host(uint16_t u) { __half h; memcpy(&h, &u, 2); return __half2float(h); }
static float hround(float f) { return h2f_host(f2h(f)); }

static void check(const char* what, double err, double tol) {
  bool ok = err <= tol && std::isfinite(err);
  if (!ok) failures++;
  printf("%-44s err %.3g (tol %.0e) %s\n", what, err, tol, ok ? "ok" : "FAIL");
}

// ---- codecs on the host: GGUF layout, dequantization, Repack (as abi.go) ----
struct Codec {
  const char* name;
  int block, gguf, qbytes;
  bool planar;
};
static const Codec codecs[] = {
    {"f32", 1, 4, 4, false},      {"f16", 1, 2, 2, false},      {"bf16", 1, 2, 2, false},
    {"q8_0", 32, 34, 32, true},   {"q4_0", 32, 18, 16, true},   {"q4_K", 256, 144, 144, false},
    {"q6_K", 256, 210, 208, true},
};
static int devRowBytes(const Codec& c, int cols) { return ((cols / c.block * c.gguf) + 15) & ~15; }

static void randomRow(const Codec& c, int cols, uint8_t* p) {
  std::string n = c.name;
  int nb = cols / c.block;
  if (n == "f32") for (int i = 0; i < cols; i++) { float f = frand(); memcpy(p + 4 * i, &f, 4); }
  else if (n == "f16") for (int i = 0; i < cols; i++) { uint16_t h = f2h(frand()); memcpy(p + 2 * i, &h, 2); }
  else if (n == "bf16") for (int i = 0; i < cols; i++) { float f = frand(); uint32_t u; memcpy(&u, &f, 4); uint16_t h = u >> 16; memcpy(p + 2 * i, &h, 2); }
  else {
    for (int i = 0; i < nb * c.gguf; i++) p[i] = rnd();
    for (int b = 0; b < nb; b++) {
      uint8_t* blk = p + b * c.gguf;
      uint16_t d = f2h(0.01f + 0.02f * (frand() + 1)), dm = f2h(0.005f + 0.01f * (frand() + 1));
      if (n == "q6_K") memcpy(blk + 208, &d, 2);
      else memcpy(blk, &d, 2);
      if (n == "q4_K") memcpy(blk + 2, &dm, 2);
    }
  }
}

static void dequantRow(const Codec& c, int cols, const uint8_t* p, float* y) {
  std::string n = c.name;
  int nb = cols / c.block;
  if (n == "f32") { memcpy(y, p, 4 * cols); return; }
  if (n == "f16") { for (int i = 0; i < cols; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); y[i] = h2f_host(h); } return; }
  if (n == "bf16") { for (int i = 0; i < cols; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); uint32_t u = (uint32_t)h << 16; memcpy(&y[i], &u, 4); } return; }
  for (int b = 0; b < nb; b++) {
    const uint8_t* blk = p + b * c.gguf;
    float* o = y + b * c.block;
    uint16_t dh; memcpy(&dh, n == "q6_K" ? blk + 208 : blk, 2);
    float d = h2f_host(dh);
    if (n == "q8_0") for (int i = 0; i < 32; i++) o[i] = d * (float)(int8_t)blk[2 + i];
    else if (n == "q4_0") for (int i = 0; i < 16; i++) { o[i] = d * (float)((blk[2 + i] & 15) - 8); o[i + 16] = d * (float)((blk[2 + i] >> 4) - 8); }
    else if (n == "q4_K") {
      uint16_t mh; memcpy(&mh, blk + 2, 2);
      float dmin = h2f_host(mh);
      const uint8_t* sc = blk + 4; const uint8_t* q = blk + 16;
      for (int j = 0; j < 8; j++) {
        int s, m;
        if (j < 4) { s = sc[j] & 63; m = sc[j + 4] & 63; }
        else { s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4); m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4); }
        for (int l = 0; l < 32; l++) {
          int qq = (q[32 * (j / 2) + l] >> (4 * (j & 1))) & 15;
          o[32 * j + l] = d * s * qq - dmin * m;
        }
      }
    } else if (n == "q6_K") {
      const uint8_t* ql = blk; const uint8_t* qh = blk + 128; const int8_t* sc = (const int8_t*)(blk + 192);
      for (int h = 0; h < 2; h++) {
        for (int l = 0; l < 32; l++) {
          int is = l / 16;
          int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          o[l] = d * sc[is] * q1; o[l + 32] = d * sc[is + 2] * q2; o[l + 64] = d * sc[is + 4] * q3; o[l + 96] = d * sc[is + 6] * q4;
        }
        o += 128; ql += 64; qh += 32; sc += 8;
      }
    }
  }
}

static void repackRow(const Codec& c, int cols, const uint8_t* s, uint8_t* d) {
  int nb = cols / c.block, in = nb * c.gguf, out = devRowBytes(c, cols);
  memset(d, 0, out);
  if (!c.planar) { memcpy(d, s, in); return; }
  bool q6 = std::string(c.name) == "q6_K";
  int dOff = q6 ? c.qbytes : 0, qOff = q6 ? 0 : 2;
  for (int b = 0; b < nb; b++) {
    memcpy(d + b * c.qbytes, s + b * c.gguf + qOff, c.qbytes);
    memcpy(d + nb * c.qbytes + 2 * b, s + b * c.gguf + dOff, 2);
  }
}

// A random weight: GGUF bytes, its exact dequantization, and the device copy.
struct Weight {
  const Codec* c;
  int rows, cols, rb;
  std::vector<float> deq;  // rows*cols
  uint8_t* dev = nullptr;
  size_t bytes() const { return (size_t)rows * rb; }
};
static Weight makeWeight(const Codec& c, int rows, int cols, bool keepDeq = true) {
  Weight w{&c, rows, cols, devRowBytes(c, cols)};
  int in = cols / c.block * c.gguf;
  std::vector<uint8_t> g(in), host((size_t)rows * w.rb);
  if (keepDeq) w.deq.resize((size_t)rows * cols);
  // Benchmark weights (keepDeq false) repeat 61 random rows: their values
  // do not matter, their addresses (all distinct) do.
  for (int r = 0; r < rows; r++) {
    if (!keepDeq && r >= 61) {
      memcpy(&host[(size_t)r * w.rb], &host[(size_t)(r % 61) * w.rb], w.rb);
      continue;
    }
    randomRow(c, cols, g.data());
    if (keepDeq) dequantRow(c, cols, g.data(), &w.deq[(size_t)r * cols]);
    repackRow(c, cols, g.data(), &host[(size_t)r * w.rb]);
  }
  CUDA(cudaMalloc(&w.dev, host.size()));
  CUDA(cudaMemcpy(w.dev, host.data(), host.size(), cudaMemcpyHostToDevice));
  return w;
}

template <class T>
static T* upload(const std::vector<T>& v) {
  T* p;
  CUDA(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * sizeof(T)));
  CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}
template <class T>
static std::vector<T> download(const T* p, size_t n) {
  std::vector<T> v(n);
  CUDA(cudaDeviceSynchronize());
  CUDA(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}
static std::vector<float> randv(size_t n, float s = 1.f) {
  std::vector<float> v(n);
  for (auto& x : v) x = frand() * s;
  return v;
}
static double maxrel(const std::vector<float>& got, const std::vector<double>& ref, const std::vector<double>& scale) {
  double e = 0;
  for (size_t i = 0; i < got.size(); i++) e = std::max(e, std::fabs(got[i] - ref[i]) / (scale[i] + 1e-30));
  return e;
}
static double maxrel1(const std::vector<float>& got, const std::vector<double>& ref) {
  double m = 0, e = 0;
  for (double r : ref) m = std::max(m, std::fabs(r));
  for (size_t i = 0; i < got.size(); i++) e = std::max(e, std::fabs(got[i] - ref[i]));
  return e / (m + 1e-30);
}

// CPU int8 quantization of x per 32, as the kernels and the CPU's Int8 mode.
static void quantX(const float* x, int cols, std::vector<int8_t>& q, std::vector<float>& d, std::vector<float>& s) {
  q.resize(cols); d.resize(cols / 32); s.resize(cols / 32);
  for (int b = 0; b < cols / 32; b++) {
    float amax = 0;
    for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    float dd = amax / 127, id = dd != 0 ? 1 / dd : 0;
    int sum = 0;
    for (int i = 0; i < 32; i++) { int r = (int)std::nearbyint(x[b * 32 + i] * id); q[b * 32 + i] = r; sum += r; }
    d[b] = dd; s[b] = dd * sum;
  }
}
// Σ w·x with x dequantized from int8 (w exact): what the int8 path computes.
static double dotQ(const float* w, const std::vector<int8_t>& q, const std::vector<float>& d, int cols) {
  double a = 0;
  for (int k = 0; k < cols; k++) a += (double)w[k] * ((double)d[k / 32] * q[k]);
  return a;
}

typedef void (*MvFn)(float*, const uint8_t*, const uint8_t*, const float*, const float*, int, int, int, int, const float*, float, int);
typedef void (*MvbFn)(float*, const uint8_t*, const uint8_t*, const float*, const float*, int, int, int, int, int);
typedef void (*GemmFn)(float*, const uint8_t*, const float*, const float*, int, int, int, int);
typedef void (*EmbedFn)(float*, const uint8_t*, const int*, int, int, int, float);
typedef void (*MmqFn)(float*, const uint8_t*, const int8_t*, const float2*, const float*, int, int, int, int);
struct Kset { const char* name; EmbedFn embed; MvFn mv; MvbFn mvb; MvFn mvq; GemmFn gemm; MmqFn mmq, mmqs; };
static const Kset ksets[] = {
    {"f32", ck_embed_f32, ck_mv_f32, ck_mvb_f32, nullptr, ck_gemm_f32, nullptr, nullptr},
    {"f16", ck_embed_f16, ck_mv_f16, ck_mvb_f16, nullptr, ck_gemm_f16, nullptr, nullptr},
    {"bf16", ck_embed_bf16, ck_mv_bf16, ck_mvb_bf16, nullptr, ck_gemm_bf16, nullptr, nullptr},
    {"q8_0", ck_embed_q8_0, ck_mv_q8_0, ck_mvb_q8_0, ck_mvq_q8_0, ck_gemm_q8_0, ck_mmq_q8_0, ck_mmqs_q8_0},
    {"q4_0", ck_embed_q4_0, ck_mv_q4_0, ck_mvb_q4_0, ck_mvq_q4_0, ck_gemm_q4_0, ck_mmq_q4_0, ck_mmqs_q4_0},
    {"q4_K", ck_embed_q4_K, ck_mv_q4_K, ck_mvb_q4_K, ck_mvq_q4_K, ck_gemm_q4_K, ck_mmq_q4_K, ck_mmqs_q4_K},
    {"q6_K", ck_embed_q6_K, ck_mv_q6_K, ck_mvb_q6_K, ck_mvq_q6_K, ck_gemm_q6_K, ck_mmq_q6_K, ck_mmqs_q6_K},
};
// int8 prefill GEMM (gemmq.cu): shared bytes and launch, as abi.go's GemmQArgs.
static size_t mmqShared(int bm) { return (size_t)2 * (bm + QBN) * (QLD + 16); }
static void quantQ8(int8_t* xq, float2* xds, const float* x, const float* u, int T, int cols, int act, cudaStream_t s = 0) {
  ck_quant_q8<<<dim3((cols + 1023) / 1024, T), 256, 0, s>>>(xq, xds, x, u, T, cols, cols, cols, act);
}
static void mmq(const Kset& K, bool small, float* y, const uint8_t* w, const int8_t* xq, const float2* xds, const float* r,
                int rows, int cols, int rb, int T, cudaStream_t s = 0) {
  const int bm = small ? 64 : 128;
  (small ? K.mmqs : K.mmq)<<<dim3((rows + QBN - 1) / QBN, (T + bm - 1) / bm), 256, mmqShared(bm), s>>>(y, w, xq, xds, r, rows, cols, rb, T);
}
static size_t mvqShared(int cols) { return cols + 8 * (cols / 32); }
static int mvqBlocks(int rows) { int per = rows >= 32768 ? 64 : 16; return (rows + per - 1) / per; }
static const int GEMM_SMEM = (GBN + GBM) * GLD * 2;

static void testCodec(int ci) {
  const Codec& c = codecs[ci];
  const Kset& K = ksets[ci];
  char buf[128];
  const int rows = 300, cols = 1024;  // rows not a multiple of the tile
  Weight W = makeWeight(c, rows, cols), W2 = makeWeight(c, rows, cols);
  // embed
  {
    std::vector<int> ids = {5, 0, 299, 17};
    int* dids = upload(ids);
    float* out; CUDA(cudaMalloc(&out, 4 * cols * 4));
    K.embed<<<4, 128>>>(out, W.dev, dids, 4, cols, W.rb, 0.5f);
    auto got = download(out, 4 * cols);
    std::vector<double> ref(4 * cols);
    for (int t = 0; t < 4; t++) for (int k = 0; k < cols; k++) ref[t * cols + k] = 0.5 * W.deq[(size_t)ids[t] * cols + k];
    snprintf(buf, sizeof buf, "embed %s", c.name); check(buf, maxrel1(got, ref), 1e-6);
    cudaFree(out); cudaFree(dids);
  }
  const int N = 5;
  auto x = randv((size_t)N * cols), r = randv((size_t)N * rows);
  float *dx = upload(x), *dr = upload(r), *dy;
  CUDA(cudaMalloc(&dy, (size_t)N * rows * 4 * 70));
  auto refDot = [&](const Weight& w, int row, const float* xx, double& scale) {
    double a = 0; scale = 0;
    for (int k = 0; k < cols; k++) { double p = (double)w.deq[(size_t)row * cols + k] * xx[k]; a += p; scale += std::fabs(p); }
    return a;
  };
  // exact matvec: plus residual, GLU, fused RMSNorm of x
  auto nwv = randv(cols);
  float* dnw = upload(nwv);
  std::vector<float> xn(cols);
  {
    double ss = 0;
    for (int k = 0; k < cols; k++) ss += (double)x[k] * x[k];
    float inv = (float)(1 / std::sqrt(ss / cols + 1e-5));
    for (int k = 0; k < cols; k++) xn[k] = x[k] * inv * nwv[k];
  }
  for (int mode = 0; mode < 3; mode++) {
    const bool glu = mode == 1, norm = mode == 2;
    K.mv<<<(rows + 7) / 8, 128>>>(dy, W.dev, glu ? W2.dev : nullptr, dx, glu ? nullptr : dr, rows, cols, W.rb, 0,
                                   norm ? dnw : nullptr, 1e-5f, 0);
    auto got = download(dy, rows);
    std::vector<double> ref(rows), sc(rows);
    const float* xx = norm ? xn.data() : x.data();
    for (int i = 0; i < rows; i++) {
      double s1, s2, a = refDot(W, i, xx, s1);
      if (glu) { double b = refDot(W2, i, xx, s2); double g = a / (1 + std::exp(-a)); ref[i] = g * b; sc[i] = std::fabs(b) * s1 + std::fabs(g) * s2; }
      else { ref[i] = a + r[i]; sc[i] = s1 + std::fabs(r[i]); }
    }
    snprintf(buf, sizeof buf, "mv %s%s", c.name, glu ? " glu" : norm ? " norm +r" : " +r"); check(buf, maxrel(got, ref, sc), 1e-4);
  }
  // batched
  {
    K.mvb<<<(rows + 3) / 4, 128>>>(dy, W.dev, nullptr, dx, dr, rows, cols, W.rb, 0, N);
    auto got = download(dy, (size_t)N * rows);
    std::vector<double> ref((size_t)N * rows), sc((size_t)N * rows);
    for (int j = 0; j < N; j++) for (int i = 0; i < rows; i++) {
      double s; ref[j * rows + i] = refDot(W, i, &x[(size_t)j * cols], s) + r[j * rows + i]; sc[j * rows + i] = s + std::fabs(r[j * rows + i]);
    }
    snprintf(buf, sizeof buf, "mvb %s n=%d", c.name, N); check(buf, maxrel(got, ref, sc), 1e-4);
  }
  // int8 activations (also with the fused norm)
  if (K.mvq) {
    for (int mode = 0; mode < 3; mode++) {
      const bool glu = mode == 1, norm = mode == 2;
      const float* xx = norm ? xn.data() : x.data();
      std::vector<int8_t> q; std::vector<float> qd, qs;
      quantX(xx, cols, q, qd, qs);
      K.mvq<<<mvqBlocks(rows), 512, mvqShared(cols)>>>(dy, W.dev, glu ? W2.dev : nullptr, dx, glu ? nullptr : dr, rows, cols, W.rb, 0,
                                                         norm ? dnw : nullptr, 1e-5f, 0);
      auto got = download(dy, rows);
      std::vector<double> ref(rows), sc(rows), ex(rows);
      for (int i = 0; i < rows; i++) {
        double s1, s2, e = refDot(W, i, xx, s1), a = dotQ(&W.deq[(size_t)i * cols], q, qd, cols);
        if (glu) {
          double e2 = refDot(W2, i, xx, s2), b = dotQ(&W2.deq[(size_t)i * cols], q, qd, cols);
          double g = a / (1 + std::exp(-a)); ref[i] = g * b; sc[i] = std::fabs(b) * s1 + std::fabs(g) * s2;
          ex[i] = e / (1 + std::exp(-e)) * e2;
        } else { ref[i] = a + r[i]; sc[i] = s1 + std::fabs(r[i]); ex[i] = e + r[i]; }
      }
      const char* tag = glu ? " glu" : norm ? " norm +r" : " +r";
      snprintf(buf, sizeof buf, "mvq %s%s (vs int8 ref)", c.name, tag); check(buf, maxrel(got, ref, sc), 1e-4);
      printf("    mvq %s%s distance from exact: %.3g of sum|w*x|\n", c.name, tag, maxrel(got, ex, sc));
    }
  }
  cudaFree(dnw);
  // An lm-head-sized row count (4 rows per warp in ck_mvq_*), then a row
  // of 8192 columns (a down projection: 8 chunks a step).
  for (int wide = 0; wide < 2 && K.mvq; wide++) {
    const int R2 = wide ? 300 : 32768 + 37, C2 = wide ? 8192 : 256;
    Weight B = makeWeight(c, R2, C2);
    auto x2 = randv(C2);
    float *dx2 = upload(x2), *dy2;
    CUDA(cudaMalloc(&dy2, (size_t)R2 * 4));
    std::vector<int8_t> q; std::vector<float> qd, qs;
    quantX(x2.data(), C2, q, qd, qs);
    K.mvq<<<mvqBlocks(R2), 512, mvqShared(C2)>>>(dy2, B.dev, nullptr, dx2, nullptr, R2, C2, B.rb, 0, nullptr, 0.f, 0);
    auto got = download(dy2, R2);
    std::vector<double> ref(R2), sc(R2);
    for (int i = 0; i < R2; i++) {
      ref[i] = dotQ(&B.deq[(size_t)i * C2], q, qd, C2);
      double a = 0; for (int k = 0; k < C2; k++) a += std::fabs((double)B.deq[(size_t)i * C2 + k] * x2[k]);
      sc[i] = a;
    }
    snprintf(buf, sizeof buf, "mvq %s rows=%d cols=%d%s", c.name, R2, C2, wide ? "" : " (4 rows/warp)");
    check(buf, maxrel(got, ref, sc), 1e-4);
    cudaFree(dx2); cudaFree(dy2); cudaFree(B.dev);
  }
  // gemm: T tokens not a multiple of the tile
  {
    const int T = 77;
    auto X = randv((size_t)T * cols);
    float* dX = upload(X);
    auto R = randv((size_t)T * rows);
    float* dR = upload(R);
    dim3 grid((rows + GBN - 1) / GBN, (T + GBM - 1) / GBM);
    cudaFuncSetAttribute(K.gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, GEMM_SMEM);
    K.gemm<<<grid, 256, GEMM_SMEM>>>(dy, W.dev, dX, dR, rows, cols, W.rb, T);
    auto got = download(dy, (size_t)T * rows);
    std::vector<double> ref((size_t)T * rows), sc((size_t)T * rows), ex((size_t)T * rows);
    for (int t = 0; t < T; t++) for (int i = 0; i < rows; i++) {
      double a = 0, e = 0, s = 0;
      for (int k = 0; k < cols; k++) {
        float w = W.deq[(size_t)i * cols + k], xx = X[(size_t)t * cols + k];
        a += (double)hround(w) * hround(xx); e += (double)w * xx; s += std::fabs((double)w * xx);
      }
      size_t o = (size_t)t * rows + i;
      ref[o] = a + R[o]; ex[o] = e + R[o]; sc[o] = s + std::fabs(R[o]);
    }
    snprintf(buf, sizeof buf, "gemm %s T=%d (vs f16-rounded ref)", c.name, T); check(buf, maxrel(got, ref, sc), 1e-4);
    printf("    gemm %s distance from exact: %.3g of sum|w*x|\n", c.name, maxrel(got, ex, sc));
    // int8 GEMM: X quantized per 32 (ck_quant_q8), both tile heights, +R;
    // against the same int8 arithmetic on the CPU.
    if (K.mmq) {
      int8_t* dq; float2* dds;
      CUDA(cudaMalloc(&dq, (size_t)T * cols)); CUDA(cudaMalloc(&dds, (size_t)T * cols / 32 * 8));
      quantQ8(dq, dds, dX, nullptr, T, cols, 0);
      std::vector<int8_t> hq((size_t)T * cols); std::vector<float2> hds((size_t)T * cols / 32);
      CUDA(cudaMemcpy(hq.data(), dq, hq.size(), cudaMemcpyDeviceToHost));
      CUDA(cudaMemcpy(hds.data(), dds, hds.size() * 8, cudaMemcpyDeviceToHost));
      double qerr = 0;
      std::vector<std::vector<int8_t>> q(T); std::vector<std::vector<float>> qd(T), qs(T);
      for (int t = 0; t < T; t++) {
        quantX(&X[(size_t)t * cols], cols, q[t], qd[t], qs[t]);
        for (int k = 0; k < cols; k++) qerr = std::max(qerr, (double)std::abs(q[t][k] - hq[(size_t)t * cols + k]));
        for (int b = 0; b < cols / 32; b++) {
          const float2 v = hds[(size_t)t * cols / 32 + b];
          qerr = std::max(qerr, std::fabs(v.x - qd[t][b]) / (qd[t][b] + 1e-30) + std::fabs(v.y - qs[t][b]) / (std::fabs(qs[t][b]) + qd[t][b]));
        }
      }
      snprintf(buf, sizeof buf, "quant_q8 %s T=%d (vs CPU quantX)", c.name, T); check(buf, qerr, 1e-6);
      for (int small = 0; small < 2; small++) {
        CUDA(cudaMemset(dy, 0, (size_t)T * rows * 4));
        mmq(K, small, dy, W.dev, dq, dds, dR, rows, cols, W.rb, T);
        CUDA(cudaGetLastError());
        auto got = download(dy, (size_t)T * rows);
        std::vector<double> ref((size_t)T * rows);
        for (int t = 0; t < T; t++) for (int i = 0; i < rows; i++) {
          size_t o = (size_t)t * rows + i;
          ref[o] = dotQ(&W.deq[(size_t)i * cols], q[t], qd[t], cols) + R[o];
        }
        snprintf(buf, sizeof buf, "mmq%s %s T=%d +r (vs int8 ref)", small ? "s" : "", c.name, T); check(buf, maxrel(got, ref, sc), 1e-4);
        printf("    mmq%s %s distance from exact: %.3g of sum|w*x|\n", small ? "s" : "", c.name, maxrel(got, ex, sc));
      }
      // The GLU's product quantized in one pass: act(G)·U.
      auto G = randv((size_t)T * cols);
      float* dG = upload(G);
      quantQ8(dq, dds, dG, dX, T, cols, 0);
      CUDA(cudaMemcpy(hq.data(), dq, hq.size(), cudaMemcpyDeviceToHost));
      CUDA(cudaMemcpy(hds.data(), dds, hds.size() * 8, cudaMemcpyDeviceToHost));
      qerr = 0;
      std::vector<float> prod(cols);
      for (int t = 0; t < T; t++) {
        for (int k = 0; k < cols; k++) { float gg = G[(size_t)t * cols + k]; prod[k] = gg / (1.0f + expf(-gg)) * X[(size_t)t * cols + k]; }
        std::vector<int8_t> q1; std::vector<float> d1, s1;
        quantX(prod.data(), cols, q1, d1, s1);
        for (int k = 0; k < cols; k++) qerr = std::max(qerr, (double)std::abs(q1[k] - hq[(size_t)t * cols + k]));
        for (int b = 0; b < cols / 32; b++) qerr = std::max(qerr, std::fabs(hds[(size_t)t * cols / 32 + b].x - d1[b]) / (d1[b] + 1e-30));
      }
      // A GLU product at a rounding boundary may land one step apart (expf vs __expf).
      snprintf(buf, sizeof buf, "quant_q8 act·u %s T=%d (max |Δq|, ≤1)", c.name, T); check(buf, qerr, 1.0 + 1e-3);
      cudaFree(dG); cudaFree(dq); cudaFree(dds);
    }
    cudaFree(dX); cudaFree(dR);
  }
  cudaFree(dx); cudaFree(dr); cudaFree(dy); cudaFree(W.dev); cudaFree(W2.dev);
}

static void testElementwise() {
  const int rows = 3, dim = 2048;
  auto x = randv(rows * dim), w = randv(dim), dlt = randv(rows * dim);
  float *dx = upload(x), *dw = upload(w), *dd = upload(dlt), *out;
  CUDA(cudaMalloc(&out, rows * dim * 4));
  for (int plus = 0; plus < 2; plus++) {
    ck_rmsnorm<<<rows, 256>>>(out, dx, dw, rows, dim, 1e-5f, plus);
    auto got = download(out, rows * dim);
    std::vector<double> ref(rows * dim);
    for (int r = 0; r < rows; r++) {
      double ss = 0; for (int i = 0; i < dim; i++) ss += (double)x[r * dim + i] * x[r * dim + i];
      float inv = (float)(1 / std::sqrt(ss / dim + 1e-5));
      for (int i = 0; i < dim; i++) ref[r * dim + i] = x[r * dim + i] * inv * (plus ? 1 + w[i] : w[i]);
    }
    check(plus ? "rmsnorm plusOne" : "rmsnorm", maxrel1(got, ref), 1e-6);
  }
  {
    float* dres = upload(x);
    ck_add_rmsnorm<<<rows, 256>>>(dres, dd, out, dw, rows, dim, 1e-6f, 0, 0.5f);
    auto got = download(out, rows * dim), res = download(dres, rows * dim);
    std::vector<double> ref(rows * dim), rres(rows * dim);
    for (int r = 0; r < rows; r++) {
      double ss = 0;
      for (int i = 0; i < dim; i++) { float v = x[r * dim + i] + 0.5f * dlt[r * dim + i]; rres[r * dim + i] = v; ss += (double)v * v; }
      float inv = (float)(1 / std::sqrt(ss / dim + 1e-6));
      for (int i = 0; i < dim; i++) ref[r * dim + i] = (float)rres[r * dim + i] * inv * w[i];
    }
    check("add_rmsnorm (resid)", maxrel1(res, rres), 1e-7);
    check("add_rmsnorm (out)", maxrel1(got, ref), 1e-6);
    ck_add<<<(rows * dim + 1023) / 1024, 256>>>(out, dx, dd, rows * dim, -2.f);
    got = download(out, rows * dim);
    for (int i = 0; i < rows * dim; i++) ref[i] = x[i] + -2.f * dlt[i];
    check("add", maxrel1(got, ref), 1e-7);
    cudaFree(dres);
  }
  // act_mul
  for (int act = 0; act < 2; act++) {
    const int T = 3, n = 1000;
    auto g = randv(T * 2 * n, 4.f);
    float* dg = upload(g);
    ck_act_mul<<<dim3((n + 255) / 256, T), 256>>>(out, dg, dg + n, T, n, 2 * n, 2 * n, act);
    auto got = download(out, T * n);
    std::vector<double> ref(T * n);
    for (int t = 0; t < T; t++) for (int i = 0; i < n; i++) {
      double v = g[t * 2 * n + i], u = g[t * 2 * n + n + i];
      double a = act ? v / (1 + std::exp(-1.5957691216057308 * (v + 0.044715 * v * v * v))) : v / (1 + std::exp(-v));
      ref[t * n + i] = a * u;
    }
    check(act ? "act_mul gelu_tanh" : "act_mul silu", maxrel1(got, ref), 1e-5);
    cudaFree(dg);
  }
  // rope: NeoX and interleaved, partial rotary
  for (int neox = 0; neox < 2; neox++) {
    const int T = 5, heads = 4, hd = 64, rot = neox ? 32 : 64;
    auto v = randv(T * heads * hd);
    std::vector<float> inv(rot / 2);
    for (int i = 0; i < rot / 2; i++) inv[i] = (float)std::pow(500000.0, -2.0 * i / rot);
    std::vector<int> st = {1000, 0, 0, 0};
    float *dv = upload(v), *dinv = upload(inv);
    int* dst = upload(st);
    ck_rope<<<dim3(T, heads), 64>>>(dv, dst, dinv, T, heads, hd, rot, neox, 1.f);
    auto got = download(dv, T * heads * hd);
    std::vector<double> ref(v.begin(), v.end());
    for (int t = 0; t < T; t++) for (int h = 0; h < heads; h++) for (int i = 0; i < rot / 2; i++) {
      float a = (float)(1000 + t) * inv[i];
      double cs = (float)std::cos((double)a), sn = (float)std::sin((double)a);
      int i0 = neox ? i : 2 * i, i1 = neox ? i + rot / 2 : 2 * i + 1;
      size_t b = ((size_t)t * heads + h) * hd;
      double x0 = v[b + i0], x1 = v[b + i1];
      ref[b + i0] = x0 * cs - x1 * sn; ref[b + i1] = x1 * cs + x0 * sn;
    }
    check(neox ? "rope neox partial" : "rope interleaved", maxrel1(got, ref), 1e-6);
    cudaFree(dv); cudaFree(dinv); cudaFree(dst);
  }
  // rope_kv against rope + kv_write (fused qkv rows, partial rotary, f16 cache)
  for (int f16 = 0; f16 < 2; f16++) {
    const int T = 3, heads = 4, kvh = 2, hd = 64, rot = 32, ring = 8, stride = (heads + 2 * kvh) * hd, kvDim = kvh * hd;
    auto v = randv((size_t)T * stride);
    std::vector<float> inv(rot / 2);
    for (int i = 0; i < rot / 2; i++) inv[i] = (float)std::pow(10000.0, -2.0 * i / rot);
    std::vector<int> st = {6, 0, 0, 0};
    float *dv = upload(v), *dinv = upload(inv);
    int* dst = upload(st);
    void *kc, *vc;
    size_t es = f16 ? 2 : 4;
    CUDA(cudaMalloc(&kc, ring * kvDim * es)); CUDA(cudaMalloc(&vc, ring * kvDim * es));
    CUDA(cudaMemset(kc, 0, ring * kvDim * es)); CUDA(cudaMemset(vc, 0, ring * kvDim * es));
    if (f16) ck_rope_kv_f16<<<dim3(T, heads + kvh), 64>>>(dv, dv + heads * hd, dv + heads * hd + kvDim, (__half*)kc, (__half*)vc, dst, dinv, T, heads, kvh, hd, rot, 1, 1.f, stride, stride, ring);
    else ck_rope_kv_f32<<<dim3(T, heads + kvh), 64>>>(dv, dv + heads * hd, dv + heads * hd + kvDim, (float*)kc, (float*)vc, dst, dinv, T, heads, kvh, hd, rot, 1, 1.f, stride, stride, ring);
    auto gq = download(dv, (size_t)T * stride);
    std::vector<float> gk(ring * kvDim), gv(ring * kvDim);
    if (f16) {
      auto a = download((__half*)kc, ring * kvDim), b = download((__half*)vc, ring * kvDim);
      for (int i = 0; i < ring * kvDim; i++) { gk[i] = __half2float(a[i]); gv[i] = __half2float(b[i]); }
    } else { gk = download((float*)kc, ring * kvDim); gv = download((float*)vc, ring * kvDim); }
    double e = 0;
    for (int t = 0; t < T; t++) {
      int pos = 6 + t;
      auto rot1 = [&](const float* src, float* dst_) {
        for (int d = 0; d < hd; d++) dst_[d] = src[d];
        for (int i = 0; i < rot / 2; i++) {
          float a = (float)pos * inv[i];
          float cs = (float)std::cos((double)a), sn = (float)std::sin((double)a);
          float x0 = src[i], x1 = src[i + rot / 2];
          dst_[i] = x0 * cs - x1 * sn; dst_[i + rot / 2] = x1 * cs + x0 * sn;
        }
      };
      float tmp[64];
      for (int h = 0; h < heads + kvh; h++) {
        const float* src = &v[(size_t)t * stride + h * hd];
        rot1(src, tmp);
        for (int d = 0; d < hd; d++) {
          double want = f16 && h >= heads ? hround(tmp[d]) : tmp[d];
          double got = h < heads ? gq[(size_t)t * stride + h * hd + d] : gk[(pos % ring) * kvDim + (h - heads) * hd + d];
          e = std::max(e, std::fabs(got - want));
        }
      }
      for (int d = 0; d < kvDim; d++) {
        double want = v[(size_t)t * stride + heads * hd + kvDim + d];
        if (f16) want = hround((float)want);
        e = std::max(e, std::fabs(gv[(pos % ring) * kvDim + d] - want));
      }
    }
    check(f16 ? "rope_kv f16 cache (ring wrap)" : "rope_kv f32 cache (ring wrap)", e, f16 ? 1e-3 : 1e-6);
    cudaFree(dv); cudaFree(dinv); cudaFree(dst); cudaFree(kc); cudaFree(vc);
  }
  // argmax
  {
    const int T = 3, V = 128256;
    auto l = randv((size_t)T * V);
    l[5] = 7; l[77] = 7;  // tie: lowest id
    l[V + 128255] = 9;
    l[2 * V + 4000] = 3; l[2 * V + 90000] = 3;
    float* dl = upload(l);
    int* dids; CUDA(cudaMalloc(&dids, T * 4));
    ck_argmax_rows<<<T, 1024>>>(dids, dl, T, V);
    auto ids = download(dids, T);
    bool ok = ids[0] == 5 && ids[1] == 128255 && ids[2] == 4000;
    check("argmax_rows", ok ? 0 : 1, 0);
    std::vector<int> st = {10, 0, 3, 0};
    int* dst = upload(st);
    int* dh; CUDA(cudaMalloc(&dh, 4 * 4));
    ck_argmax_step<<<1, 1024>>>(dl + V, V, dst, dh, 4);
    ck_advance<<<1, 1>>>(dst, 5);
    auto s2 = download(dst, 4);
    auto h = download(dh, 4);
    ok = s2[0] == 16 && s2[1] == 128255 && s2[2] == 4 && h[3] == 128255;
    check("argmax_step + advance", ok ? 0 : 1, 0);
    cudaFree(dl); cudaFree(dids); cudaFree(dst); cudaFree(dh);
  }
  cudaFree(dx); cudaFree(dw); cudaFree(dd); cudaFree(out);
}

// CPU attention of the token at position P over cache rows, head h.
static void refAttn(const std::vector<float>& q, const std::vector<float>& K, const std::vector<float>& V, int P,
                    int t, int heads, int kvHeads, int hd, int ring, int window, float scale, float softcap,
                    const float* sinks, std::vector<double>& out) {
  int G = heads / kvHeads, kvDim = kvHeads * hd;
  int first = window > 0 ? std::max(0, P - window + 1) : 0;
  for (int h = 0; h < heads; h++) {
    int g = h / G;
    std::vector<double> s(P - first + 1);
    double m = -1e300;
    for (int p = first; p <= P; p++) {
      double a = 0;
      for (int d = 0; d < hd; d++) a += (double)q[((size_t)t * heads + h) * hd + d] * K[(size_t)(p % ring) * kvDim + g * hd + d];
      a *= scale;
      if (softcap > 0) a = std::tanh(a / softcap) * softcap;
      s[p - first] = a; m = std::max(m, a);
    }
    if (sinks) m = std::max(m, (double)sinks[h]);
    double L = 0;
    for (auto& v : s) { v = std::exp(v - m); L += v; }
    if (sinks) L += std::exp(sinks[h] - m);
    for (int d = 0; d < hd; d++) {
      double o = 0;
      for (int p = first; p <= P; p++) o += s[p - first] * V[(size_t)(p % ring) * kvDim + g * hd + d];
      out[((size_t)t * heads + h) * hd + d] = o / L;
    }
  }
}

// ck_flash_prefill_* as abi.go's FlashName/LaunchFlash launch it.
static void flashPrefill(bool f16, int hd, float* out, const float* q, const void* K, const void* V, const int* st, int T, int heads,
                         int kvh, int ring, int window, float scale, float softcap, const float* sinks, int qStride, cudaStream_t s = 0) {
  const dim3 grid((T + 63) / 64, heads);
  const size_t sh = 2 * 64 * (hd + 8) * 2 + 2 * 64 * hd * 4;
  if (f16) {
    auto k = hd == 64 ? ck_flash_prefill_f16_64 : ck_flash_prefill_f16_128;
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh);
    k<<<grid, 128, sh, s>>>(out, q, (const __half*)K, (const __half*)V, st, T, heads, kvh, hd, ring, window, scale, softcap, sinks, qStride);
  } else {
    auto k = hd == 64 ? ck_flash_prefill_f32_64 : ck_flash_prefill_f32_128;
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh);
    k<<<grid, 128, sh, s>>>(out, q, (const float*)K, (const float*)V, st, T, heads, kvh, hd, ring, window, scale, softcap, sinks, qStride);
  }
}
static size_t faShared(int hd) {
  int ld = hd + 8, pld = 72;
  return 2 * (4 * 64 * ld) + 4 * (4 * 16 * 64) + 2 * (2 * 4 * 16 * pld) + 4 * (4 * 16 * hd) + 4 * 2 * 64;
}

// ck_attn_dec1_* (one pass, the combine fused) for head dims 64/128 and
// heads/kvHeads <= 8: the kernel the backend picks (kernels.Dec1Name).
static bool dec1OK(int heads, int kvh, int hd, int nsplit) {
  return (hd == 64 || hd == 128 || (hd == 16 && heads / kvh <= 4)) && heads / kvh <= 8 && nsplit <= 64;
}
static void dec1(bool f16, float* out, float* po, float* pml, unsigned* done, const float* q, void* K, void* V,
                 const int* st, const float* sinks, int T, int heads, int kvh, int hd, int ring, int window,
                 float scale, float softcap, int nsplit, int qStride, cudaStream_t s = 0,
                 const float* kNew = nullptr, const float* vNew = nullptr, const float* invFreq = nullptr,
                 int rotDims = 0, int neox = 0, float mscale = 1.f) {
  dim3 grid(kvh, nsplit, T);
  bool g8 = heads / kvh > 4;
#define DEC1(name, TT) ck_attn_dec1_##name<<<grid, 128, 0, s>>>(out, po, pml, done, q, (TT*)K, (TT*)V, st, sinks, T, heads, kvh, ring, window, scale, softcap, nsplit, qStride, kNew, vNew, invFreq, rotDims, neox, mscale)
  if (f16) {
    if (hd == 16) DEC1(f16_16_4, __half);
    else if (hd == 64) { if (g8) DEC1(f16_64_8, __half); else DEC1(f16_64_4, __half); }
    else { if (g8) DEC1(f16_128_8, __half); else DEC1(f16_128_4, __half); }
  } else {
    if (hd == 16) DEC1(f32_16_4, float);
    else if (hd == 64) { if (g8) DEC1(f32_64_8, float); else DEC1(f32_64_4, float); }
    else { if (g8) DEC1(f32_128_8, float); else DEC1(f32_128_4, float); }
  }
#undef DEC1
}

static void testAttention() {
  struct Case { int heads, kvHeads, hd, ring, window, P0, T; float softcap; bool sinks, f16; };
  const Case cases[] = {
      {32, 8, 64, 4096, 0, 1500, 1, 0, false, false},  {32, 8, 64, 4096, 0, 0, 1, 0, false, false},
      {16, 2, 128, 600, 512, 1000, 1, 30, true, false}, {8, 8, 256, 300, 0, 200, 1, 0, false, true},
      {32, 8, 64, 4096, 0, 1000, 4, 0, false, false},   {14, 2, 64, 2048, 0, 300, 1, 0, false, true},
      {32, 8, 64, 4096, 0, 2047, 1, 0, false, true},    {32, 8, 128, 4096, 0, 777, 1, 0, true, true},
      {32, 8, 64, 4096, 0, 3, 1, 0, false, false},      {28, 4, 128, 4096, 0, 2100, 2, 0, false, false},
      {4, 2, 16, 512, 0, 300, 1, 0, false, false},       {4, 2, 32, 512, 0, 300, 3, 50, false, true},
      {6, 1, 32, 256, 8, 300, 1, 0, false, false},
  };
  char buf[160];
  for (const Case& cs : cases) {
    int kvDim = cs.kvHeads * cs.hd, P1 = cs.P0 + cs.T;  // positions [0, P1) written
    std::vector<float> K((size_t)cs.ring * kvDim), V((size_t)cs.ring * kvDim);
    auto q = randv((size_t)cs.T * cs.heads * cs.hd);
    auto sinks = randv(cs.heads, 2.f);
    // Write positions through the kernel, [max(0, P1-ring), P1).
    int p0 = std::max(0, P1 - cs.ring), n = P1 - p0;
    auto kk = randv((size_t)n * kvDim, 2.f), vv = randv((size_t)n * kvDim);
    for (int i = 0; i < n; i++) for (int d = 0; d < kvDim; d++) {
      size_t o = (size_t)((p0 + i) % cs.ring) * kvDim + d;
      K[o] = cs.f16 ? hround(kk[(size_t)i * kvDim + d]) : kk[(size_t)i * kvDim + d];
      V[o] = cs.f16 ? hround(vv[(size_t)i * kvDim + d]) : vv[(size_t)i * kvDim + d];
    }
    size_t es = cs.f16 ? 2 : 4;
    void *dK, *dV;
    CUDA(cudaMalloc(&dK, (size_t)cs.ring * kvDim * es)); CUDA(cudaMalloc(&dV, (size_t)cs.ring * kvDim * es));
    float *dk = upload(kk), *dv = upload(vv), *dq = upload(q), *dsink = upload(sinks);
    std::vector<int> st = {p0, 0, 0, 0}, st2 = {cs.P0, 0, 0, 0};
    int *dst = upload(st), *dst2 = upload(st2);
    if (cs.f16) ck_kv_write_f16<<<n, 256>>>((__half*)dK, (__half*)dV, dk, dv, dst, n, kvDim, cs.ring);
    else ck_kv_write_f32<<<n, 256>>>((float*)dK, (float*)dV, dk, dv, dst, n, kvDim, cs.ring);
    if (cs.f16) {  // the f16 write rounds as hround
      auto kh = download((__half*)dK, (size_t)cs.ring * kvDim);
      double e = 0;
      for (size_t i = 0; i < kh.size(); i++) if (K[i] != 0) e = std::max(e, (double)std::fabs(__half2float(kh[i]) - K[i]));
      check("kv_write_f16", e, 0);
    } else {
      auto kf = download((float*)dK, (size_t)cs.ring * kvDim);
      double e = 0;
      for (size_t i = 0; i < kf.size(); i++) if (K[i] != 0) e = std::max(e, (double)std::fabs(kf[i] - K[i]));
      check("kv_write_f32", e, 0);
    }
    std::vector<double> ref((size_t)cs.T * cs.heads * cs.hd);
    for (int t = 0; t < cs.T; t++)
      refAttn(q, K, V, cs.P0 + t, t, cs.heads, cs.kvHeads, cs.hd, cs.ring, cs.window, 0.125f, cs.softcap,
              cs.sinks ? sinks.data() : nullptr, ref);
    const float* ds = cs.sinks ? dsink : nullptr;
    // decode
    int nsplit = std::min(64, std::max(1, (2 * 132 + cs.kvHeads - 1) / cs.kvHeads));
    int G = cs.heads / cs.kvHeads, kt = cs.hd > 128 ? 16 : 32;
    size_t sh = 4 * (kt * (cs.hd + 1) + kt * cs.hd + G * cs.hd + G * kt + 3 * G);
    float *po, *pml, *out;
    CUDA(cudaMalloc(&po, (size_t)cs.T * cs.heads * nsplit * cs.hd * 4));
    CUDA(cudaMalloc(&pml, (size_t)cs.T * cs.heads * nsplit * 8));
    CUDA(cudaMalloc(&out, (size_t)cs.T * cs.heads * cs.hd * 4));
    if (cs.f16) ck_attn_decode_f16<<<dim3(cs.kvHeads, nsplit, cs.T), 128, sh>>>(po, pml, dq, (__half*)dK, (__half*)dV, dst2, cs.T, cs.heads, cs.kvHeads, cs.hd, cs.ring, cs.window, 0.125f, cs.softcap, nsplit, 0);
    else ck_attn_decode_f32<<<dim3(cs.kvHeads, nsplit, cs.T), 128, sh>>>(po, pml, dq, (float*)dK, (float*)dV, dst2, cs.T, cs.heads, cs.kvHeads, cs.hd, cs.ring, cs.window, 0.125f, cs.softcap, nsplit, 0);
    ck_attn_combine<<<dim3(cs.heads, cs.T), cs.hd>>>(out, po, pml, ds, cs.T, cs.heads, cs.hd, nsplit);
    auto got = download(out, ref.size());
    snprintf(buf, sizeof buf, "attn_decode %s h%d/%d hd%d P%d T%d w%d cap%g%s", cs.f16 ? "f16" : "f32", cs.heads,
             cs.kvHeads, cs.hd, cs.P0, cs.T, cs.window, cs.softcap, cs.sinks ? " sinks" : "");
    check(buf, maxrel1(got, ref), 1e-4);
    if (dec1OK(cs.heads, cs.kvHeads, cs.hd, nsplit)) {
      unsigned* done;
      CUDA(cudaMalloc(&done, (size_t)cs.T * cs.kvHeads * 4));
      CUDA(cudaMemset(done, 0, (size_t)cs.T * cs.kvHeads * 4));
      for (int rep = 0; rep < 3; rep++) {  // the counters must come back to zero
        CUDA(cudaMemset(out, 0, ref.size() * 4));
        dec1(cs.f16, out, po, pml, done, dq, dK, dV, dst2, ds, cs.T, cs.heads, cs.kvHeads, cs.hd, cs.ring, cs.window,
             0.125f, cs.softcap, nsplit, 0);
        got = download(out, ref.size());
        snprintf(buf, sizeof buf, "attn_dec1 %s h%d/%d hd%d P%d T%d w%d cap%g%s #%d", cs.f16 ? "f16" : "f32", cs.heads,
                 cs.kvHeads, cs.hd, cs.P0, cs.T, cs.window, cs.softcap, cs.sinks ? " sinks" : "", rep);
        check(buf, maxrel1(got, ref), 1e-4);
      }
      for (int sp : {1, 7, 64}) {  // other split counts
        CUDA(cudaMemset(out, 0, ref.size() * 4));
        dec1(cs.f16, out, po, pml, done, dq, dK, dV, dst2, ds, cs.T, cs.heads, cs.kvHeads, cs.hd, cs.ring, cs.window,
             0.125f, cs.softcap, std::min(sp, nsplit), 0);
        got = download(out, ref.size());
        snprintf(buf, sizeof buf, "attn_dec1 %s h%d/%d hd%d P%d T%d nsplit %d", cs.f16 ? "f16" : "f32", cs.heads,
                 cs.kvHeads, cs.hd, cs.P0, cs.T, std::min(sp, nsplit));
        check(buf, maxrel1(got, ref), 1e-4);
      }
      if (cs.T == 1) {  // RoPE and the cache write fused: against ck_rope_kv then dec1
        const size_t rowOff = (size_t)(cs.P0 % cs.ring) * kvDim * es, rowBytes = (size_t)kvDim * es;
        std::vector<uint8_t> saveK(rowBytes), saveV(rowBytes);
        CUDA(cudaMemcpy(saveK.data(), (uint8_t*)dK + rowOff, rowBytes, cudaMemcpyDeviceToHost));
        CUDA(cudaMemcpy(saveV.data(), (uint8_t*)dV + rowOff, rowBytes, cudaMemcpyDeviceToHost));
        for (int neox = 0; neox < 2; neox++) {
          const int rot = cs.hd == 16 ? 8 : cs.hd;  // partial rotary on the smallest heads
          std::vector<float> inv(rot / 2);
          for (int i = 0; i < rot / 2; i++) inv[i] = (float)std::pow(10000.0, -2.0 * i / rot);
          float* dinv = upload(inv);
          auto kn = randv(kvDim, 2.f), vn = randv(kvDim);
          float *dkn = upload(kn), *dvn = upload(vn), *dq2 = upload(q);
          for (int fused = 0; fused < 2; fused++) {
            CUDA(cudaMemcpy(dq2, q.data(), q.size() * 4, cudaMemcpyHostToDevice));
            if (!fused) {
              if (cs.f16) ck_rope_kv_f16<<<dim3(1, cs.heads + cs.kvHeads), 64>>>(dq2, dkn, dvn, (__half*)dK, (__half*)dV, dst2, dinv, 1, cs.heads, cs.kvHeads, cs.hd, rot, neox, 1.f, cs.heads * cs.hd, kvDim, cs.ring);
              else ck_rope_kv_f32<<<dim3(1, cs.heads + cs.kvHeads), 64>>>(dq2, dkn, dvn, (float*)dK, (float*)dV, dst2, dinv, 1, cs.heads, cs.kvHeads, cs.hd, rot, neox, 1.f, cs.heads * cs.hd, kvDim, cs.ring);
              dec1(cs.f16, out, po, pml, done, dq2, dK, dV, dst2, ds, 1, cs.heads, cs.kvHeads, cs.hd, cs.ring, cs.window, 0.125f, cs.softcap, nsplit, 0);
            } else {
              dec1(cs.f16, out, po, pml, done, dq2, dK, dV, dst2, ds, 1, cs.heads, cs.kvHeads, cs.hd, cs.ring, cs.window, 0.125f, cs.softcap, nsplit, 0,
                   0, dkn, dvn, dinv, rot, neox, 1.f);
            }
            auto o = download(out, ref.size());
            if (!fused) { ref.assign(o.begin(), o.end()); continue; }
            snprintf(buf, sizeof buf, "attn_dec1 + rope %s h%d/%d hd%d P%d neox %d", cs.f16 ? "f16" : "f32", cs.heads, cs.kvHeads, cs.hd, cs.P0, neox);
            check(buf, maxrel1(o, ref), 1e-5);
          }
          cudaFree(dinv); cudaFree(dkn); cudaFree(dvn); cudaFree(dq2);
        }
        CUDA(cudaMemcpy((uint8_t*)dK + rowOff, saveK.data(), rowBytes, cudaMemcpyHostToDevice));
        CUDA(cudaMemcpy((uint8_t*)dV + rowOff, saveV.data(), rowBytes, cudaMemcpyHostToDevice));
        for (int t = 0; t < cs.T; t++)  // ref held the rope runs' output: the reference again
          refAttn(q, K, V, cs.P0 + t, t, cs.heads, cs.kvHeads, cs.hd, cs.ring, cs.window, 0.125f, cs.softcap,
                  cs.sinks ? sinks.data() : nullptr, ref);
      }
      cudaFree(done);
    }
    // prefill (same queries)
    size_t psh = 4 * (32 * (cs.hd + 1) + 32 * (cs.hd + 1) + 32 * cs.hd + 32 * 33);
    CUDA(cudaMemset(out, 0, ref.size() * 4));
    if (cs.f16) {
      cudaFuncSetAttribute(ck_attn_prefill_f16, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)psh);
      ck_attn_prefill_f16<<<dim3((cs.T + 31) / 32, cs.heads), 128, psh>>>(out, dq, (__half*)dK, (__half*)dV, dst2, cs.T, cs.heads, cs.kvHeads, cs.hd, cs.ring, cs.window, 0.125f, cs.softcap, ds, 0);
    } else {
      cudaFuncSetAttribute(ck_attn_prefill_f32, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)psh);
      ck_attn_prefill_f32<<<dim3((cs.T + 31) / 32, cs.heads), 128, psh>>>(out, dq, (float*)dK, (float*)dV, dst2, cs.T, cs.heads, cs.kvHeads, cs.hd, cs.ring, cs.window, 0.125f, cs.softcap, ds, 0);
    }
    got = download(out, ref.size());
    snprintf(buf, sizeof buf, "attn_prefill %s h%d/%d hd%d P%d T%d w%d cap%g%s", cs.f16 ? "f16" : "f32", cs.heads,
             cs.kvHeads, cs.hd, cs.P0, cs.T, cs.window, cs.softcap, cs.sinks ? " sinks" : "");
    check(buf, maxrel1(got, ref), 1e-4);
    if (cs.hd == 64 || cs.hd == 128) {
      CUDA(cudaMemset(out, 0, ref.size() * 4));
      size_t fsh = faShared(cs.hd);
      if (cs.f16) {
        cudaFuncSetAttribute(ck_fa_prefill_f16, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsh);
        ck_fa_prefill_f16<<<dim3((cs.T + 63) / 64, cs.heads), 128, fsh>>>(out, dq, (__half*)dK, (__half*)dV, dst2, cs.T, cs.heads, cs.kvHeads, cs.hd, cs.ring, cs.window, 0.125f, cs.softcap, ds, 0);
      } else {
        cudaFuncSetAttribute(ck_fa_prefill_f32, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsh);
        ck_fa_prefill_f32<<<dim3((cs.T + 63) / 64, cs.heads), 128, fsh>>>(out, dq, (float*)dK, (float*)dV, dst2, cs.T, cs.heads, cs.kvHeads, cs.hd, cs.ring, cs.window, 0.125f, cs.softcap, ds, 0);
      }
      got = download(out, ref.size());
      snprintf(buf, sizeof buf, "fa_prefill %s h%d/%d hd%d P%d T%d w%d cap%g%s", cs.f16 ? "f16" : "f32", cs.heads,
               cs.kvHeads, cs.hd, cs.P0, cs.T, cs.window, cs.softcap, cs.sinks ? " sinks" : "");
      check(buf, maxrel1(got, ref), cs.f16 ? 1e-4 : 2e-3);
      // flash.cu: the same arithmetic in registers, the same tolerance.
      CUDA(cudaMemset(out, 0, ref.size() * 4));
      flashPrefill(cs.f16, cs.hd, out, dq, dK, dV, dst2, cs.T, cs.heads, cs.kvHeads, cs.ring, cs.window, 0.125f, cs.softcap, ds, 0);
      got = download(out, ref.size());
      snprintf(buf, sizeof buf, "flash_prefill %s h%d/%d hd%d P%d T%d w%d cap%g%s", cs.f16 ? "f16" : "f32", cs.heads,
               cs.kvHeads, cs.hd, cs.P0, cs.T, cs.window, cs.softcap, cs.sinks ? " sinks" : "");
      check(buf, maxrel1(got, ref), cs.f16 ? 1e-4 : 2e-3);
    }
    cudaFree(dK); cudaFree(dV); cudaFree(dk); cudaFree(dv); cudaFree(dq); cudaFree(dsink); cudaFree(dst); cudaFree(dst2);
    cudaFree(po); cudaFree(pml); cudaFree(out);
  }
  // A longer causal prefill (T=100 from P0=37) against the CPU.
  {
    const int heads = 8, kvHeads = 2, hd = 64, ring = 256, T = 100, P0 = 37, kvDim = kvHeads * hd;
    auto K = randv((size_t)ring * kvDim), V = randv((size_t)ring * kvDim), q = randv((size_t)T * heads * hd);
    float *dK = upload(K), *dV = upload(V), *dq = upload(q), *out;
    std::vector<int> st = {P0, 0, 0, 0};
    int* dst = upload(st);
    CUDA(cudaMalloc(&out, (size_t)T * heads * hd * 4));
    size_t psh = 4 * (32 * (hd + 1) + 32 * (hd + 1) + 32 * hd + 32 * 33);
    // (the cases above left the limit at their own head dim's size)
    CUDA(cudaFuncSetAttribute(ck_attn_prefill_f32, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)psh));
    ck_attn_prefill_f32<<<dim3((T + 31) / 32, heads), 128, psh>>>(out, dq, dK, dV, dst, T, heads, kvHeads, hd, ring, 0, 0.125f, 0, nullptr, 0);
    auto got = download(out, (size_t)T * heads * hd);
    std::vector<double> ref((size_t)T * heads * hd);
    for (int t = 0; t < T; t++) refAttn(q, K, V, P0 + t, t, heads, kvHeads, hd, ring, 0, 0.125f, 0, nullptr, ref);
    check("attn_prefill f32 T=100 P0=37 causal", maxrel1(got, ref), 1e-4);
    flashPrefill(false, hd, out, dq, dK, dV, dst, T, heads, kvHeads, ring, 0, 0.125f, 0, nullptr, 0);
    got = download(out, (size_t)T * heads * hd);
    check("flash_prefill f32 T=100 P0=37 causal", maxrel1(got, ref), 2e-3);
    ck_attn_prefill_f32<<<dim3((T + 31) / 32, heads), 128, psh>>>(out, dq, dK, dV, dst, T, heads, kvHeads, hd, ring, 40, 0.125f, 0, nullptr, 0);
    got = download(out, (size_t)T * heads * hd);
    for (int t = 0; t < T; t++) refAttn(q, K, V, P0 + t, t, heads, kvHeads, hd, ring, 40, 0.125f, 0, nullptr, ref);
    check("attn_prefill f32 T=100 window 40", maxrel1(got, ref), 1e-4);
    size_t fsh = faShared(hd);
    cudaFuncSetAttribute(ck_fa_prefill_f32, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsh);
    for (int w : {0, 40}) {
      ck_fa_prefill_f32<<<dim3((T + 63) / 64, heads), 128, fsh>>>(out, dq, dK, dV, dst, T, heads, kvHeads, hd, ring, w, 0.125f, 0, nullptr, 0);
      got = download(out, (size_t)T * heads * hd);
      for (int t = 0; t < T; t++) refAttn(q, K, V, P0 + t, t, heads, kvHeads, hd, ring, w, 0.125f, 0, nullptr, ref);
      check(w ? "fa_prefill f32 T=100 window 40 (f16 K/V)" : "fa_prefill f32 T=100 P0=37 causal (f16 K/V)", maxrel1(got, ref), 2e-3);
    }
    // q rows with a stride (a fused qkv buffer): same results.
    const int qs = heads * hd + 48;
    std::vector<float> q2((size_t)T * qs, 99.f);
    for (int t = 0; t < T; t++) for (int i = 0; i < heads * hd; i++) q2[(size_t)t * qs + i] = q[(size_t)t * heads * hd + i];
    float* dq2 = upload(q2);
    for (int t = 0; t < T; t++) refAttn(q, K, V, P0 + t, t, heads, kvHeads, hd, ring, 0, 0.125f, 0, nullptr, ref);
    ck_attn_prefill_f32<<<dim3((T + 31) / 32, heads), 128, psh>>>(out, dq2, dK, dV, dst, T, heads, kvHeads, hd, ring, 0, 0.125f, 0, nullptr, qs);
    got = download(out, (size_t)T * heads * hd);
    check("attn_prefill f32 qStride", maxrel1(got, ref), 1e-4);
    ck_fa_prefill_f32<<<dim3((T + 63) / 64, heads), 128, fsh>>>(out, dq2, dK, dV, dst, T, heads, kvHeads, hd, ring, 0, 0.125f, 0, nullptr, qs);
    got = download(out, (size_t)T * heads * hd);
    check("fa_prefill f32 qStride (f16 K/V)", maxrel1(got, ref), 2e-3);
    cudaFree(dq2);
    cudaFree(dK); cudaFree(dV); cudaFree(dq); cudaFree(out); cudaFree(dst);
  }
}

// ---- timing ----
static cudaEvent_t e0, e1;
template <class F>
static float timeit(F f, int reps = 50) {
  f();
  CUDA(cudaDeviceSynchronize());
  cudaEventRecord(e0);
  for (int i = 0; i < reps; i++) f();
  cudaEventRecord(e1);
  CUDA(cudaEventSynchronize(e1));
  float ms; cudaEventElapsedTime(&ms, e0, e1);
  CUDA(cudaGetLastError());
  return ms * 1000 / reps;  // µs
}

static bool mvOnly = false;  // bench(): the int8-activation matvecs only

static void bench() {
  const int H = 2048, F = 8192, V = 128256, T = 512;
  printf("\n== matvec (decode), llama-1b shapes: µs and GB/s of weight bytes ==\n");
  float *dx, *dy, *dX, *dY;
  CUDA(cudaMalloc(&dx, F * 4)); CUDA(cudaMalloc(&dy, (size_t)V * 4 * 8));
  auto xv = randv(F); CUDA(cudaMemcpy(dx, xv.data(), F * 4, cudaMemcpyHostToDevice));
  CUDA(cudaMalloc(&dX, (size_t)T * F * 4)); CUDA(cudaMalloc(&dY, (size_t)2048 * F * 4));
  auto Xv = randv((size_t)T * F); CUDA(cudaMemcpy(dX, Xv.data(), (size_t)T * F * 4, cudaMemcpyHostToDevice));
  for (int ci = 0; ci < 7; ci++) {
    const Codec& c = codecs[ci];
    const Kset& K = ksets[ci];
    if (mvOnly && !K.mvq) continue;
    struct Shape { const char* name; int rows, cols; bool glu; } shapes[] = {
        {"qkv 3072x2048", 3072, H, false}, {"gate+up 2x8192x2048", F, H, true}, {"down 2048x8192", H, F, false}, {"lm_head 128256x2048", V, H, false}};
    for (auto& s : shapes) {
      // Enough copies that the weights are far beyond L2 (60 MB).
      Weight w = makeWeight(c, s.rows, s.cols, false);
      Weight w2 = s.glu ? makeWeight(c, s.rows, s.cols, false) : Weight{};
      double bytes = (double)w.bytes() * (s.glu ? 2 : 1);
      float us = mvOnly ? 0.f : timeit([&] { K.mv<<<(s.rows + 7) / 8, 128>>>(dy, w.dev, w2.dev, dx, nullptr, s.rows, s.cols, w.rb, 0, nullptr, 0.f, 0); });
      if (!mvOnly) printf("mv  %-5s %-22s %8.2f us %7.0f GB/s\n", c.name, s.name, us, bytes / us / 1e3);
      if (K.mvq) {
        float uq = timeit([&] { K.mvq<<<mvqBlocks(s.rows), 512, mvqShared(s.cols)>>>(dy, w.dev, w2.dev, dx, nullptr, s.rows, s.cols, w.rb, 0, nullptr, 0.f, 0); });
        printf("mvq %-5s %-22s %8.2f us %7.0f GB/s\n", c.name, s.name, uq, bytes / uq / 1e3);
      }
      if (!mvOnly && std::string(s.name).rfind("qkv", 0) == 0) {
        float ub = timeit([&] { K.mvb<<<(s.rows + 3) / 4, 128>>>(dy, w.dev, nullptr, dX, nullptr, s.rows, s.cols, w.rb, 0, 8); });
        printf("mvb %-5s %-22s n=8 %8.2f us %7.0f GB/s\n", c.name, s.name, ub, bytes / ub / 1e3);
      }
      if (!mvOnly && s.rows <= F && !s.glu) {
        int rows = s.rows;
        cudaFuncSetAttribute(K.gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, GEMM_SMEM);
        dim3 grid((rows + GBN - 1) / GBN, (T + GBM - 1) / GBM);
        float ug = timeit([&] { K.gemm<<<grid, 256, GEMM_SMEM>>>(dY, w.dev, dX, nullptr, rows, s.cols, w.rb, T); }, 20);
        printf("gemm %-5s %-22s T=%d %8.2f us %7.1f TFLOP/s\n", c.name, s.name, T, ug, 2.0 * T * rows * s.cols / ug / 1e6);
        if (K.mmq) {
          int8_t* dq; float2* dds;
          CUDA(cudaMalloc(&dq, (size_t)2048 * s.cols)); CUDA(cudaMalloc(&dds, (size_t)2048 * s.cols / 32 * 8));
          CUDA(cudaMemset(dq, 1, (size_t)2048 * s.cols)); CUDA(cudaMemset(dds, 0, (size_t)2048 * s.cols / 32 * 8));
          for (int TT : {512, 2048}) {
            float uqz = timeit([&] { quantQ8(dq, dds, dX, nullptr, std::min(TT, T), s.cols, 0); }, 20);
            for (int small = 0; small < 2; small++) {
              float um = timeit([&] { mmq(K, small, dY, w.dev, dq, dds, nullptr, rows, s.cols, w.rb, TT); }, 20);
              printf("mmq%s %-5s %-22s T=%d %8.2f us %7.1f TOP/s (quant of X, T=%d: %.2f us)\n", small ? "s" : " ", c.name, s.name, TT, um,
                     2.0 * TT * rows * s.cols / um / 1e6, std::min(TT, T), uqz);
            }
          }
          cudaFree(dq); cudaFree(dds);
        }
      }
      cudaFree(w.dev); if (w2.dev) cudaFree(w2.dev);
    }
  }
  if (!mvOnly) {
    printf("\n== attention, llama-1b (32/8 heads of 64) ==\n");
    const int heads = 32, kvh = 8, hd = 64, ring = 4096, kvDim = kvh * hd;
    float *K, *Vc, *q, *po, *pml, *out;
    CUDA(cudaMalloc(&K, (size_t)ring * kvDim * 4)); CUDA(cudaMalloc(&Vc, (size_t)ring * kvDim * 4));
    CUDA(cudaMemset(K, 0, (size_t)ring * kvDim * 4)); CUDA(cudaMemset(Vc, 0, (size_t)ring * kvDim * 4));
    CUDA(cudaMalloc(&q, (size_t)T * heads * hd * 4)); CUDA(cudaMemset(q, 0, (size_t)T * heads * hd * 4));
    int nsplit = (2 * 132 + kvh - 1) / kvh;
    CUDA(cudaMalloc(&po, (size_t)heads * nsplit * hd * 4)); CUDA(cudaMalloc(&pml, (size_t)heads * nsplit * 8));
    CUDA(cudaMalloc(&out, (size_t)T * heads * hd * 4));
    for (int P : {0, 511, 2047}) {
      std::vector<int> st = {P, 0, 0, 0};
      int* dst = upload(st);
      size_t sh = 4 * (32 * 65 + 32 * 64 + 4 * 64 + 4 * 32 + 12);
      float us = timeit([&] {
        ck_attn_decode_f32<<<dim3(kvh, nsplit, 1), 128, sh>>>(po, pml, q, K, Vc, dst, 1, heads, kvh, hd, ring, 0, 0.125f, 0, nsplit, 0);
        ck_attn_combine<<<dim3(heads, 1), hd>>>(out, po, pml, nullptr, 1, heads, hd, nsplit);
      });
      printf("attn decode+combine depth %5d: %7.2f us\n", P + 1, us);
      cudaFree(dst);
    }
    for (int TT : {512, 2048}) {
      std::vector<int> st = {0, 0, 0, 0};
      int* dst = upload(st);
      size_t psh = 4 * (32 * 65 + 32 * 65 + 32 * 64 + 32 * 33);
      CUDA(cudaFuncSetAttribute(ck_attn_prefill_f32, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)psh));
      float* q2; CUDA(cudaMalloc(&q2, (size_t)TT * heads * hd * 4)); CUDA(cudaMemset(q2, 0, (size_t)TT * heads * hd * 4));
      float* o2; CUDA(cudaMalloc(&o2, (size_t)TT * heads * hd * 4));
      float us = timeit([&] {
        ck_attn_prefill_f32<<<dim3((TT + 31) / 32, heads), 128, psh>>>(o2, q2, K, Vc, dst, TT, heads, kvh, hd, ring, 0, 0.125f, 0, nullptr, 0);
      }, 3);
      double fl = 4.0 * heads * hd * (double)TT * TT / 2;
      printf("attn prefill (f32 tiles) T=%d: %8.1f us  %.1f TFLOP/s (causal)\n", TT, us, fl / us / 1e6);
      size_t fsh = faShared(hd);
      cudaFuncSetAttribute(ck_fa_prefill_f32, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsh);
      us = timeit([&] {
        ck_fa_prefill_f32<<<dim3((TT + 63) / 64, heads), 128, fsh>>>(o2, q2, K, Vc, dst, TT, heads, kvh, hd, ring, 0, 0.125f, 0, nullptr, 0);
      }, 5);
      printf("fa prefill (tensor cores) T=%d: %8.1f us  %.1f TFLOP/s (causal)\n", TT, us, fl / us / 1e6);
      us = timeit([&] { flashPrefill(false, hd, o2, q2, K, Vc, dst, TT, heads, kvh, ring, 0, 0.125f, 0, nullptr, 0); }, 5);
      printf("flash prefill (mma in registers) T=%d: %8.1f us  %.1f TFLOP/s (causal)\n", TT, us, fl / us / 1e6);
      cudaFree(dst); cudaFree(q2); cudaFree(o2);
    }
    cudaFree(K); cudaFree(Vc); cudaFree(q); cudaFree(po); cudaFree(pml); cudaFree(out);
  }
  cudaFree(dx); cudaFree(dy); cudaFree(dX); cudaFree(dY);
}

// The prefill products of llama-1b at T = 512 and 2048: the f16 wmma GEMM
// (ck_gemm_*) against the int8 mma GEMM (ck_mmq_*, ck_mmqs_*).
static void benchGemm() {
  const int H = 2048, F = 8192, TM = 2048;
  printf("\n== prefill GEMMs, llama-1b shapes ==\n");
  float *dX, *dY;
  CUDA(cudaMalloc(&dX, (size_t)TM * F * 4)); CUDA(cudaMalloc(&dY, (size_t)TM * F * 4));
  auto Xv = randv((size_t)TM * F); CUDA(cudaMemcpy(dX, Xv.data(), (size_t)TM * F * 4, cudaMemcpyHostToDevice));
  int8_t* dq; float2* dds;
  CUDA(cudaMalloc(&dq, (size_t)TM * F)); CUDA(cudaMalloc(&dds, (size_t)TM * F / 32 * 8));
  for (int ci : {4, 3, 5, 6}) {
    const Codec& c = codecs[ci];
    const Kset& K = ksets[ci];
    struct Shape { const char* name; int rows, cols; } shapes[] = {
        {"qkv 3072x2048", 3072, H}, {"o 2048x2048", H, H}, {"gate 8192x2048", F, H}, {"down 2048x8192", H, F}};
    for (auto& s : shapes) {
      Weight w = makeWeight(c, s.rows, s.cols, false);
      cudaFuncSetAttribute(K.gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, GEMM_SMEM);
      for (int T : {512, 2048}) {
        const double fl = 2.0 * T * s.rows * s.cols;
        float ug = timeit([&] { K.gemm<<<dim3((s.rows + GBN - 1) / GBN, (T + GBM - 1) / GBM), 256, GEMM_SMEM>>>(dY, w.dev, dX, nullptr, s.rows, s.cols, w.rb, T); }, 20);
        float uq = timeit([&] { quantQ8(dq, dds, dX, nullptr, T, s.cols, 0); }, 20);
        float u1 = timeit([&] { mmq(K, false, dY, w.dev, dq, dds, nullptr, s.rows, s.cols, w.rb, T); }, 20);
        float u2 = timeit([&] { mmq(K, true, dY, w.dev, dq, dds, nullptr, s.rows, s.cols, w.rb, T); }, 20);
        printf("%-5s %-15s T=%4d: wmma f16 %7.1f us %5.0f TF/s | quant %5.1f us | mmq128 %7.1f us %5.0f TOP/s | mmq64 %7.1f us %5.0f TOP/s\n",
               c.name, s.name, T, ug, fl / ug / 1e6, uq, u1, fl / u1 / 1e6, u2, fl / u2 / 1e6);
      }
      cudaFree(w.dev);
    }
  }
  cudaFree(dX); cudaFree(dY); cudaFree(dq); cudaFree(dds);
}

// Decode attention on llama-1b heads (32/8 of 64) by depth: the two-pass
// kernels (decode + combine) against ck_attn_dec1_* (one launch), f32 and
// f16 caches; plain launches back to back.
static void benchAttn() {
  printf("\n== decode attention, llama-1b (32/8 heads of 64), µs per layer ==\n");
  const int heads = 32, kvh = 8, hd = 64, ring = 8192, kvDim = kvh * hd;
  void *K, *Vc;
  float *q, *po, *pml, *out;
  unsigned* done;
  CUDA(cudaMalloc(&K, (size_t)ring * kvDim * 4)); CUDA(cudaMalloc(&Vc, (size_t)ring * kvDim * 4));
  CUDA(cudaMemset(K, 0, (size_t)ring * kvDim * 4)); CUDA(cudaMemset(Vc, 0, (size_t)ring * kvDim * 4));
  CUDA(cudaMalloc(&q, (size_t)heads * hd * 4)); CUDA(cudaMemset(q, 0, (size_t)heads * hd * 4));
  const int nsplit = (2 * 132 + kvh - 1) / kvh;
  CUDA(cudaMalloc(&po, (size_t)heads * nsplit * hd * 4)); CUDA(cudaMalloc(&pml, (size_t)heads * nsplit * 8));
  CUDA(cudaMalloc(&out, (size_t)heads * hd * 4));
  CUDA(cudaMalloc(&done, kvh * 4)); CUDA(cudaMemset(done, 0, kvh * 4));
  const size_t sh = 4 * (32 * 65 + 32 * 64 + 4 * 64 + 4 * 32 + 12);
  for (int P : {0, 511, 1023, 2047, 4095, 8191}) {
    std::vector<int> st = {P, 0, 0, 0};
    int* dst = upload(st);
    float r[4];
    for (int f16 = 0; f16 < 2; f16++) {
      r[2 * f16] = timeit([&] {
        if (f16) ck_attn_decode_f16<<<dim3(kvh, nsplit, 1), 128, sh>>>(po, pml, q, (__half*)K, (__half*)Vc, dst, 1, heads, kvh, hd, ring, 0, 0.125f, 0, nsplit, 0);
        else ck_attn_decode_f32<<<dim3(kvh, nsplit, 1), 128, sh>>>(po, pml, q, (float*)K, (float*)Vc, dst, 1, heads, kvh, hd, ring, 0, 0.125f, 0, nsplit, 0);
        ck_attn_combine<<<dim3(heads, 1), hd>>>(out, po, pml, nullptr, 1, heads, hd, nsplit);
      }, 200);
      r[2 * f16 + 1] = timeit([&] {
        dec1(f16, out, po, pml, done, q, K, Vc, dst, nullptr, 1, heads, kvh, hd, ring, 0, 0.125f, 0, nsplit, 0);
      }, 200);
    }
    printf("depth %5d: f32 two-pass %6.2f  dec1 %6.2f | f16 two-pass %6.2f  dec1 %6.2f   (KV f32 %.1f MB)\n", P + 1, r[0], r[1],
           r[2], r[3], 2.0 * (P + 1) * kvDim * 4 / 1e6);
    cudaFree(dst);
  }
  // Splits per kv head (the backend's DecodeSplits gives 33 on 132 SMs).
  float *po2, *pml2;
  CUDA(cudaMalloc(&po2, (size_t)heads * 64 * hd * 4)); CUDA(cudaMalloc(&pml2, (size_t)heads * 64 * 8));
  for (int P : {511, 2047, 8191}) {
    std::vector<int> st = {P, 0, 0, 0};
    int* dst = upload(st);
    printf("depth %5d, dec1 f32 by splits:", P + 1);
    for (int ns : {8, 16, 33, 48, 64}) {
      float us = timeit([&] { dec1(false, out, po2, pml2, done, q, K, Vc, dst, nullptr, 1, heads, kvh, hd, ring, 0, 0.125f, 0, ns, 0); }, 200);
      printf("  %d: %.2f", ns, us);
    }
    printf(" us\n");
    cudaFree(dst);
  }
  cudaFree(po2); cudaFree(pml2);
  cudaFree(K); cudaFree(Vc); cudaFree(q); cudaFree(po); cudaFree(pml); cudaFree(out); cudaFree(done);
}

// A whole llama-1b decode step (16 layers) on random weights of one codec
// (lm head and embedding q6_K as q4_K_M, else the same codec), captured as
// a CUDA graph of `steps` greedy steps, timed per token.
// runs: (depth, attention) pairs on the same weights; attention 0 = the
// two-pass kernels, 1 = ck_attn_dec1_*, 2 = ck_attn_dec1_* with the RoPE
// and cache write fused (no ck_rope_kv launch).
static void benchStep(int ci, const std::vector<std::pair<int, int>>& runs, bool int8, bool prefill = false) {
  const Codec& c = codecs[ci];
  const Kset& K = ksets[ci];
  const int H = 2048, F = 8192, V = 128256, L = 16, heads = 32, kvh = 8, hd = 64, kvDim = kvh * hd, ring = 4096;
  (void)F;
  const int qkvRows = H + 2 * kvDim;
  const int headCi = std::string(c.name) == "q4_K" ? 6 : ci;
  struct Layer { Weight qkv, wo, gate, up, down; float *attnNorm, *ffnNorm, *K, *V; };
  std::vector<Layer> layers(L);
  auto ones = std::vector<float>(H, 1.f);
  for (auto& l : layers) {
    l.qkv = makeWeight(c, qkvRows, H, false); l.wo = makeWeight(c, H, H, false);
    l.gate = makeWeight(c, F, H, false); l.up = makeWeight(c, F, H, false); l.down = makeWeight(c, H, F, false);
    l.attnNorm = upload(ones); l.ffnNorm = upload(ones);
    CUDA(cudaMalloc(&l.K, (size_t)ring * kvDim * 4)); CUDA(cudaMalloc(&l.V, (size_t)ring * kvDim * 4));
    CUDA(cudaMemset(l.K, 0, (size_t)ring * kvDim * 4)); CUDA(cudaMemset(l.V, 0, (size_t)ring * kvDim * 4));
  }
  Weight emb = makeWeight(codecs[headCi], V, H, false);
  const Kset& KH = ksets[headCi];
  float* outNorm = upload(ones);
  std::vector<float> inv(hd / 2);
  for (int i = 0; i < hd / 2; i++) inv[i] = (float)std::pow(500000.0, -2.0 * i / hd);
  float* dinv = upload(inv);
  int depth = runs[0].first, attn = runs[0].second;
  std::vector<int> st = {depth, 1, 0, 0};
  int* state = upload(st);
  int* hist; CUDA(cudaMalloc(&hist, 64 * 4));
  float *x, *h, *qkv, *att, *act, *logits, *po, *pml;
  int nsplit = (2 * 132 + kvh - 1) / kvh;
  CUDA(cudaMalloc(&x, H * 4)); CUDA(cudaMalloc(&h, H * 4)); CUDA(cudaMalloc(&qkv, qkvRows * 4));
  CUDA(cudaMalloc(&att, H * 4)); CUDA(cudaMalloc(&act, F * 4)); CUDA(cudaMalloc(&logits, (size_t)V * 4));
  CUDA(cudaMalloc(&po, (size_t)heads * nsplit * hd * 4)); CUDA(cudaMalloc(&pml, (size_t)heads * nsplit * 8));
  unsigned* done;
  CUDA(cudaMalloc(&done, kvh * 4)); CUDA(cudaMemset(done, 0, kvh * 4));
  size_t ash = 4 * (32 * 65 + 32 * 64 + 4 * 64 + 4 * 32 + 12);
  cudaStream_t s; CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto mv = [&](const Kset& k, float* y, const Weight& w, const Weight* w2, const float* xin, const float* r, const float* nw) {
    if (int8 && k.mvq) k.mvq<<<mvqBlocks(w.rows), 512, mvqShared(w.cols), s>>>(y, w.dev, w2 ? w2->dev : nullptr, xin, r, w.rows, w.cols, w.rb, 0, nw, 1e-5f, 0);
    else k.mv<<<(w.rows + 7) / 8, 128, 0, s>>>(y, w.dev, w2 ? w2->dev : nullptr, xin, r, w.rows, w.cols, w.rb, 0, nw, 1e-5f, 0);
  };
  // 7 launches per layer: qkv (norm fused), rope+kv, attention (2), wo (+x), gate/up GLU (norm fused), down (+x).
  auto step = [&]() {
    KH.embed<<<1, 128, 0, s>>>(x, emb.dev, state + 1, 1, H, emb.rb, 1.f);
    for (auto& l : layers) {
      mv(K, qkv, l.qkv, nullptr, x, nullptr, l.attnNorm);
      if (attn != 2) ck_rope_kv_f32<<<dim3(1, heads + kvh), 64, 0, s>>>(qkv, qkv + H, qkv + H + kvDim, l.K, l.V, state, dinv, 1, heads, kvh, hd, hd, 1, 1.f, qkvRows, qkvRows, ring);
      if (attn >= 1) {
        dec1(false, att, po, pml, done, qkv, l.K, l.V, state, nullptr, 1, heads, kvh, hd, ring, 0, 0.125f, 0, nsplit, qkvRows, s,
             attn == 2 ? qkv + H : nullptr, qkv + H + kvDim, dinv, hd, 1, 1.f);
      } else {
        ck_attn_decode_f32<<<dim3(kvh, nsplit, 1), 128, ash, s>>>(po, pml, qkv, l.K, l.V, state, 1, heads, kvh, hd, ring, 0, 0.125f, 0, nsplit, qkvRows);
        ck_attn_combine<<<dim3(heads, 1), hd, 0, s>>>(att, po, pml, nullptr, 1, heads, hd, nsplit);
      }
      mv(K, x, l.wo, nullptr, att, x, nullptr);
      mv(K, act, l.gate, &l.up, x, nullptr, l.ffnNorm);
      mv(K, x, l.down, nullptr, act, x, nullptr);
    }
    mv(KH, logits, emb, nullptr, x, nullptr, outNorm);
    ck_argmax_step<<<1, 1024, 0, s>>>(logits, V, state, hist, 64);
  };
  for (size_t ri = 0; ri < runs.size(); ri++) {
  depth = runs[ri].first, attn = runs[ri].second;
  st = {depth, 1, 0, 0};
  CUDA(cudaMemcpy(state, st.data(), 16, cudaMemcpyHostToDevice));
  // Plain launches first (per token), then `steps` greedy steps as one graph.
  step();
  CUDA(cudaStreamSynchronize(s));
  cudaEventRecord(e0, s);
  for (int i = 0; i < 20; i++) step();
  cudaEventRecord(e1, s);
  CUDA(cudaEventSynchronize(e1));
  float msPlain; cudaEventElapsedTime(&msPlain, e0, e1);
  const int steps = 16;
  cudaGraph_t g; cudaGraphExec_t ge;
  CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < steps; i++) step();
  CUDA(cudaStreamEndCapture(s, &g));
#if CUDART_VERSION >= 12000
  CUDA(cudaGraphInstantiate(&ge, g, 0));
#else
  CUDA(cudaGraphInstantiate(&ge, g, nullptr, nullptr, 0));  // CUDA 11's signature
#endif
  CUDA(cudaGraphLaunch(ge, s));
  CUDA(cudaStreamSynchronize(s));
  const int reps = 5;
  float msGraph = 0;
  for (int i = 0; i < reps; i++) {
    CUDA(cudaMemcpyAsync(state, st.data(), 16, cudaMemcpyHostToDevice, s));  // back to the same depth
    cudaEventRecord(e0, s);
    CUDA(cudaGraphLaunch(ge, s));
    cudaEventRecord(e1, s);
    CUDA(cudaEventSynchronize(e1));
    float ms; cudaEventElapsedTime(&ms, e0, e1); msGraph += ms;
  }
  CUDA(cudaGetLastError());
  float us = msGraph * 1000 / (reps * steps), usPlain = msPlain * 1000 / 20;
  cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
  // Prefill of T tokens from position 0 on the same weights: GEMMs, f16
  // tensor-core attention, the last token's logits.
  if (prefill && ri == 0) {
    for (int T : {512, 2048}) {
      float *X, *Hn, *QKV, *ATT, *G, *U, *A;
      CUDA(cudaMalloc(&X, (size_t)T * H * 4)); CUDA(cudaMalloc(&Hn, (size_t)T * H * 4));
      CUDA(cudaMalloc(&QKV, (size_t)T * qkvRows * 4)); CUDA(cudaMalloc(&ATT, (size_t)T * H * 4));
      CUDA(cudaMalloc(&G, (size_t)T * F * 4)); CUDA(cudaMalloc(&U, (size_t)T * F * 4)); CUDA(cudaMalloc(&A, (size_t)T * F * 4));
      std::vector<int> ids(T);
      for (int i = 0; i < T; i++) ids[i] = rnd() % V;
      int* dids = upload(ids);
      std::vector<int> st0 = {0, 0, 0, 0};
      const size_t fsh = faShared(hd);
      cudaFuncSetAttribute(ck_fa_prefill_f32, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsh);
      cudaFuncSetAttribute(K.gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, GEMM_SMEM);
      auto gemm = [&](float* y, const Weight& w, const float* xin, const float* r) {
        K.gemm<<<dim3((w.rows + GBN - 1) / GBN, (T + GBM - 1) / GBM), 256, GEMM_SMEM, s>>>(y, w.dev, xin, r, w.rows, w.cols, w.rb, T);
      };
      float tGemm = 0, tAttn = 0, tOther = 0;
      // The int8 path (ck_quant_q8 + ck_mmq*), as cuda/session.go runs it.
      const bool q8 = int8 && K.mmq;
      int8_t* XQ = nullptr; float2* XDS = nullptr;
      if (q8) { CUDA(cudaMalloc(&XQ, (size_t)T * F)); CUDA(cudaMalloc(&XDS, (size_t)T * F / 32 * 8)); }
      auto gq = [&](float* y, const Weight& w, const float* r) {
        const int blocks = ((T + 127) / 128) * ((w.rows + QBN - 1) / QBN);
        mmq(K, 2 * blocks <= 132, y, w.dev, XQ, XDS, r, w.rows, w.cols, w.rb, T, s);
      };
      auto run = [&](bool timed) {
        cudaEvent_t a, b;
        cudaEventCreate(&a); cudaEventCreate(&b);
        auto mark = [&](float& acc, auto fn) {
          if (!timed) { fn(); return; }
          cudaEventRecord(a, s); fn(); cudaEventRecord(b, s); cudaEventSynchronize(b);
          float ms; cudaEventElapsedTime(&ms, a, b); acc += ms * 1000;
        };
        CUDA(cudaMemcpyAsync(state, st0.data(), 16, cudaMemcpyHostToDevice, s));
        mark(tOther, [&] { KH.embed<<<T, 128, 0, s>>>(X, emb.dev, dids, T, H, emb.rb, 1.f); });
        for (auto& l : layers) {
          if (q8) {
            mark(tOther, [&] { ck_rmsnorm<<<T, 256, 0, s>>>(Hn, X, l.attnNorm, T, H, 1e-5f, 0); quantQ8(XQ, XDS, Hn, nullptr, T, H, 0, s); });
            mark(tGemm, [&] { gq(QKV, l.qkv, nullptr); });
            mark(tOther, [&] { ck_rope_kv_f32<<<dim3(T, heads + kvh), 64, 0, s>>>(QKV, QKV + H, QKV + H + kvDim, l.K, l.V, state, dinv, T, heads, kvh, hd, hd, 1, 1.f, qkvRows, qkvRows, ring); });
            mark(tAttn, [&] { flashPrefill(false, hd, ATT, QKV, l.K, l.V, state, T, heads, kvh, ring, 0, 0.125f, 0, nullptr, qkvRows, s); });
            mark(tOther, [&] { quantQ8(XQ, XDS, ATT, nullptr, T, H, 0, s); });
            mark(tGemm, [&] { gq(X, l.wo, X); });
            mark(tOther, [&] { ck_rmsnorm<<<T, 256, 0, s>>>(Hn, X, l.ffnNorm, T, H, 1e-5f, 0); quantQ8(XQ, XDS, Hn, nullptr, T, H, 0, s); });
            mark(tGemm, [&] { gq(G, l.gate, nullptr); gq(U, l.up, nullptr); });
            mark(tOther, [&] { quantQ8(XQ, XDS, G, U, T, F, 0, s); });
            mark(tGemm, [&] { gq(X, l.down, X); });
            continue;
          }
          mark(tOther, [&] { ck_rmsnorm<<<T, 256, 0, s>>>(Hn, X, l.attnNorm, T, H, 1e-5f, 0); });
          mark(tGemm, [&] { gemm(QKV, l.qkv, Hn, nullptr); });
          mark(tOther, [&] { ck_rope_kv_f32<<<dim3(T, heads + kvh), 64, 0, s>>>(QKV, QKV + H, QKV + H + kvDim, l.K, l.V, state, dinv, T, heads, kvh, hd, hd, 1, 1.f, qkvRows, qkvRows, ring); });
          mark(tAttn, [&] { ck_fa_prefill_f32<<<dim3((T + 63) / 64, heads), 128, fsh, s>>>(ATT, QKV, l.K, l.V, state, T, heads, kvh, hd, ring, 0, 0.125f, 0, nullptr, qkvRows); });
          mark(tGemm, [&] { gemm(X, l.wo, ATT, X); });
          mark(tOther, [&] { ck_rmsnorm<<<T, 256, 0, s>>>(Hn, X, l.ffnNorm, T, H, 1e-5f, 0); });
          mark(tGemm, [&] { gemm(G, l.gate, Hn, nullptr); gemm(U, l.up, Hn, nullptr); });
          mark(tOther, [&] { ck_act_mul<<<dim3((F + 255) / 256, T), 256, 0, s>>>(A, G, U, T, F, F, F, 0); });
          mark(tGemm, [&] { gemm(X, l.down, A, X); });
        }
        mark(tOther, [&] {
          mv(KH, logits, emb, nullptr, X + (size_t)(T - 1) * H, nullptr, outNorm);
          ck_argmax_rows<<<1, 1024, 0, s>>>(hist, logits, 1, V);
        });
        cudaEventDestroy(a); cudaEventDestroy(b);
      };
      run(false);
      CUDA(cudaStreamSynchronize(s));
      cudaEventRecord(e0, s);
      for (int i = 0; i < 3; i++) run(false);
      cudaEventRecord(e1, s);
      CUDA(cudaEventSynchronize(e1));
      float ms; cudaEventElapsedTime(&ms, e0, e1);
      CUDA(cudaGetLastError());
      run(true);
      printf("prefill %s%s T=%d: %8.0f us = %7.0f tok/s (GEMM %.0f us, attention %.0f us, rest %.0f us, per-kernel timed pass)\n",
             c.name, q8 ? " int8 mma, flash" : " f16 wmma, fa", T, ms * 1000 / 3, T / (ms / 3 / 1000), tGemm, tAttn, tOther);
      if (XQ) { cudaFree(XQ); cudaFree(XDS); }
      cudaFree(X); cudaFree(Hn); cudaFree(QKV); cudaFree(ATT); cudaFree(G); cudaFree(U); cudaFree(A); cudaFree(dids);
    }
  }
  double wbytes = 0;
  for (auto& l : layers) wbytes += l.qkv.bytes() + l.wo.bytes() + l.gate.bytes() + l.up.bytes() + l.down.bytes();
  wbytes += emb.bytes();
  printf("decode step %s%s%s depth %d: graph of %d steps %7.1f us/token = %6.0f tok/s (%.0f GB/s of %.0f MB weights); plain launches %7.1f us\n",
         c.name, int8 ? " int8" : " exact", attn == 2 ? " dec1+rope" : attn ? " dec1" : " 2pass", depth, steps, us, 1e6 / us, wbytes / us / 1e3, wbytes / 1e6, usPlain);
  }
  for (auto& l : layers) {
    cudaFree(l.qkv.dev); cudaFree(l.wo.dev); cudaFree(l.gate.dev); cudaFree(l.up.dev); cudaFree(l.down.dev);
    cudaFree(l.attnNorm); cudaFree(l.ffnNorm); cudaFree(l.K); cudaFree(l.V);
  }
  cudaFree(emb.dev); cudaFree(outNorm); cudaFree(dinv); cudaFree(state); cudaFree(hist);
  cudaFree(x); cudaFree(h); cudaFree(qkv); cudaFree(att); cudaFree(act); cudaFree(logits); cudaFree(po); cudaFree(pml); cudaFree(done);
  cudaStreamDestroy(s);
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  cudaDeviceProp p;
  CUDA(cudaGetDeviceProperties(&p, 0));
  printf("device %s, %d SMs, L2 %d MB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  testElementwise();
  for (int ci = 0; ci < 7; ci++) testCodec(ci);
  testAttention();
  CUDA(cudaDeviceSynchronize());
  printf("\nchecks: %d failed\n", failures);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "check") return failures ? 1 : 0;
  if (mode == "prefill") {  // the prefill GEMMs and breakdown only
    benchGemm();
    for (int ci : {4, 5, 3}) benchStep(ci, {{2047, 0}}, true, true);
    if (argc > 2) benchStep(4, {{2047, 0}}, false, true);  // the f16 path for comparison
    return failures ? 1 : 0;
  }
  if (mode == "mv" || mode == "attn" || mode == "step") {
    if (mode == "mv") {  // the int8-activation matvecs on llama-1b shapes
      mvOnly = true;
      bench();
      return failures ? 1 : 0;
    }
    benchAttn();  // decode attention by depth, then whole decode steps
    if (mode == "step") {
      printf("\n== whole decode step, llama-1b shapes, two-pass vs dec1 attention ==\n");
      for (int ci : {4, 3, 5})
        benchStep(ci, {{511, 0}, {511, 1}, {511, 2}, {2047, 0}, {2047, 1}, {2047, 2}}, true);
    }
    return failures ? 1 : 0;
  }
  bench();
  benchAttn();
  printf("\n== whole decode step, llama-1b shapes ==\n");
  for (int ci : {4, 5, 3}) {
    benchStep(ci, {{2047, 0}, {2047, 2}}, true, true);
    benchStep(ci, {{2047, 0}}, false);
  }
  benchStep(4, {{0, 0}, {0, 2}}, true);
  return failures ? 1 : 0;
}
