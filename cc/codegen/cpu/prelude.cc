#include "cc/codegen/cpu/prelude.h"

namespace mj::codegen::cpu {

const std::string& cpu_kernel_includes() {
  static const std::string text = R"INCLUDES(#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
)INCLUDES";
  return text;
}

const std::string& cpu_prelude() {
  static const std::string text =
      "#ifndef MIRAGE_JAX_CPU_PRELUDE_V5\n"
      "#define MIRAGE_JAX_CPU_PRELUDE_V5\n" +
      cpu_kernel_includes() + R"PRELUDE(
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define MJ_CPU_AMX 1
#endif

namespace mj_cpu {
namespace {  // internal linkage: every loaded kernel library keeps its own copy

// ---- storage dtypes: compute is float32; bf16 and f16 convert on load and store ----------

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float from_f32(float x) { return x; }
inline float to_f32(float x) { return x; }

inline float from_bf16(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }

inline uint16_t to_bf16(float f) {
  const uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // round to nearest even
}

inline float from_f16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float32
    const float magnitude = float(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return bits_to_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline uint16_t to_f16(float f) {
  const uint32_t u = float_to_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {
    return uint16_t(sign | (magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u));
  }
  // From 65520 (halfway between the largest half, 65504, and 2^16) on, rounds to infinity.
  if (magnitude >= 0x477ff000u) return uint16_t(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {
    // Below 2^-14 the half is subnormal, in steps of 2^-24: adding 0.5 (whose float32 ulp is
    // 2^-24) makes the float unit round the value to nearest even at exactly that step.
    const float shifted = bits_to_float(magnitude) + 0.5f;
    return uint16_t(sign | (float_to_bits(shifted) - 0x3f000000u));
  }
  const uint32_t odd = (magnitude >> 13) & 1u;
  magnitude += 0xc8000fffu + odd;  // rebias the exponent by -112, round to nearest even
  return uint16_t(sign | (magnitude >> 13));
}

// ---- activations: the functions of the reference interpreter (cc/ir/elementwise.h) --------

// exp(x) in float32 without a libm call or a branch, so that GCC vectorizes the fused passes
// that use it (attention's exp runs once per score). x = n·ln2 + r with |r| <= ln2/2 (ln2 in
// two parts, so n·ln2 is exact), exp(r) by its Taylor polynomial to r^7 (truncation below
// 1e-8 relative, about one ulp in all), times 2^n applied as two normal powers of two so that
// underflow rounds to subnormals and overflow gives inf. -inf gives 0, NaN stays NaN.
inline float exp_f32(float x) {
  const float clamped = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  const float round_bias = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (clamped * 1.44269504088896341f + round_bias) - round_bias;
  const float r = (clamped - n * 0.693145751953125f) - n * 1.428606765330187045e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t ni = int32_t(n);
  const int32_t half = ni / 2;
  const float scale_a = __builtin_bit_cast(float, uint32_t(half + 127) << 23);
  const float scale_b = __builtin_bit_cast(float, uint32_t(ni - half + 127) << 23);
  const float result = p * scale_a * scale_b;
  return x != x ? x : result;
}

inline float sigmoid(float x) { return 1.0f / (1.0f + exp_f32(-x)); }
inline float silu(float x) { return x * sigmoid(x); }
// NaN propagates through relu and max, as in XLA (docs/ir-semantics.md, "NaN"); relu(-0) = +0.
inline float relu(float x) { return x > 0.0f ? x : (x != x ? x : 0.0f); }
// 0.5 x (1 + tanh(u)) written as x / (1 + exp(-2u)), the same function: the first form
// cancels in float32 for negative x (1 + tanh(u) -> 0), the second keeps full precision.
inline float gelu_tanh(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * (x * (x * x)));
  return x / (1.0f + exp_f32(-(u + u)));
}
inline float square(float x) { return x * x; }
// erf and erfc in float32 without branches, so that GCC vectorizes them (libm's erff and
// erfcf are one call per element, which GCC cannot vectorize). Below |x| = 1, erf(x) =
// x P(x^2); from 1 on, erfc(|x|) = exp(-x^2) R(1/|x|) / |x|, with x^2 split exactly into
// h + l (l by an FMA) so that the tail keeps float precision down to the subnormals. P
// (degree 6 in x^2, 1.4e-9 relative) and R (degree 10 in 1/|x| over |x| in [1, 10.5],
// 4.6e-8) are Chebyshev least-squares fits of the C library's double erf and erfc; in float32
// erf is within 2.3 ulps of the correctly rounded value over [-12, 12] and erfc within 9 (near
// |x| = 0.94, where 1 - erf cancels). NaN in, NaN out; erf(-0) = -0; erf(+-inf) = +-1.
inline float erf_small(float x) {
  const float t = x * x;
  float p = 7.882497448008507e-05f;
  p = p * t + -0.0008018855005502701f;
  p = p * t + 0.005189312156289816f;
  p = p * t + -0.02685432881116867f;
  p = p * t + 0.11283597350120544f;
  p = p * t + -0.3761262595653534f;
  p = p * t + 1.1283791670955126f;  // 2 / sqrt(pi): erf(x) = x p near 0
  return x * p;
}
inline float erfc_large(float a) {  // a >= 1; erfc(10.5) is 0 in float32
  a = a < 10.5f ? a : 10.5f;
  const float h = a * a;
  const float l = __builtin_fmaf(a, a, -h);
  const float u = 1.0f / a;
  float r = -0.05271010473370552f;
  r = r * u + 0.2611837685108185f;
  r = r * u + -0.46753063797950745f;
  r = r * u + 0.1909928172826767f;
  r = r * u + 0.5966925621032715f;
  r = r * u + -1.1181813478469849f;
  r = r * u + 0.8033108711242676f;
  r = r * u + -0.07697904109954834f;
  r = r * u + -0.2727861702442169f;
  r = r * u + -0.000615813594777137f;
  r = r * u + 0.564206600189209f;
  return exp_f32(-h) * (1.0f - l) * r * u;
}
inline float erf_f32(float x) {
  const float a = x < 0.0f ? -x : x;
  const float big = 1.0f - erfc_large(a < 1.0f ? 1.0f : a);
  const float r = a < 1.0f ? erf_small(x) : (x < 0.0f ? -big : big);
  return x != x ? x : r;
}
inline float erfc_f32(float x) {
  const float a = x < 0.0f ? -x : x;
  const float e = erfc_large(a < 1.0f ? 1.0f : a);
  const float r = a < 1.0f ? 1.0f - erf_small(x) : (x < 0.0f ? 2.0f - e : e);
  return x != x ? x : r;
}
inline float max_of(float a, float b) { return (a > b || a != a) ? a : b; }

// ---- matmul: C[M,N] (+)= A[M,K] @ B[K,N], rows lda / ldb / ldc floats apart -------------
// Memory-bound shapes (few rows of A, a weight tile as B) set the design: B is streamed once,
// kKChunk rows of K at a time across all its columns (a handful of interleaved row streams
// keeps the prefetchers at full bandwidth; dozens collapse them), while R rows by V vectors of
// C stay in zero-initialized, fully unrolled register accumulators (or GCC spills them). Each
// element of C still sums over k in ascending order. With kAhead != 0, every line of B read
// also prefetches the line kAhead floats further on, where the tile read next lies (the next
// iteration's or the next block's: KernelPlan::next_tile_offset), or, when that tile lies
// further below, the line a few rows down or further along the row (matmul_rows). Wider
// vectors where the
// target has them (AVX-512), generic GCC vectors otherwise.

#if defined(__AVX512F__)
constexpr int kVecFloats = 16;
constexpr int kAccVectors = 16;  // of 32 vector registers; the rest hold B and a broadcast
#else
constexpr int kVecFloats = 8;
constexpr int kAccVectors = 12;  // of 16
#endif
using Vec = float __attribute__((vector_size(kVecFloats * sizeof(float))));

inline Vec load_vec(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_vec(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// A bfloat16 tile read in place by the matmuls (KernelPlan::read_in_place): widened in
// registers as it is loaded, so a bfloat16 weight is read from memory once, at half float32's
// bytes, instead of converted into the arena first and read again from there.
struct Bf16 {
  uint16_t bits;
};
using HalfBits = uint16_t __attribute__((vector_size(kVecFloats * sizeof(uint16_t))));
using WordBits = uint32_t __attribute__((vector_size(kVecFloats * sizeof(uint32_t))));

inline Vec load_vec(const Bf16* p) {
  HalfBits h;
  std::memcpy(&h, p, sizeof h);
  const WordBits w = __builtin_convertvector(h, WordBits) << 16;
  Vec v;
  std::memcpy(&v, &w, sizeof v);
  return v;
}
inline float load_scalar(const float* p) { return *p; }
inline float load_scalar(const Bf16* p) { return from_bf16(p->bits); }

// ---- row reductions: a float sum or max over one contiguous row ---------------------------
// Written one element at a time, a row reduction is a chain of dependent adds (one per 3-4
// cycles: GCC may not reassociate float adds to vectorize it). These keep kRowLanes vectors
// of independent partial results and combine them at the end: a different summation order
// from the interpreter's.
//
// Sums are kept in double and rounded to float once, at the end. In float, the partial sums
// grow to the whole row's magnitude and each add rounds there: the mean of a row of 64
// values 1e3 + 1e-2·noise (LayerNorm's input with a large offset, tests/e2e/test_layer_norm.py)
// came out 2 ulps from the correctly rounded one, and the centered values x - mean, the
// size of the noise, carried a 1.5% error, 4x XLA's. In double the sum is correctly
// rounded but for ties, whatever the order.
constexpr int kRowLanes = 4;
using DVec = double __attribute__((vector_size(kVecFloats * sizeof(double))));
inline DVec widen(Vec v) { return __builtin_convertvector(v, DVec); }

template <bool kSquares>
inline double row_sum_wide(const float* __restrict x, int64_t n) {
  DVec acc[kRowLanes] = {};
  int64_t j = 0;
  for (; j + kRowLanes * kVecFloats <= n; j += kRowLanes * kVecFloats) {
#pragma GCC unroll 4
    for (int l = 0; l < kRowLanes; ++l) {
      const Vec v = load_vec(x + j + l * kVecFloats);
      acc[l] += widen(kSquares ? v * v : v);
    }
  }
  for (; j + kVecFloats <= n; j += kVecFloats) {
    const Vec v = load_vec(x + j);
    acc[0] += widen(kSquares ? v * v : v);
  }
  for (int l = 1; l < kRowLanes; ++l) acc[0] += acc[l];
  double s = 0.0;
  for (int i = 0; i < kVecFloats; ++i) s += acc[0][i];
  for (; j < n; ++j) s += kSquares ? x[j] * x[j] : x[j];
  return s;
}
inline float row_sum(const float* __restrict x, int64_t n) {
  return float(row_sum_wide<false>(x, n));
}
inline float row_sum_squares(const float* __restrict x, int64_t n) {
  return float(row_sum_wide<true>(x, n));
}
// The mean divided in double too: the sum rounded to float first is off by up to half an ulp
// of the sum, n times the mean's (a row of 70 values about 1e3 came out an ulp off).
inline float row_mean(const float* __restrict x, int64_t n) {
  return float(row_sum_wide<false>(x, n) / double(n));
}

inline Vec max_vec(Vec a, Vec b) { return (a > b) | (a != a) ? a : b; }
// The lanes folded in halves, log2(kVecFloats) steps: one max_of per lane of every partial
// made a dependent chain of 64 (AVX-512), longer than the vector work of a 128-wide row, and
// an attention block's online softmax takes a row's max every iteration.
inline float lanes_max(Vec v) {
  float lane[kVecFloats];
  std::memcpy(lane, &v, sizeof v);
#pragma GCC unroll 8
  for (int w = kVecFloats / 2; w > 0; w /= 2) {
#pragma GCC unroll 8
    for (int i = 0; i < w; ++i) lane[i] = max_of(lane[i], lane[i + w]);
  }
  return lane[0];
}

// max(init, x[0], ..., x[n-1]) with max_of's rule: NaN if any of them is NaN.
inline float row_max(const float* __restrict x, int64_t n, float init) {
  Vec acc[kRowLanes];
  for (int l = 0; l < kRowLanes; ++l) acc[l] = Vec{} + init;
  int64_t j = 0;
  for (; j + kRowLanes * kVecFloats <= n; j += kRowLanes * kVecFloats) {
#pragma GCC unroll 4
    for (int l = 0; l < kRowLanes; ++l) acc[l] = max_vec(acc[l], load_vec(x + j + l * kVecFloats));
  }
  for (; j + kVecFloats <= n; j += kVecFloats) acc[0] = max_vec(acc[0], load_vec(x + j));
  for (int l = 1; l < kRowLanes; ++l) acc[0] = max_vec(acc[0], acc[l]);
  float m = lanes_max(acc[0]);
  for (; j < n; ++j) m = max_of(m, x[j]);
  return m;
}

constexpr int kMaxPanelRows = 8;
// Rows of B a panel of R rows of C walks before it stores its accumulators: few, so that few
// rows of B are streamed at once. From 6 rows on the product waits on the FMAs when B is warm,
// and chunks of 32 had saved a quarter of the loads and stores of C there (gemv_chain.py
// --warm --rows 8: 1.60x XLA's speed against 1.46x with 8, on the AMD machine; 0.159 against
// 0.165 ms a product on the Intel one). From DRAM, 32 rows of B in flight are more streams
// than the prefetchers follow: x[8, 4096] @ w[4096, 11008] over 64 blocks (a SwiGLU MLP's
// gate, grouped four blocks a task) took 1.68x the time of the fastest grid with 32-row
// chunks and 1.12x with 8, and the fastest went from 6.80 to 6.71 ms (gemv_tiles.py, w
// cold); a panel of 4 rows had lost a sixth of Llama's batch-4 step to them.
constexpr int kKChunk = 8;
constexpr int64_t kBytesAhead = 4096;

template <int R>
constexpr int panel_vectors() {
  return kAccVectors / R < 1 ? 1 : (kAccVectors / R > 8 ? 8 : kAccVectors / R);
}

// R rows by V vectors of C over KC values of k.
template <int R, int V, int KC, int lda, int ldb, int ldc, int64_t kAhead, bool kLoad, class TA, class TB>
inline void panel_vec(const TA* __restrict a, const TB* __restrict b, float* __restrict c) {
  Vec acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[r][v] = kLoad ? load_vec(c + r * ldc + v * kVecFloats) : Vec{};
  }
#pragma GCC unroll 16
  for (int k = 0; k < KC; ++k) {
    const TB* brow = b + k * ldb;
    if constexpr (kAhead != 0) {
      constexpr int kLine = 64 / int(sizeof(TB));  // elements of B per cache line
#pragma GCC unroll 8
      for (int j = 0; j < V * kVecFloats; j += kLine) __builtin_prefetch(brow + kAhead + j, 0, 2);
    }
    Vec bv[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) bv[v] = load_vec(brow + v * kVecFloats);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float ark = load_scalar(a + r * lda + k);
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[r][v] += ark * bv[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) store_vec(c + r * ldc + v * kVecFloats, acc[r][v]);
  }
}

// The first W (< kVecFloats) elements at p in a vector, zero past them, and the reverse:
// masked loads and stores where AVX-512 has them (a memcpy through the stack, the fallback,
// ran slower than the scalar loop in one probe).
#if defined(__AVX512F__)
template <int W>
inline Vec load_part(const float* p) {
  return Vec(_mm512_maskz_loadu_ps(__mmask16((1u << W) - 1), p));
}
template <int W>
inline void store_part(float* p, Vec v) {
  _mm512_mask_storeu_ps(p, __mmask16((1u << W) - 1), __m512(v));
}
#else
template <int W>
inline Vec load_part(const float* p) {
  Vec v = {};
  std::memcpy(&v, p, W * sizeof(float));
  return v;
}
template <int W>
inline void store_part(float* p, Vec v) {
  std::memcpy(p, &v, W * sizeof(float));
}
#endif
template <int W>
inline Vec load_part(const Bf16* p) {
  Vec v = {};
  for (int j = 0; j < W; ++j) v[j] = load_scalar(p + j);
  return v;
}

// The last W = N % kVecFloats columns, as one partial vector per row: one float at a time
// they were strided scalar loads. A [1, 1024] @ [1024, 44] tile (a 2816-wide weight over 64
// blocks, walked 32 rows at a time, inputs cold) went from 0.76-1.02x XLA's rate to
// 1.08-1.46x, alternating with XLA on this busy 2-core machine.
template <int R, int W, int KC, int lda, int ldb, int ldc, int64_t kAhead, bool kLoad, class TA,
          class TB>
inline void panel_part(const TA* __restrict a, const TB* __restrict b, float* __restrict c) {
  Vec acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = kLoad ? load_part<W>(c + r * ldc) : Vec{};
#pragma GCC unroll 16
  for (int k = 0; k < KC; ++k) {
    if constexpr (kAhead != 0) {  // its first and last element: the lines it lies on
      __builtin_prefetch(b + k * ldb + kAhead, 0, 2);
      __builtin_prefetch(b + k * ldb + kAhead + W - 1, 0, 2);
    }
    const Vec bv = load_part<W>(b + k * ldb);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] += load_scalar(a + r * lda + k) * bv;
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) store_part<W>(c + r * ldc, acc[r]);
}

// R rows of C, all N columns, V vectors at a time, over KC values of k.
template <int R, int V, int KC, int N, int lda, int ldb, int ldc, int64_t kAhead, bool kLoad,
          class TA, class TB>
inline void row_chunk(const TA* __restrict a, const TB* __restrict b, float* __restrict c) {
  constexpr int kPanel = V * kVecFloats;
  int j = 0;
  for (; j + kPanel <= N; j += kPanel) {
    panel_vec<R, V, KC, lda, ldb, ldc, kAhead, kLoad>(a, b + j, c + j);
  }
  constexpr int kRestVectors = N % kPanel / kVecFloats;
  if constexpr (kRestVectors > 0) {
    panel_vec<R, kRestVectors, KC, lda, ldb, ldc, kAhead, kLoad>(a, b + j, c + j);
    j += kRestVectors * kVecFloats;
  }
  if constexpr (N % kVecFloats != 0) {
    panel_part<R, N % kVecFloats, KC, lda, ldb, ldc, kAhead, kLoad>(a, b + j, c + j);
  }
}

// G products C_g (+)= A @ B_g that share A, for R rows: B_g = b + g * N (tiles side by side in
// one matrix) and C_g = c + g * kSlice. One k-chunk (KC0 rows of B) of all G runs before the
// next, so B is streamed as G·N-wide rows.
template <int R, int V, int KC0, int K, int N, int G, int lda, int ldb, int ldc, int64_t kSlice,
          int64_t kNext, bool kAccumulate, class TA, class TB>
inline void matmul_rows(const TA* __restrict a, const TB* __restrict b, float* __restrict c) {
  constexpr int KC = K < KC0 ? K : KC0;
  // Without a next tile to fetch (a tile read whole, no loop), the rows about kBytesAhead
  // further down this one: the rows of a narrow tile lie a page or more apart, where no
  // hardware prefetcher follows.
  constexpr int64_t kRowBytes = int64_t(N) * G * sizeof(TB);
  constexpr int64_t kRows = kBytesAhead / kRowBytes < 16 ? 16 : kBytesAhead / kRowBytes;
  // A next tile straight below this one is not fetched a whole tile ahead: that put up to a
  // megabyte of B in flight per core, and x[1, 4096] @ w[4096, 4096] over 128-row tiles ran
  // at 0.7x the rate of 8-row tiles (benchmarks/gemv_tiles.py, w cold). Rows of up to
  // kBytesAhead are fetched kRows ahead (1.0x). Longer rows are walked panel by panel across
  // a chunk of rows, each row a stream of its own, so each line asks for the one 512 bytes
  // further along its row: kRows ahead left [4096, 11008] over two blocks of 128-row tiles
  // at 1.11x the time of 8-row tiles for one row of x and 1.31-1.48x for eight; this way,
  // 1.00x and 1.11-1.17x. So do tiles of a chunk of rows (KC0) or taller whose rows are 8
  // KB or longer: fetching the tile below (8 or 16 rows down) left `gemv_tiles.py --shapes
  // 8x4096x11008 --blocks 2 --k-tiles 8,16,32` at 1.09-1.12 / 1.20-1.26 / 1.00 (16 rows:
  // 1.13-1.19 at one row of x; [8, 1024] @ [1024, 8192], rows of 16 KB: 1.03-1.04 /
  // 1.09-1.12), this way 1.00-1.01 for all of them, and the gated MLP's 16-row tiles at
  // 1.05x its 8-row ones. Rows of 4-8 KB keep the tile below ([8, 1024] @ [1024, 2816], 5.5
  // KB: 8-row tiles 0.96x the time of 64-row ones, along their rows 1.00-1.02x), and so do
  // tiles under a chunk (4 rows a step: along their rows up to 1.10x the time).
  constexpr int64_t kNear = kRows * ldb;
  constexpr bool kLongRows = kRowBytes > kBytesAhead;
  constexpr int64_t kAlong = kLongRows ? int64_t(512 / sizeof(TB)) : kNear;
  constexpr bool kBelow = kNext == int64_t(K) * ldb;
  constexpr bool kFetchAlong =
      kBelow && (kNext > kNear || (kRowBytes >= 2 * kBytesAhead && K >= KC0));
  constexpr int64_t kAhead = kNext != 0 ? (kFetchAlong ? kAlong : kNext) : (K > kRows ? kNear : 0);
  int k = 0;
  if constexpr (!kAccumulate) {  // the first chunk starts from zero instead of C
    for (int g = 0; g < G; ++g) {
      row_chunk<R, V, KC, N, lda, ldb, ldc, kAhead, false>(a, b + g * N, c + g * kSlice);
    }
    k = KC;
  }
  for (; k + KC <= K; k += KC) {
    for (int g = 0; g < G; ++g) {
      row_chunk<R, V, KC, N, lda, ldb, ldc, kAhead, true>(a + k, b + k * ldb + g * N,
                                                          c + g * kSlice);
    }
  }
  if constexpr (K % KC != 0) {
    for (int g = 0; g < G; ++g) {
      row_chunk<R, V, K % KC, N, lda, ldb, ldc, kAhead, true>(a + k, b + k * ldb + g * N,
                                                              c + g * kSlice);
    }
  }
}

// More than kMaxPanelRows rows make a product compute-bound: B is read again for every panel
// of rows. Then each kComputeKChunk × kPackedColumns strip of B is copied once into a
// contiguous buffer (B's rows are often a whole input row apart: 4 KB strides alias in the
// caches) and used by every panel of kComputeRows rows: 6 rows by 2 vectors (12
// accumulators, 8 loads per 12 FMAs) over 128 values of k. On one core here, on the
// calibration probe's tiles (B rows 4 KB apart), that ran 82 GFLOP/s against 35 for the
// streaming order's 8 rows by 1 vector over 8 (9 loads per 8 FMAs, C reloaded every 8 k);
// on 2 cores the probe went from 99 to 172 (XLA's matmul: 181). Each element of C still sums
// over k in ascending order.
constexpr int kComputeRows = 6;
constexpr int kComputeKChunk = 128;
constexpr int kPackedVectors = 2;
constexpr int kPackedColumns = kPackedVectors * kVecFloats;

// C[M, kPackedColumns] (+)= A[M, KC] @ B[KC, kPackedColumns], B packed (kPackedColumns apart).
template <int M, int KC, int lda, int ldc, bool kLoad, class TA>
inline void packed_rows(const TA* __restrict a, const float* __restrict packed,
                        float* __restrict c) {
  constexpr int R = kComputeRows;
  int i = 0;
  for (; i + R <= M; i += R) {
    panel_vec<R, kPackedVectors, KC, lda, kPackedColumns, ldc, 0, kLoad>(a + i * lda, packed,
                                                                         c + i * ldc);
  }
  if constexpr (M % R != 0) {
    panel_vec<M % R, kPackedVectors, KC, lda, kPackedColumns, ldc, 0, kLoad>(a + i * lda, packed,
                                                                             c + i * ldc);
  }
}

template <int M, int KC, int N, int lda, int ldb, int ldc, int64_t kAhead, bool kLoad, class TA, class TB>
inline void packed_chunk(const TA* __restrict a, const TB* __restrict b,
                         float* __restrict c) {
  alignas(64) float packed[KC * kPackedColumns];
  int j = 0;
  for (; j + kPackedColumns <= N; j += kPackedColumns) {
    for (int k = 0; k < KC; ++k) {
      const TB* brow = b + k * ldb + j;
      if constexpr (kAhead != 0) __builtin_prefetch(brow + kAhead, 0, 2);
#pragma GCC unroll 4
      for (int v = 0; v < kPackedVectors; ++v) {
        store_vec(packed + k * kPackedColumns + v * kVecFloats, load_vec(brow + v * kVecFloats));
      }
    }
    packed_rows<M, KC, lda, ldc, kLoad>(a, packed, c + j);
  }
  if constexpr (N % kPackedColumns != 0) {  // the last columns, read in place
    constexpr int R = kComputeRows;
    int i = 0;
    for (; i + R <= M; i += R) {
      row_chunk<R, panel_vectors<R>(), KC, N % kPackedColumns, lda, ldb, ldc, 0, kLoad>(
          a + i * lda, b + j, c + i * ldc + j);
    }
    if constexpr (M % R != 0) {
      row_chunk<M % R, panel_vectors<M % R>(), KC, N % kPackedColumns, lda, ldb, ldc, 0, kLoad>(
          a + i * lda, b + j, c + i * ldc + j);
    }
  }
}

// At most a vector of columns (a weight times a few activations laid out as its columns:
// E @ x^T for tied-embedding logits): vectors across columns would be one or mostly empty, so
// each row of A is read once, as vectors along k, into N dot products summed across their
// lanes at the end (on a [4096, 48] bfloat16 tile with 4 columns, about 1.8x the 6-row
// panels' rate here, 1.2x with 8, in a harness run beside other work: rough ratios). B's
// columns are first copied into N contiguous rows, few_k_chunk<N>() k at a time. The lanes
// make a different summation order from ascending k, within float32 rounding of it.
// The copied columns take at most kFewColumnFloats (24 KB, in L1 beside A's lines), so fewer
// columns get longer chunks: a row split into two chunks is walked twice, each pass a strided
// sweep over the block's rows instead of one sequential stream. E[8192, 768] float32 times 4
// columns (64 blocks of 128 rows, 2 cores, AVX-512, a loop over 4 inputs of 25 MB) took
// 1.65 ms in chunks of 512 and 256, 1.16-1.20 ms in one chunk, 1.09-1.11 ms with the
// accumulators below; XLA's product, 1.5-1.6 ms timed cold beside it. With 8 columns, 16 KB
// of them (chunks of 512 and 256) took 1.84-2.08 ms and 24 KB (one chunk) 1.52-1.73 ms, in
// alternating builds.
constexpr int kFewColumnFloats = 6144;
template <int N>
constexpr int few_k_chunk() {
  return kFewColumnFloats / N;
}
// Each row's loads also prefetch the same k of the row this many ahead, into L1: the
// hardware prefetchers did not keep up with rows read a chunk at a time, and the loop
// stalled on A's loads (46% of its samples on a [8192, 768] bfloat16 E times 8 columns).
// That product took 4.1-5.9 ms without it and 1.6-3.9 ms with it (2 cores, fixed inputs,
// old and new builds in alternating batches of runs on a loaded machine).
constexpr int kFewAheadRows = 2;
// Independent FMA chains a row keeps in flight: about the FMA latency times the FMAs issued
// per cycle, so that the loop waits on loads rather than on its own sums.
constexpr int kFewChains = 8;

// The sum of a vector's lanes (float or double: RowSums keeps its sums in double).
template <class V>
inline auto lane_sum(V v) {
  decltype(v[0] + 0) s = 0;
#pragma GCC unroll 16
  for (int i = 0; i < kVecFloats; ++i) s += v[i];
  return s;
}

// Adjacent lanes of a and b summed: a's pairs in the low half, b's in the high half.
template <class V, size_t... I>
inline V pair_sums(V a, V b, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, b, (2 * I)...) + __builtin_shufflevector(a, b, (2 * I + 1)...);
}

// The lane sums of kVecFloats vectors as one vector (lane n: the sum of v[n]'s lanes), by
// a tree of pair_sums: log2(kVecFloats) rounds of shuffles and adds for all of them, where
// one lane_sum each is a chain of kVecFloats - 1 dependent scalar adds. The sums are
// pairwise, a different order from lane_sum's, within float32 rounding of it. With short
// k tiles a row's sums are taken every iteration: on the product above in k tiles of 96,
// 3.5 ms with one lane_sum per column, 2.9-3.3 with the tree (warm, same inputs).
template <class V>
inline V lane_sums(V* v) {
  for (int width = kVecFloats; width > 1; width /= 2) {
    for (int i = 0; i < width / 2; ++i) {
      v[i] = pair_sums(v[2 * i], v[2 * i + 1], std::make_index_sequence<kVecFloats>{});
    }
  }
  return v[0];
}

// Short rows summed kVecFloats at a time (emit_compute.cc, kShortRow): each row folds into one
// vector of partial sums, and a full batch of kVecFloats such vectors is summed across its
// lanes by one lane_sums tree. row_sum ends every row with kVecFloats - 1 dependent scalar
// adds: on rows of 64 (a decode step's q . k per cached key) that chain was most of the
// kernel's time.

template <class Part>
struct RowSumsIn {
  Part parts[kVecFloats];
  float* to[kVecFloats];
  int n = 0;

  void add(const float* __restrict x, int64_t len, float* dst, float divisor) {
    Part acc[2] = {};
    int64_t j = 0;
    for (; j + 2 * kVecFloats <= len; j += 2 * kVecFloats) {
      acc[0] += part(load_vec(x + j));
      acc[1] += part(load_vec(x + j + kVecFloats));
    }
    for (; j + kVecFloats <= len; j += kVecFloats) acc[0] += part(load_vec(x + j));
    for (int i = 0; j < len; ++j, ++i) acc[1][i] += x[j];
    push(acc[0] + acc[1], dst, divisor);
  }

  // The row of x[j] * y[j], summed as add sums it (in the same order; the compiler may fuse
  // each product into its add, rounding once), without storing the row first: decode attention's q . k per cached key, where the row
  // written and read back cost more than the products (0.29 ms against XLA's 0.89 for
  // Llama's batch-8 scores, with 4 KB of key rows per head).
  template <class TX, class TY>
  void add_dot(const TX* __restrict x, const TY* __restrict y, int64_t len, float* dst,
               float divisor) {
    Vec acc[2] = {};
    int64_t j = 0;
    for (; j + 2 * kVecFloats <= len; j += 2 * kVecFloats) {
      acc[0] += load_vec(x + j) * load_vec(y + j);
      acc[1] += load_vec(x + j + kVecFloats) * load_vec(y + j + kVecFloats);
    }
    for (; j + kVecFloats <= len; j += kVecFloats) acc[0] += load_vec(x + j) * load_vec(y + j);
    for (int i = 0; j < len; ++j, ++i) acc[1][i] += load_scalar(x + j) * load_scalar(y + j);
    push(part(acc[0]) + part(acc[1]), dst, divisor);
  }

  static Part part(Vec v) {
    if constexpr (std::is_same_v<Part, DVec>) {
      return widen(v);
    } else {
      return v;
    }
  }

  void push(Part sum, float* dst, float divisor) {
    parts[n] = sum;
    to[n] = dst;
    if (++n == kVecFloats) flush(divisor);
  }

  void flush(float divisor) {
    if (n == kVecFloats) {
      const Part sums = lane_sums(parts);
      for (int i = 0; i < kVecFloats; ++i) *to[i] = float(sums[i] / divisor);
    } else {
      for (int i = 0; i < n; ++i) *to[i] = float(lane_sum(parts[i]) / divisor);
    }
    n = 0;
  }
};
// Plain rows (a mean, a variance's squares) summed in double, as row_sum sums them. Dot
// products (decode attention's q . k) stay in float, as the generated matmuls and XLA's
// dots accumulate: widened, Llama's batch-4 scores kernel measured 0.225 ms, against 0.197
// before and 0.173 in float again (one explain each, the machine's load unequal).
using RowSums = RowSumsIn<DVec>;
using DotSums = RowSumsIn<Vec>;

// One chunk of KC values of k (all loop bounds known when compiled).
template <int M, int KC, int N, int lda, int ldb, int ldc, bool kLoad, class TA, class TB>
inline void few_columns_chunk(const TA* __restrict a, const TB* __restrict b,
                              float* __restrict c) {
  constexpr int kVectorK = KC / kVecFloats * kVecFloats;
  alignas(64) float columns[N * KC];
  for (int k = 0; k < KC; ++k) {
#pragma GCC unroll 16
    for (int n = 0; n < N; ++n) columns[n * KC + k] = load_scalar(b + k * ldb + n);
  }
  // Each accumulator is a chain of dependent FMAs, one step per vector of k: with fewer than
  // kFewChains columns the chains, not the loads, would set the pace, so each column gets
  // S accumulators over alternate vectors of k, added before the lane sums.
  constexpr int S = N >= kFewChains ? 1 : (kFewChains + N - 1) / N;
  constexpr int kStepK = S * kVecFloats;
  constexpr int kSteppedK = kVectorK / kStepK * kStepK;
  for (int m = 0; m < M; ++m) {
    const TA* row = a + m * lda;
    Vec acc[N];
    Vec part[S][N];
#pragma GCC unroll 16
    for (int n = 0; n < N; ++n) {
#pragma GCC unroll 8
      for (int p = 0; p < S; ++p) part[p][n] = Vec{};
    }
    for (int k = 0; k < kSteppedK; k += kStepK) {
#pragma GCC unroll 8
      for (int p = 0; p < S; ++p) {
        const int kp = k + p * kVecFloats;
        __builtin_prefetch(row + kFewAheadRows * lda + kp, 0, 3);
        const Vec av = load_vec(row + kp);
#pragma GCC unroll 16
        for (int n = 0; n < N; ++n) part[p][n] += av * load_vec(columns + n * KC + kp);
      }
    }
    for (int k = kSteppedK; k < kVectorK; k += kVecFloats) {
      const Vec av = load_vec(row + k);
#pragma GCC unroll 16
      for (int n = 0; n < N; ++n) part[0][n] += av * load_vec(columns + n * KC + k);
    }
#pragma GCC unroll 16
    for (int n = 0; n < N; ++n) {
      acc[n] = part[0][n];
#pragma GCC unroll 8
      for (int p = 1; p < S; ++p) acc[n] += part[p][n];
    }
    float sums[N];
    if constexpr (N >= 4) {  // one tree for all columns
      Vec all[kVecFloats] = {};
#pragma GCC unroll 16
      for (int n = 0; n < N; ++n) all[n] = acc[n];
      const Vec summed = lane_sums(all);
#pragma GCC unroll 16
      for (int n = 0; n < N; ++n) sums[n] = summed[n];
    } else {
#pragma GCC unroll 16
      for (int n = 0; n < N; ++n) sums[n] = lane_sum(acc[n]);
    }
    if constexpr (kVectorK < KC) {
      for (int k = kVectorK; k < KC; ++k) {
        const float ak = load_scalar(row + k);
#pragma GCC unroll 16
        for (int n = 0; n < N; ++n) sums[n] += ak * columns[n * KC + k];
      }
    }
    float* out = c + m * ldc;
#pragma GCC unroll 16
    for (int n = 0; n < N; ++n) out[n] = (kLoad ? out[n] : 0.0f) + sums[n];
  }
}

template <int M, int K, int N, int lda, int ldb, int ldc, bool kAccumulate, class TA, class TB>
inline void matmul_few_columns(const TA* __restrict a, const TB* __restrict b,
                               float* __restrict c) {
  constexpr int KC = K < few_k_chunk<N>() ? K : few_k_chunk<N>();
  few_columns_chunk<M, KC, N, lda, ldb, ldc, kAccumulate>(a, b, c);
  int k = KC;
  for (; k + KC <= K; k += KC) {
    few_columns_chunk<M, KC, N, lda, ldb, ldc, true>(a + k, b + k * ldb, c);
  }
  if constexpr (K % KC != 0) {
    few_columns_chunk<M, K % KC, N, lda, ldb, ldc, true>(a + k, b + k * ldb, c);
  }
}

template <int M, int K, int N, int G, int lda, int ldb, int ldc, int64_t kSlice,
          int64_t kAhead, bool kAccumulate, class TA, class TB>
inline void matmul_group(const TA* __restrict a, const TB* __restrict b, float* __restrict c);

#if MJ_CPU_AMX
// Products with a bfloat16 B on the AMX tile unit, where the target has it: one core here
// (Sapphire Rapids) multiplied bfloat16 tiles at 2,300 GFLOP/s (970 in a first run) against
// 166-180 for float32 FMAs and 81-92 for AVX512-BF16's dot products
// (benchmarks/matrix_units.py). Products of two
// bfloat16 values are exact in float32 and the unit sums in float32, as the vector path
// does, in another order. A float32 A is multiplied as three bfloat16 parts whose sum is
// exactly A (split_bf16): three passes of exact products, still about twice the FMAs' rate.
// Denormal inputs count as zero and denormal sums flush to zero (the unit ignores MXCSR), as
// in XLA's CPU runtime, which runs with denormals as zero. A product past float32's range is
// infinite before it is added (an FMA adds it exact): a sum that overflows both ways is NaN
// where XLA's is infinite, and the float checks keep XLA for a region where that happens.
// C is computed kAmxBlock x kAmxBlock at a time (2 x 2 accumulator tiles of 16 x 16, two
// tiles of A's rows, two of B's columns), over chunks of kAmxKChunk values of k whose B is
// first packed in pairs of k, as the unit reads it.
constexpr int kAmxTileRows = 16;
constexpr int kAmxTileK = 32;  // bfloat16 values of k in a 64-byte row of an A tile
constexpr int kAmxBlock = 2 * kAmxTileRows;
constexpr int kAmxKChunk = 256;

// Linux gives a process the tile registers only on request (ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA); without it the first tile instruction faults. Refused (an older
// kernel, a hypervisor without the state), products take the vector path.
inline bool amx_permitted() {
  static const bool permitted = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  return permitted;
}

struct alignas(64) AmxConfig {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t bytes_per_row[16];
  uint8_t rows[16];
};

// B[KC, width] in pairs of k, kAmxBlock columns at a time: for each block, row p holds, for
// each column n, k = 2p then 2p + 1; the first 64 bytes are the left tile's row, the next 64
// the right one's. Two rows of B are interleaved by two permutes (AVX-512 BW, which every CPU
// with AMX has): one element at a time, packing took longer than the products of a 256-row A
// with the packed tile. B is read along its rows, the whole panel's width a pair of rows at a
// time: read a block's 64 bytes at a time down the rows, the best [256, 2816] @ [2816, 1024]
// kernel of benchmarks/gemv_tiles.py ran at 1,537 GFLOP/s on 2 cores instead of 1,778.
template <int KC, int ldb>
inline void amx_pack(const Bf16* __restrict b, uint16_t* __restrict packed, int width) {
  alignas(64) static constexpr uint16_t kLow[32] = {
      0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
      8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  alignas(64) static constexpr uint16_t kHigh[32] = {
      16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
      24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i low = _mm512_load_si512(kLow);
  const __m512i high = _mm512_load_si512(kHigh);
  for (int p = 0; p < KC / 2; ++p) {
    const Bf16* even_row = b + 2 * p * ldb;
    for (int j = 0; j < width; j += kAmxBlock) {
      const __m512i even = _mm512_loadu_si512(even_row + j);
      const __m512i odd = _mm512_loadu_si512(even_row + ldb + j);
      uint16_t* out = packed + j * KC + p * 2 * kAmxBlock;
      _mm512_store_si512(out, _mm512_permutex2var_epi16(even, low, odd));
      _mm512_store_si512(out + kAmxBlock, _mm512_permutex2var_epi16(even, high, odd));
    }
  }
}

// A float32 x as hi + mid + lo, each a bfloat16 holding 8 of x's 24 significant bits: hi
// and mid cut off (truncated) the bits below them, so x - hi and what mid leaves of it are
// exact, and lo is what remains, exact in bfloat16 unless it falls below float32's normal
// range (|x| < 2^-110: lost as a denormal, a relative 2^-16 of such an x). Infinity and NaN
// are their own hi (a NaN kept quiet), with zero parts.
inline void split_bf16(float x, uint16_t& hi, uint16_t& mid, uint16_t& lo) {
  const uint32_t u = float_to_bits(x);
  const bool finite = (u & 0x7f800000u) != 0x7f800000u;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  const float rest = x - bits_to_float(u & 0xffff0000u);
  const uint32_t r = float_to_bits(rest);
  const uint32_t last = float_to_bits(rest - bits_to_float(r & 0xffff0000u));
  hi = uint16_t((u >> 16) | (nan ? 0x40u : 0u));
  mid = finite ? uint16_t(r >> 16) : 0;
  lo = finite ? uint16_t(last >> 16) : 0;
}

// A's rows as the unit reads them: copied (bfloat16), or split into three parts (float32),
// each kAmxBlock rows of KC values, one after the other. Read in place, a bfloat16 A whose
// rows lie 2 KB apart (k = 1024) puts a tile's 16 rows in 2 of L1's 64 sets, more than its
// 12 ways: gemv_tiles' best [256, 1024] @ [1024, 1024] kernel ran at 1,419 GFLOP/s from such
// rows, 1,573 from copied ones (2 cores; no gain at k = 2816, 1,778 and 1,695).
template <class TA>
constexpr int amx_parts() {
  return std::is_same_v<TA, Bf16> ? 1 : 3;
}

// split_bf16 a vector at a time (KC is a multiple of kAmxTileK, so of the vector width):
// one element at a time it took longer than the tile products it feeds.
template <int KC, int lda>
inline void amx_split(const float* __restrict a, uint16_t* __restrict parts) {
  using Mask = int32_t __attribute__((vector_size(kVecFloats * sizeof(int32_t))));
  constexpr int kPart = kAmxBlock * KC;
  const auto as_float = [](WordBits w) {
    Vec v;
    std::memcpy(&v, &w, sizeof v);
    return v;
  };
  const auto as_bits = [](Vec v) {
    WordBits w;
    std::memcpy(&w, &v, sizeof w);
    return w;
  };
  const auto store_half = [](uint16_t* p, WordBits w) {
    const HalfBits h = __builtin_convertvector(w >> 16, HalfBits);
    std::memcpy(p, &h, sizeof h);
  };
  for (int r = 0; r < kAmxBlock; ++r) {
    for (int k = 0; k < KC; k += kVecFloats) {
      const Vec x = load_vec(a + r * lda + k);
      const WordBits u = as_bits(x);
      const WordBits finite = WordBits(Mask((u & 0x7f800000u) != 0x7f800000u));
      const WordBits nan = WordBits(Mask((u & 0x7fffffffu) > 0x7f800000u));
      const Vec rest = x - as_float(u & 0xffff0000u);
      const WordBits rb = as_bits(rest);
      const WordBits last = as_bits(rest - as_float(rb & 0xffff0000u));
      const int at = r * KC + k;
      store_half(parts + at, u | (nan & 0x400000u));
      store_half(parts + kPart + at, rb & finite);
      store_half(parts + 2 * kPart + at, last & finite);
    }
  }
}

// C[32 rows, 32 columns] (+)= A @ packed B over KC values of k. A: kParts parts kPart
// elements apart, each of rows kRow elements apart.
template <int KC, int kParts, int kRow, int kPart, int ldc, bool kLoad>
inline void amx_block(const uint16_t* a, const uint16_t* packed, float* c) {
  constexpr int kC = ldc * int(sizeof(float));
  if constexpr (kLoad) {
    _tile_loadd(0, c, kC);
    _tile_loadd(1, c + 16, kC);
    _tile_loadd(2, c + 16 * ldc, kC);
    _tile_loadd(3, c + 16 * ldc + 16, kC);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  constexpr int kA = kRow * int(sizeof(uint16_t));
  constexpr int kB = 2 * kAmxBlock * int(sizeof(uint16_t));
#pragma GCC unroll 8
  for (int k = 0; k < KC; k += kAmxTileK) {
    const uint16_t* pb = packed + (k / 2) * 2 * kAmxBlock;
    _tile_loadd(6, pb, kB);
    _tile_loadd(7, pb + kAmxBlock, kB);
#pragma GCC unroll 3
    for (int part = 0; part < kParts; ++part) {
      _tile_loadd(4, a + part * kPart + k, kA);
      _tile_loadd(5, a + part * kPart + kAmxTileRows * kRow + k, kA);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c, kC);
  _tile_stored(1, c + 16, kC);
  _tile_stored(2, c + 16 * ldc, kC);
  _tile_stored(3, c + 16 * ldc + 16, kC);
}

// One chunk of KC values of k. A's rows are copied or split once for all columns; B is
// packed kAmxPanel columns at a time, which every row block then reads from L2: packed for
// all 4096 columns of a [256, 1024] @ [1024, 8192] product over two blocks (2 MB a chunk),
// B fell out of L2 between row blocks.
constexpr int kAmxPanel = 256;

template <int M, int KC, int N, int lda, int ldb, int ldc, bool kLoad, class TA>
inline void amx_chunk(const TA* a, const Bf16* b, float* c, uint16_t* packed_b,
                      uint16_t* a_parts) {
  constexpr int kParts = amx_parts<TA>();
  constexpr int kPart = kAmxBlock * KC;  // between the parts of a row block
  for (int i = 0; i < M; i += kAmxBlock) {
    uint16_t* const parts = a_parts + i / kAmxBlock * kParts * kPart;
    if constexpr (kParts > 1) {
      amx_split<KC, lda>(a + i * lda, parts);
    } else {
      for (int r = 0; r < kAmxBlock; ++r) {
        std::memcpy(parts + r * KC, a + (i + r) * lda, KC * sizeof(uint16_t));
      }
    }
  }
  for (int j0 = 0; j0 < N; j0 += kAmxPanel) {
    const int j1 = j0 + kAmxPanel < N ? j0 + kAmxPanel : N;
    amx_pack<KC, ldb>(b + j0, packed_b, j1 - j0);
    for (int i = 0; i < M; i += kAmxBlock) {
      const uint16_t* rows = a_parts + i / kAmxBlock * kParts * kPart;
      for (int j = j0; j < j1; j += kAmxBlock) {
        amx_block<KC, kParts, KC, kPart, ldc, kLoad>(rows, packed_b + (j - j0) * KC,
                                                     c + i * ldc + j);
      }
    }
  }
}

// A thread's scratch for packed B and split A, kept from call to call: allocated for each
// call, a buffer of 128 KB or more is mapped and faulted in afresh every time (malloc maps
// such sizes), which made [256, 1024] @ [1024, 512] products 10% slower. Aligned to cache
// lines: at malloc's 16 bytes every 64-byte tile row spans two lines, and gemv_tiles' best
// float32 x bfloat16 w [256, 1024] @ [1024, 1024] kernel ran at 494 GFLOP/s instead of 668.
struct alignas(64) AmxLine {
  uint16_t values[32];
};

inline uint16_t* amx_scratch(size_t elements) {
  static thread_local std::unique_ptr<AmxLine[]> buffer;
  static thread_local size_t capacity = 0;
  if (capacity < elements) {
    capacity = (elements + 31) / 32 * 32;
    buffer.reset(new AmxLine[capacity / 32]);
  }
  return buffer.get()->values;
}

// C (+)= A @ B for M, N and K multiples of 32.
template <int M, int K, int N, int lda, int ldb, int ldc, bool kAccumulate, class TA>
inline void amx_product(const TA* a, const Bf16* b, float* c) {
  constexpr int KC = K < kAmxKChunk ? K : kAmxKChunk;
  constexpr int kPanel = N < kAmxPanel ? N : kAmxPanel;
  constexpr size_t kPackedB = size_t(KC) * kPanel;
  constexpr size_t kSplitA = size_t(amx_parts<TA>()) * M * KC;
  uint16_t* const packed_b = amx_scratch(kPackedB + kSplitA);
  uint16_t* const a_parts = packed_b + kPackedB;
  AmxConfig config{};
  config.palette = 1;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = kAmxTileRows;
    config.bytes_per_row[t] = 64;
  }
  _tile_loadconfig(&config);
  int k = 0;
  if constexpr (!kAccumulate) {
    amx_chunk<M, KC, N, lda, ldb, ldc, false>(a, b, c, packed_b, a_parts);
    k = KC;
  }
  for (; k + KC <= K; k += KC) {
    amx_chunk<M, KC, N, lda, ldb, ldc, true>(a + k, b + k * ldb, c, packed_b, a_parts);
  }
  if constexpr (K % KC != 0) {
    amx_chunk<M, K % KC, N, lda, ldb, ldc, true>(a + k, b + k * ldb, c, packed_b, a_parts);
  }
  _tile_release();
}

// Whether B[K, NN] holds no infinity and no NaN. A float32 A's parts can be zero where A is
// not (0.5 is all hi), and a zero part times an infinite B is NaN where A times it is
// infinite: with such a B a float32 A takes the vector path (checked for each product, a
// pass over B's bytes beside the three over A's parts).
template <int K, int NN, int ldb>
inline bool amx_finite(const Bf16* b) {
  for (int k = 0; k < K; ++k) {
    uint32_t special = 0;
    for (int n = 0; n < NN; ++n) special |= uint32_t((b[k * ldb + n].bits & 0x7f80u) == 0x7f80u);
    if (special) return false;
  }
  return true;
}

// The tile unit takes the largest part whose sides are multiples of 32; the vector path the
// rest: the last K % 32 values of k, then the last columns, then the last rows.
template <int M, int K, int N, int G, int lda, int ldb, int ldc, int64_t kSlice,
          bool kAccumulate, class TA>
inline void matmul_amx(const TA* a, const Bf16* b, float* c) {
  constexpr int M32 = M / kAmxBlock * kAmxBlock;
  constexpr int N32 = N / kAmxBlock * kAmxBlock;
  constexpr int K32 = K / kAmxTileK * kAmxTileK;
  for (int g = 0; g < G; ++g) {
    const Bf16* bg = b + g * N;
    float* cg = c + g * kSlice;
    amx_product<M32, K32, N32, lda, ldb, ldc, kAccumulate>(a, bg, cg);
    if constexpr (K32 < K) {
      matmul_group<M32, K - K32, N32, 1, lda, ldb, ldc, 0, 0, true>(a + K32, bg + K32 * ldb, cg);
    }
    if constexpr (N32 < N) {
      matmul_group<M32, K, N - N32, 1, lda, ldb, ldc, 0, 0, kAccumulate>(a, bg + N32, cg + N32);
    }
    if constexpr (M32 < M) {
      matmul_group<M - M32, K, N, 1, lda, ldb, ldc, 0, 0, kAccumulate>(a + M32 * lda, bg,
                                                                        cg + M32 * ldc);
    }
  }
}
#endif

template <int M, int K, int N, int G, int lda, int ldb, int ldc, int64_t kSlice,
          int64_t kAhead, bool kAccumulate, class TA, class TB>
inline void matmul_group(const TA* __restrict a, const TB* __restrict b,
                         float* __restrict c) {
  // A few rows by half a vector of columns or more is a stream of B's rows, which the row
  // panels take as it lies: as columns, a [1, 1024] @ [1024, 16] tile 4 KB a row apart ran
  // at 0.3x XLA's rate. Narrower, a panel's one accumulator per row is a chain of dependent
  // adds along k, and the columns' dot products along k are faster.
  if constexpr (N <= kVecFloats && (M > kMaxPanelRows || 2 * N < kVecFloats)) {
    for (int g = 0; g < G; ++g) {
      matmul_few_columns<M, K, N, lda, ldb, ldc, kAccumulate>(a, b + g * N, c + g * kSlice);
    }
  } else if constexpr (M <= kMaxPanelRows) {  // B streamed once, kKChunk rows at a time
    matmul_rows<M, panel_vectors<M>(), kKChunk, K, N, G, lda, ldb, ldc, kSlice,
                kAhead, kAccumulate>(a, b, c);
  } else {
#if MJ_CPU_AMX
    if constexpr ((std::is_same_v<TA, Bf16> || std::is_same_v<TA, float>) &&
                  std::is_same_v<TB, Bf16> && M >= kAmxBlock && N >= kAmxBlock &&
                  K >= kAmxTileK) {
      if (amx_permitted() && (std::is_same_v<TA, Bf16> || amx_finite<K, G * N, ldb>(b))) {
        matmul_amx<M, K, N, G, lda, ldb, ldc, kSlice, kAccumulate>(a, b, c);
        return;
      }
    }
#endif
    constexpr int KC = K < kComputeKChunk ? K : kComputeKChunk;
    int k = 0;
    if constexpr (!kAccumulate) {
      for (int g = 0; g < G; ++g) {
        packed_chunk<M, KC, N, lda, ldb, ldc, kAhead, false>(a, b + g * N, c + g * kSlice);
      }
      k = KC;
    }
    for (; k + KC <= K; k += KC) {
      for (int g = 0; g < G; ++g) {
        packed_chunk<M, KC, N, lda, ldb, ldc, kAhead, true>(a + k, b + k * ldb + g * N,
                                                            c + g * kSlice);
      }
    }
    if constexpr (K % KC != 0) {
      for (int g = 0; g < G; ++g) {
        packed_chunk<M, K % KC, N, lda, ldb, ldc, kAhead, true>(a + k, b + k * ldb + g * N,
                                                                c + g * kSlice);
      }
    }
  }
}

template <int M, int K, int N, int lda, int ldb, int ldc, int64_t kAhead, bool kAccumulate,
          class TA, class TB>
inline void matmul(const TA* __restrict a, const TB* __restrict b, float* __restrict c) {
  matmul_group<M, K, N, 1, lda, ldb, ldc, 0, kAhead, kAccumulate>(a, b, c);
}

}  // namespace
}  // namespace mj_cpu

// ---- the grid: tasks run by the dispatcher (cc/python/cpu_dispatch.cc) ------------------
// A kernel library holds no threading and no XLA header (they took most of its compile
// time): the extension's one XLA FFI handler checks the buffers against the kernel's
// signature, then calls its entry with a MjCpuGridV1, whose run spreads the tasks over XLA's
// intra-op thread pool and hands each thread its arena. A task is one call of the kernel's
// run_blocks: one group of consecutive blocks of the block graph (KernelPlan::block_group),
// whose arena slices sit side by side.
extern "C" {
typedef void (*MjCpuTaskFn)(const void* io, float* arena, int64_t task);
struct MjCpuGridV1 {
  void* context;
  void (*run)(void* context, MjCpuTaskFn task, const void* io, int64_t tasks,
              int64_t arena_floats);
};
}
#endif  // MIRAGE_JAX_CPU_PRELUDE_V5
)PRELUDE";
  return text;
}

}  // namespace mj::codegen::cpu
