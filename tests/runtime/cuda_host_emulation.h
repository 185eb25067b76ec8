// Runs generated CUDA kernels (cc/codegen/cuda) on the host, for machines without a GPU: one
// std::thread per CUDA thread, blocks of the grid one after another (or one chosen block),
// __syncthreads and the warp primitives as barriers. What this checks is the generator's
// semantics (indexing, tiling, phases, barriers, reductions, online softmax, dtype
// conversions, pipeline stages) against the interpreter; tests/gpu checks the hardware.
// The warp-wide instructions are emulated from the PTX ISA's descriptions
// (MJ_CUDA_EMULATE_MMA), so the generator's fragment indexing is checked here too:
//  - mma.sync m16n8k16 (bf16, f16) and m16n8k8 (tf32): each lane hands in its fragments, the
//    tiles are rebuilt from "Matrix Fragments for mma.m16n8k16 / m16n8k8" and multiplied;
//  - ldmatrix .x2/.x4 (.trans): each lane hands in its row address, which must be 16-byte
//    aligned and inside the block's shared memory, and receives its registers per
//    "Warp-level matrix load instruction: ldmatrix";
//  - cp.async: a synchronous copy that aborts unless both addresses are aligned to its width;
//  - cvt.rna.tf32.f32: round to 10 mantissa bits, ties away from zero.
// Only the hardware's timing (asynchrony of cp.async, bank conflicts) is not modeled.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#define MJ_CUDA_EMULATE_MMA 1

#ifndef __global__
#define __global__
#endif
#ifndef __device__
#define __device__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif
#undef __align__
#define __align__(n) __attribute__((aligned(n)))
#undef __shared__
#define __shared__
#define __launch_bounds__(n)
#define __trap() std::abort()

