#include "cc/cost/roofline.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cc/cost/cpu_vector_cost.h"

namespace mj::cost {
namespace {

bool library_small_m(const KernelWork& w, const Target& t) {
  return w.kind == KernelKind::kLibraryMatmul && w.matmul_rows > 0 &&
         w.matmul_rows <= t.library_small_m_rows;
}

// One-row dots are XLA's GEMV, which shards its weight over more tasks than cores: it streams
// at the split rate (x[1, 4096] @ w[4096, 11008]: 6.6 ms, a generated product over 2 blocks
// 5.9-6.0, over 16 or 64 blocks 6.2-6.4; benchmarks/gemv_tiles.py).
double dram_seconds(const KernelWork& w, const Target& t, double bytes) {
  const bool slow_stream =
      library_small_m(w, t) && w.matmul_rows > 1 && t.library_small_m_bandwidth > 0;
  if (slow_stream) return bytes / t.library_small_m_bandwidth;
  const bool split_stream = t.kind == TargetKind::kCpu && t.split_stream_bandwidth > 0 &&
                            ((w.kind == KernelKind::kCustomized && w.blocks > t.parallel_units()) ||
                             (w.kind == KernelKind::kLibraryMatmul && w.matmul_rows == 1));
  return bytes / (split_stream ? t.split_stream_bandwidth : t.dram_bandwidth);
}

// Rows of C up to which the generated CPU matmul streams B's rows as vectors along n
// whatever n is (cc/codegen/cpu/prelude.cc, kMaxPanelRows and matmul_group).
constexpr double kPanelRows = 8;

// The flops a CPU's vector instructions do beyond 2mnk on the generated matmuls' tiles: each
// vector FMA (or shuffle) counted as the 2·lanes flops it could have done, and B's packing
// when more than kPanelRows rows share it (cpu_vector_cost.h, kPackedElementFlops). Vectors lie
// along n, the last one partly empty; when n is under a vector (and there are more than kPanelRows
// rows, or n is under half a vector), along k instead, each row ending in a tree of shuffles and
// adds across the lanes (lane_sums: 3 ops per pair of vectors, for 4 columns or more; below that
// one scalar add per lane and column).
double vector_padding_flops(const KernelWork& w, const Target& t) {
  if (t.kind != TargetKind::kCpu || t.vector_width_floats <= 0) return 0;
  const double lanes = t.vector_width_floats;
  double extra = 0;
  for (const KernelWork::MatmulTile& mm : w.matmul_tiles) {
    if (mm.bf16_weight && t.generated_bf16_flops > 0) continue;  // priced at their own rates
    const bool along_k = mm.n <= lanes && (mm.m > kPanelRows || 2 * mm.n < lanes);
    double vector_ops;
    if (along_k) {
      const double lane_sums = mm.n >= 4 ? 3 * (lanes - 1) : lanes * mm.n;
      vector_ops = mm.m * (mm.n * std::ceil(mm.k / lanes) + lane_sums);
    } else {
      vector_ops = mm.m * mm.k * std::ceil(mm.n / lanes);
    }
    const double packing = !along_k && mm.m > kPanelRows ? kPackedElementFlops * mm.k * mm.n : 0;
    extra += (std::max(0.0, 2 * lanes * vector_ops - 2 * mm.m * mm.k * mm.n) + packing) * mm.count;
  }
  return extra;
}

// A generated kernel's products with a bfloat16 B at the rates measured for them, the rest
// of its flops at generated_flops.
double generated_seconds(const KernelWork& w, const Target& t, double flops) {
  if (t.generated_bf16_flops <= 0) return flops / t.generated_flops;
  const double f32_a_rate =
      t.generated_f32_bf16_flops > 0 ? t.generated_f32_bf16_flops : t.generated_bf16_flops;
  const double rest = flops - w.bf16_weight_matmul_flops - w.f32_bf16_weight_matmul_flops;
  return rest / t.generated_flops + w.bf16_weight_matmul_flops / t.generated_bf16_flops +
         w.f32_bf16_weight_matmul_flops / f32_a_rate;
}

double compute_seconds(const KernelWork& w, const Target& t) {
  if (t.kind == TargetKind::kGpu) {
    return w.low_precision_matmul_flops / t.tensor_core_flops +
           (w.flops - w.low_precision_matmul_flops) / t.peak_flops;
  }
  const bool customized = w.kind == KernelKind::kCustomized;
  const double cpu_flops = w.flops + w.cpu_extra_flops;
  const double flops = customized ? cpu_flops + vector_padding_flops(w, t) : cpu_flops;
  if (customized && t.generated_flops > 0) {
    return generated_seconds(w, t, flops) + w.on_chip_copy_bytes / t.cache_bandwidth;
  }
  return flops / (library_small_m(w, t) ? t.library_small_m_matmul_flops : t.peak_flops);
}

double waves_efficiency(int64_t blocks, int units) {
  const double per_unit = double(blocks) / units;
  return per_unit / std::ceil(per_unit);
}

// Blocks run on parallel units, each with its own TLB: the walks of all blocks' loads are
// shared among the units.
double page_walk_seconds(const KernelWork& w, const Target& t) {
  if (t.kind != TargetKind::kCpu || t.tlb_entries <= 0) return 0;
  double walks = 0;
  for (const auto& [pages, loads] : w.paged_loads) {
    if (pages > t.tlb_entries) walks += pages * loads;
  }
  return walks * t.page_walk_s / t.parallel_units();
}

double run_seconds(const KernelWork& w, const Target& t) {
  if (t.kind != TargetKind::kCpu) return 0;
  return w.runs_loaded * t.run_overhead_s / t.parallel_units();
}

}  // namespace

KernelTime kernel_time(const KernelWork& w, const Target& t) {
  KernelTime k;
  const double reuse_capacity = 0.5 * double(t.last_level_cache_bytes);
  for (const ReplicatedRead& r : w.replicated) {
    if (r.tensor_bytes <= reuse_capacity) k.cached_bytes += r.reread_bytes;
  }
  k.dram_bytes = w.bytes_read + w.bytes_written - k.cached_bytes;
  // XLA widens a 16-bit operand in a loop of its own before the dot (2 bytes read and 4
  // written per element), which nothing overlaps; the dot then reads the float32 copy in
  // place of the original. benchmarks/widened_dots.py: widening a [1024, 1024] and a
  // [1024, 2816] bfloat16 weight alone took 0.25 and 0.70 ms, this pass at 27.6 GB/s 0.23 and
  // 0.63 ms. (A [1024, 8192] one took 10 ms: the machine's cost of the new buffer, which no
  // rate here predicts; superoptimize times a generated product beside such dots.)
  double widening_bytes = 0;
  if (w.kind == KernelKind::kLibraryMatmul && t.library_widens_16_bit) {
    widening_bytes = 3 * w.bytes_16_bit_operands;
    k.dram_bytes += 4 * w.bytes_16_bit_operands;  // the float32 copy: written, then read
  }
  const double widening_s = widening_bytes / t.dram_bandwidth;
  k.memory_s = dram_seconds(w, t, k.dram_bytes - widening_bytes) + widening_s +
               k.cached_bytes / t.cache_bandwidth + page_walk_seconds(w, t) + run_seconds(w, t);
  k.compute_s = compute_seconds(w, t);
  const bool customized = w.kind == KernelKind::kCustomized;
  if (customized && w.blocks > 0) {
    k.parallel_efficiency = waves_efficiency(w.blocks, t.parallel_units());
  }
  k.overhead_s = customized ? t.custom_call_overhead_s : t.library_kernel_overhead_s;
  if (customized && t.kind == TargetKind::kCpu && w.blocks > 0) {
    k.overhead_s += std::ceil(double(w.blocks) / t.parallel_units()) * t.block_overhead_s;
  }
  k.fits = !(customized && t.kind == TargetKind::kGpu &&
             w.working_set_bytes > double(t.shared_memory_per_block));
  // On a CPU the generated code's re-reads from the cache and its tile copies are loads and
  // stores the core issues between its arithmetic, not a stream beside it: they add to the
  // compute. Copies run at about the rate of a stream from memory: masked attention's
  // two-kernel forms, whose second kernel copies the score tiles the first one wrote, ran
  // 1.2x the one-kernel forms that the model had costed 1% slower
  // (benchmarks/ranking_replay.py, three timings of the same candidates).
  const double serial_s = widening_s + (customized && t.kind == TargetKind::kCpu
                                            ? k.cached_bytes / t.cache_bandwidth +
                                                  w.copied_tile_bytes / t.dram_bandwidth
                                            : 0);
  // The arena passes of KernelWork::arena_pass_bytes take turns with the products.
  const double arena_s =
      customized && t.kind == TargetKind::kCpu ? w.arena_pass_bytes / t.cache_bandwidth : 0;
  const double overlapped_s = std::max(k.memory_s - serial_s, k.compute_s) + serial_s + arena_s;
  k.seconds = k.fits ? overlapped_s / k.parallel_efficiency + k.overhead_s
                     : std::numeric_limits<double>::infinity();
  return k;
}

}  // namespace mj::cost
