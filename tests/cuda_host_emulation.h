// Runs generated CUDA kernels (cc/codegen/cuda) on the host, for machines without a GPU: one
// std::thread per CUDA thread, blocks of the grid one after another, __syncthreads and the
// warp primitives as barriers. __CUDA_ARCH__ is undefined here, so the kernels take their
// portable paths: FMA matmuls instead of mma.sync and plain copies instead of cp.async. What
// this checks is the generator's semantics (indexing, tiling, phases, barriers, reductions,
// online softmax, dtype conversions) against the interpreter; tests/gpu checks the tensor-core
// and cp.async paths on a real GPU.
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
#include <vector>

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

struct Block {
  std::unique_ptr<std::barrier<>> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<float> exchange;  // one slot per thread, for shuffles
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

// Runs kernel() for every block of `grid` with `threads` threads (a multiple of 32).
inline void launch(Index3 grid, int threads, const std::function<void()>& kernel) {
  Block b;
  b.all = std::make_unique<std::barrier<>>(threads);
  for (int w = 0; w < threads / 32; ++w) b.warps.push_back(std::make_unique<std::barrier<>>(32));
  b.exchange.assign(size_t(threads), 0.0f);
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
