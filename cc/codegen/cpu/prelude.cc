#include "cc/codegen/cpu/prelude.h"

namespace mj::codegen {

const std::string& cpu_prelude() {
  static const std::string text = R"PRELUDE(#ifndef MIRAGE_JAX_CPU_PRELUDE_V1
#define MIRAGE_JAX_CPU_PRELUDE_V1
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "xla/ffi/api/ffi.h"

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

// ---- activations: the functions of the reference interpreter (cc/interp/domain.h) --------

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x * sigmoid(x); }
inline float relu(float x) { return x > 0.0f ? x : 0.0f; }
// 0.5 x (1 + tanh(u)) written as x / (1 + exp(-2u)), the same function: the first form
// cancels in float32 for negative x (1 + tanh(u) -> 0), the second keeps full precision.
inline float gelu_tanh(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * (x * (x * x)));
  return x / (1.0f + std::exp(-(u + u)));
}
inline float max_of(float a, float b) { return a > b ? a : b; }

// ---- matmul on dense row-major tiles: C[M,N] (+)= A[M,K] @ B[K,N] ------------------------
// R rows by W columns of C stay in registers while k runs (zero-initialized locals, fully
// unrolled over r and j, so GCC keeps them in vector registers); each element still sums
// over k in ascending order, as the interpreter does.

template <int R, int W, int K, int N, bool kAccumulate>
inline void matmul_panel(const float* __restrict a, const float* __restrict b,
                         float* __restrict c) {
  float acc[R][W];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < W; ++j) acc[r][j] = kAccumulate ? c[r * N + j] : 0.0f;
  }
  for (int k = 0; k < K; ++k) {
    const float* brow = b + k * N;
    for (int r = 0; r < R; ++r) {
      const float ark = a[r * K + k];
      for (int j = 0; j < W; ++j) acc[r][j] += ark * brow[j];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < W; ++j) c[r * N + j] = acc[r][j];
  }
}

constexpr int kPanelCols = 16;
constexpr int kPanelRows = 4;

template <int R, int K, int N, bool kAccumulate>
inline void matmul_rows(const float* __restrict a, const float* __restrict b,
                        float* __restrict c) {
  int j = 0;
  for (; j + kPanelCols <= N; j += kPanelCols) {
    matmul_panel<R, kPanelCols, K, N, kAccumulate>(a, b + j, c + j);
  }
  if constexpr (N % kPanelCols != 0) {
    matmul_panel<R, N % kPanelCols, K, N, kAccumulate>(a, b + j, c + j);
  }
}

template <int M, int K, int N, bool kAccumulate>
inline void matmul(const float* __restrict a, const float* __restrict b, float* __restrict c) {
  int i = 0;
  for (; i + kPanelRows <= M; i += kPanelRows) {
    matmul_rows<kPanelRows, K, N, kAccumulate>(a + i * K, b, c + i * N);
  }
  if constexpr (M % kPanelRows != 0) {
    matmul_rows<M % kPanelRows, K, N, kAccumulate>(a + i * K, b, c + i * N);
  }
}

// ---- the grid: blocks as tasks on XLA's intra-op thread pool ------------------------------

// Tiles of one block live in a per-thread arena that is reused across blocks and calls.
inline float* thread_arena(int64_t floats) {
  static thread_local std::vector<float> storage;
  if (int64_t(storage.size()) < floats + 16) storage.resize(size_t(floats + 16));
  const auto address = reinterpret_cast<std::uintptr_t>(storage.data());
  return reinterpret_cast<float*>((address + 63) & ~std::uintptr_t(63));
}

template <class Io>
using BlockFn = void (*)(const Io&, float*, int64_t);

// Shared by the caller and the pool tasks through a shared_ptr: a task may start after the
// handler has returned, finds no block left, and must still find this object alive.
template <class Io>
struct GridJob {
  GridJob(const Io& io, BlockFn<Io> fn, int64_t blocks, int64_t chunk, int64_t arena_floats)
      : io(io), fn(fn), blocks(blocks), chunk(chunk), arena_floats(arena_floats) {}

  void work() {
    float* arena = nullptr;
    for (;;) {
      const int64_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
      if (begin >= blocks) return;
      if (arena == nullptr) arena = thread_arena(arena_floats);
      const int64_t end = std::min(begin + chunk, blocks);
      for (int64_t b = begin; b < end; ++b) fn(io, arena, b);
      if (done.fetch_add(end - begin, std::memory_order_acq_rel) + (end - begin) == blocks) {
        std::lock_guard<std::mutex> lock(mu);
        finished.notify_all();
      }
    }
  }

  // Only blocks claimed by running tasks can be outstanding, so this never waits on a task
  // that has not started.
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    finished.wait(lock, [&] { return done.load(std::memory_order_acquire) == blocks; });
  }

  const Io io;
  const BlockFn<Io> fn;
  const int64_t blocks, chunk, arena_floats;
  std::atomic<int64_t> next{0}, done{0};
  std::mutex mu;
  std::condition_variable finished;
};

template <class Io>
void run_grid(xla::ffi::ThreadPool& pool, const Io& io, BlockFn<Io> fn, int64_t blocks,
              int64_t arena_floats) {
  const int64_t threads = blocks > 1 ? pool.num_threads() : 0;
  if (threads <= 0) {  // no pool (or one block): run every block here
    float* arena = thread_arena(arena_floats);
    for (int64_t b = 0; b < blocks; ++b) fn(io, arena, b);
    return;
  }
  // A few chunks per thread balance uneven blocks without an atomic per block.
  const int64_t chunk = std::max<int64_t>(1, blocks / ((threads + 1) * 4));
  const int64_t chunks = (blocks + chunk - 1) / chunk;
  auto job = std::make_shared<GridJob<Io>>(io, fn, blocks, chunk, arena_floats);
  const int64_t helpers = std::min<int64_t>(threads, chunks - 1);
  for (int64_t i = 0; i < helpers; ++i) pool.Schedule([job]() { job->work(); });
  job->work();  // the calling thread takes chunks too
  job->wait();
}

}  // namespace
}  // namespace mj_cpu
#endif  // MIRAGE_JAX_CPU_PRELUDE_V1
)PRELUDE";
  return text;
}

}  // namespace mj::codegen
