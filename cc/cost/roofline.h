#pragma once
// One kernel's time on a target:
//   memory  = DRAM bytes / dram_bandwidth + cached bytes / cache_bandwidth, where the cached
//             bytes are the re-reads of replicated inputs whose whole tensor fits in half the
//             last-level cache, and DRAM bytes are everything else read or written;
//   compute = flops / the rate of the unit doing them: peak_flops, except low-precision
//             matmul flops on a GPU (tensor_core_flops) and a small-M library matmul
//             (library_small_m_matmul_flops); on a CPU a generated kernel's is
//             flops / generated_flops + the bytes its block-level concats copy /
//             cache_bandwidth (the core copies instead of computing);
//   seconds = max(memory, compute) / parallel_efficiency + the kernel's fixed overhead,
//             except that a generated CPU kernel's cached bytes add to the max instead of
//             overlapping it (its cores issue those loads between their FMAs: an attention
//             kernel whose 16-row query tiles re-read K and V from the cache 8x as often as
//             128-row tiles ran longer by about those bytes at the cache rate, at the same
//             flops); CPU compute also counts KernelWork::cpu_extra_flops.
// parallel_efficiency is 1 for library kernels (XLA spreads them itself). A customized op
// spreads its B blocks over U parallel units (cores, SMs) in waves:
//   efficiency = (B / U) / ceil(B / U),
// so one block on two cores runs at 1/2 and 96 blocks on 108 SMs at 96/108.
// A customized op whose block working set exceeds the GPU's shared memory per block cannot
// launch: its seconds are +infinity (ranked after every graph that can run), and `fits` says
// why. CPU tiles that outgrow the caches are not penalized (a known gap).
#include "cc/cost/kernel_work.h"
#include "cc/cost/target.h"

namespace mj::cost {

struct KernelTime {
  double dram_bytes = 0;
  double cached_bytes = 0;
  double memory_s = 0;
  double compute_s = 0;
  double parallel_efficiency = 1;
  double overhead_s = 0;
  bool fits = true;
  double seconds = 0;  // +infinity when !fits
};

// t must pass check_target (estimate and rank_by_cost check it).
KernelTime kernel_time(const KernelWork& w, const Target& t);

}  // namespace mj::cost
