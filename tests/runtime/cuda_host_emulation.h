// Runs generated CUDA kernels (cc/codegen/cuda) on the host, for machines without a GPU: one
// std::thread per CUDA thread, blocks of the grid one after another, __syncthreads and the
// warp primitives as barriers. __CUDA_ARCH__ is undefined here, so the kernels copy tiles with
// plain loads instead of cp.async. What
// this checks is the generator's semantics (indexing, tiling, phases, barriers, reductions,
// online softmax, dtype conversions) against the interpreter; tests/gpu checks the tensor-core
// and cp.async paths on a real GPU. The warp's mma.sync is emulated too (MJ_CUDA_EMULATE_MMA):
// each lane hands in its fragments, the tile is rebuilt from the PTX ISA's fragment layout
// ("Matrix Fragments for mma.m16n8k16 with floating point type") and multiplied, so the
// generator's fragment indexing is checked here; only the hardware instruction is not.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <barrier>
#include <cmath>
#include <cstdint>
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
};

struct Block {
  std::unique_ptr<std::barrier<>> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<float> exchange;           // one slot per thread, for shuffles
  std::vector<WarpFragments> fragments;  // one per warp, for mma
};
inline Block* block = nullptr;

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

// Runs kernel() for every block of `grid` with `threads` threads (a multiple of 32).
inline void launch(Index3 grid, int threads, const std::function<void()>& kernel) {
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