namespace mj_emulation {

struct Index3 {
  unsigned x = 0, y = 0, z = 0;
};

inline thread_local Index3 thread_index, block_index;

struct WarpFragments {
  uint32_t a[32][4];
  uint32_t b[32][2];
  const unsigned char* rows[32];  // ldmatrix row addresses
};

struct Block {
  std::unique_ptr<std::barrier<>> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<float> exchange;           // one slot per thread, for shuffles
  std::vector<WarpFragments> fragments;  // one per warp, for mma
};
inline Block* block = nullptr;

// The block's shared memory, for ldmatrix's bounds check (set by the caller of launch).
inline const unsigned char* smem_begin = nullptr;
inline const unsigned char* smem_end = nullptr;

// The first instruction used against its contract (misaligned cp.async, an ldmatrix row
// outside shared memory, ...): recorded, not fatal, so the test that ran the kernel fails
// with the reason instead of the process dying. The instruction then does nothing unsafe.
inline std::atomic<const char*> failure{nullptr};
inline void fail(const char* what) {
  const char* none = nullptr;
  failure.compare_exchange_strong(none, what);
}

inline void sync_threads() { block->all->arrive_and_wait(); }
inline void sync_warp() { block->warps[thread_index.x / 32]->arrive_and_wait(); }

inline float shuffle_xor(float v, int lane_mask) {
  const unsigned me = thread_index.x, partner = me ^ unsigned(lane_mask);
  block->exchange[me] = v;
  sync_warp();
  const float other = block->exchange[partner];
  sync_warp();
  return other;
}

// Element `half` (0: the low 16 bits) of a register holding two 16-bit values.
template <class T>
float element(uint32_t reg, int half) {
  const uint16_t bits = uint16_t(half ? reg >> 16 : reg & 0xffffu);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const uint32_t widened = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &widened, sizeof f);
    return f;
  } else {
    __half_raw raw;
    raw.x = bits;
    return __half2float(__half(raw));
  }
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: D += A B for the calling warp.
template <class T>
void mma_m16n8k16(float& d0, float& d1, float& d2, float& d3, uint32_t a0, uint32_t a1, uint32_t a2,
                  uint32_t a3, uint32_t b0, uint32_t b1) {
  const unsigned lane = thread_index.x % 32;
  WarpFragments& f = block->fragments[thread_index.x / 32];
  f.a[lane][0] = a0, f.a[lane][1] = a1, f.a[lane][2] = a2, f.a[lane][3] = a3;
  f.b[lane][0] = b0, f.b[lane][1] = b1;
  sync_warp();
  float a[16][16], b[16][8];
  for (unsigned l = 0; l < 32; ++l) {
    const unsigned group = l >> 2, in_group = l % 4;
    for (int i = 0; i < 8; ++i) {  // a_i is half i % 2 of register i / 2
      const unsigned row = (i < 2 || (i >= 4 && i < 6)) ? group : group + 8;
      const unsigned col = in_group * 2 + (i & 1) + (i >= 4 ? 8 : 0);
      a[row][col] = element<T>(f.a[l][i / 2], i % 2);
    }
    for (int i = 0; i < 4; ++i) {
      const unsigned row = in_group * 2 + (i & 1) + (i >= 2 ? 8 : 0);
      b[row][group] = element<T>(f.b[l][i / 2], i % 2);
    }
  }
  sync_warp();  // every lane has read the fragments before any lane's next mma writes them
  float* d[4] = {&d0, &d1, &d2, &d3};
  const unsigned group = lane >> 2, in_group = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const unsigned row = i < 2 ? group : group + 8, col = in_group * 2 + (i & 1);
    float sum = 0.0f;
    for (int k = 0; k < 16; ++k) sum += a[row][k] * b[k][col];
    *d[i] += sum;
  }
}

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: D += A B for the calling warp, each
// operand register a float's bits (TF32: low 13 bits zero). Products of TF32 values are exact
// in float; the sum runs in float.
inline void mma_m16n8k8_tf32(float& d0, float& d1, float& d2, float& d3, uint32_t a0, uint32_t a1,
                             uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  const unsigned lane = thread_index.x % 32;
  WarpFragments& f = block->fragments[thread_index.x / 32];
  f.a[lane][0] = a0, f.a[lane][1] = a1, f.a[lane][2] = a2, f.a[lane][3] = a3;
  f.b[lane][0] = b0, f.b[lane][1] = b1;
  sync_warp();
  auto as_float = [](uint32_t bits) {
    if (bits & 0x1fffu) fail("a tf32 mma operand has bits below TF32's mantissa");
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  };
  float a[16][8], b[8][8];
  for (unsigned l = 0; l < 32; ++l) {
    const unsigned group = l >> 2, in_group = l % 4;
    // a0: (g, q), a1: (g + 8, q), a2: (g, q + 4), a3: (g + 8, q + 4)
    a[group][in_group] = as_float(f.a[l][0]);
    a[group + 8][in_group] = as_float(f.a[l][1]);
    a[group][in_group + 4] = as_float(f.a[l][2]);
    a[group + 8][in_group + 4] = as_float(f.a[l][3]);
    // b0: (q, g), b1: (q + 4, g)
    b[in_group][group] = as_float(f.b[l][0]);
    b[in_group + 4][group] = as_float(f.b[l][1]);
  }
  sync_warp();
  float* d[4] = {&d0, &d1, &d2, &d3};
  const unsigned group = lane >> 2, in_group = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const unsigned row = i < 2 ? group : group + 8, col = in_group * 2 + (i & 1);
    float sum = 0.0f;
    for (int k = 0; k < 8; ++k) sum += a[row][k] * b[k][col];
    *d[i] += sum;
  }
}

// cvt.rna.tf32.f32.
inline uint32_t to_tf32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u) {  // inf stays inf; NaN stays a (quiet) NaN
    return (bits & 0x7fffffu) ? (bits | 0x400000u) & 0xffffe000u : bits;
  }
  return (bits + 0x1000u) & 0xffffe000u;  // ties: the magnitude rounds up (away from zero)
}

// ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16 for the calling warp.
template <int N, bool TRANS>
void ldmatrix(const void* row, uint32_t* r0, uint32_t* r1, uint32_t* r2, uint32_t* r3) {
  const unsigned lane = thread_index.x % 32;
  WarpFragments& f = block->fragments[thread_index.x / 32];
  f.rows[lane] = static_cast<const unsigned char*>(row);
  sync_warp();
  uint32_t* out[4] = {r0, r1, r2, r3};
  bool rows_ok = true;
  for (int i = 0; i < 8 * N; ++i) {
    const unsigned char* p = f.rows[i];
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
      fail("ldmatrix row address not 16-byte aligned");
      rows_ok = false;
    }
    if (smem_begin && (p < smem_begin || p + 16 > smem_end)) {
      fail("ldmatrix row outside shared memory");
      rows_ok = false;
    }
  }
  for (int i = 0; i < N && !rows_ok; ++i) *out[i] = 0;
  for (int i = 0; i < N && rows_ok; ++i) {
    uint16_t lo, hi;
    if (!TRANS) {
      // register i: row lane / 4 of matrix i, elements 2 (lane % 4) and + 1
      const unsigned char* p = f.rows[i * 8 + lane / 4];
      std::memcpy(&lo, p + 4 * (lane % 4), 2);
      std::memcpy(&hi, p + 4 * (lane % 4) + 2, 2);
    } else {
      // the transpose's row lane / 4: column lane / 4 of rows 2 (lane % 4) and + 1
      std::memcpy(&lo, f.rows[i * 8 + 2 * (lane % 4)] + 2 * (lane / 4), 2);
      std::memcpy(&hi, f.rows[i * 8 + 2 * (lane % 4) + 1] + 2 * (lane / 4), 2);
    }
    *out[i] = uint32_t(lo) | uint32_t(hi) << 16;
  }
  sync_warp();  // every lane has read the addresses before any lane's next ldmatrix writes them
}

// cp.async.ca.shared.global of BYTES bytes, synchronously.
template <int BYTES>
void cp_async(void* dst, const void* src) {
  if (reinterpret_cast<uintptr_t>(dst) % BYTES || reinterpret_cast<uintptr_t>(src) % BYTES) {
    fail("cp.async address not aligned to its width");
  }
  std::memcpy(dst, src, BYTES);
}

// Runs kernel() for every block of `grid` with `threads` threads (a multiple of 32), or, with
// `only`, for that one block of the grid.
inline void launch(Index3 grid, int threads, const std::function<void()>& kernel,
                   const Index3* only = nullptr) {
  Block b;
  b.all = std::make_unique<std::barrier<>>(threads);
  for (int w = 0; w < threads / 32; ++w) b.warps.push_back(std::make_unique<std::barrier<>>(32));
  b.exchange.assign(size_t(threads), 0.0f);
  b.fragments.resize(size_t(threads / 32));
  block = &b;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      thread_index.x = unsigned(t);
      if (only) {
        block_index = *only;
        kernel();
        return;
      }
      for (unsigned z = 0; z < grid.z; ++z) {
        for (unsigned y = 0; y < grid.y; ++y) {
          for (unsigned x = 0; x < grid.x; ++x) {
            block_index = {x, y, z};
            kernel();
            sync_threads();  // the next block reuses the same shared memory
          }
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  block = nullptr;
}

}  // namespace mj_emulation

#define threadIdx (::mj_emulation::thread_index)
#define blockIdx (::mj_emulation::block_index)
#define __syncthreads() ::mj_emulation::sync_threads()
#define __syncwarp() ::mj_emulation::sync_warp()
#define __shfl_xor_sync(mask, v, lane_mask) ::mj_emulation::shuffle_xor(v, lane_mask)

inline float __uint_as_float(uint32_t bits) {
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
using std::min;
