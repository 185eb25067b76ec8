// kernel_time: the roofline, wave efficiency, cached re-reads and the shared-memory limit.
#include "cc/cost/roofline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "cc/cost/cpu_vector_cost.h"

namespace mj::cost {
namespace {

KernelWork library_matmul(int64_t rows, double bytes_read) {
  KernelWork w;
  w.kind = KernelKind::kLibraryMatmul;
  w.matmul_rows = rows;
  w.bytes_read = bytes_read;
  return w;
}

KernelWork customized(int64_t blocks, double bytes_read, double flops) {
  KernelWork w;
  w.kind = KernelKind::kCustomized;
  w.blocks = blocks;
  w.bytes_read = bytes_read;
  w.flops = flops;
  return w;
}

TEST(Roofline, MemoryBoundTimeIsBytesOverBandwidthPlusDispatch) {
  const Target cpu = Target::cpu_host();
  const KernelTime k = kernel_time(customized(2, 21e6, 1e6), cpu);
  EXPECT_DOUBLE_EQ(k.memory_s, 1e-3);
  EXPECT_DOUBLE_EQ(k.compute_s, 1e6 / 120e9);
  EXPECT_DOUBLE_EQ(k.parallel_efficiency, 1);
  EXPECT_DOUBLE_EQ(k.seconds, 1e-3 + 35e-6);
}

TEST(Roofline, WavesLeaveUnitsIdle) {
  const Target cpu = Target::cpu_host();
  EXPECT_DOUBLE_EQ(kernel_time(customized(1, 21e6, 0), cpu).parallel_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(kernel_time(customized(3, 21e6, 0), cpu).parallel_efficiency, 0.75);
  EXPECT_DOUBLE_EQ(kernel_time(customized(96, 21e6, 0), cpu).parallel_efficiency, 1);
  EXPECT_DOUBLE_EQ(kernel_time(customized(1, 21e6, 0), cpu).seconds, 2e-3 + 35e-6);
  EXPECT_DOUBLE_EQ(kernel_time(customized(96, 1, 0), Target::a100()).parallel_efficiency,
                   96.0 / 108);
  EXPECT_DOUBLE_EQ(kernel_time(customized(109, 1, 0), Target::a100()).parallel_efficiency,
                   109.0 / 216);
}

TEST(Roofline, LibraryKernelsUseTheWholeMachine) {
  KernelWork w;
  w.kind = KernelKind::kLibraryFusion;
  w.bytes_read = 21e6;
  const KernelTime k = kernel_time(w, Target::cpu_host());
  EXPECT_DOUBLE_EQ(k.parallel_efficiency, 1);
  EXPECT_DOUBLE_EQ(k.seconds, 1e-3 + 2e-6);
}

// A generated CPU kernel's cores issue its cache re-reads between their FMAs: those add to
// a compute-bound kernel's time; on a GPU they overlap it.
TEST(Roofline, CpuCacheReReadsAddToComputeAndGpuOnesOverlapIt) {
  KernelWork w = customized(2, 2e6, 240e6);  // 1 MB tensor read twice: 1 MB of re-reads
  w.replicated.push_back({1e6, 1e6});
  const Target cpu = Target::cpu_host();
  const KernelTime k = kernel_time(w, cpu);
  ASSERT_DOUBLE_EQ(k.cached_bytes, 1e6);
  ASSERT_GT(k.compute_s, k.memory_s);
  EXPECT_DOUBLE_EQ(k.seconds, k.compute_s + 1e6 / cpu.cache_bandwidth + k.overhead_s);
  const Target gpu = Target::a100();
  const KernelTime g = kernel_time(w, gpu);
  EXPECT_DOUBLE_EQ(g.seconds,
                   std::max(g.memory_s, g.compute_s) / g.parallel_efficiency + g.overhead_s);
}

// Tiles the generated CPU code copies into its arena cost their bytes at the memory's rate
// besides the compute; read in place, the same bytes overlap it. A GPU counts no copies.
TEST(Roofline, CpuTileCopiesAddToComputeAtTheMemoryRate) {
  KernelWork w = customized(2, 30e6, 2.4e9);
  const Target cpu = Target::cpu_host();
  const KernelTime in_place = kernel_time(w, cpu);
  ASSERT_GT(in_place.compute_s, in_place.memory_s);
  EXPECT_DOUBLE_EQ(in_place.seconds, in_place.compute_s + in_place.overhead_s);
  w.copied_tile_bytes = 12e6;
  const KernelTime copied = kernel_time(w, cpu);
  EXPECT_DOUBLE_EQ(copied.seconds,
                   in_place.compute_s + 12e6 / cpu.dram_bandwidth + copied.overhead_s);
  // memory-bound, a copy's bytes were on the clock already
  KernelWork streamed = customized(2, 3e9, 2.4e6);
  const double before = kernel_time(streamed, cpu).seconds;
  streamed.copied_tile_bytes = 1e9;
  EXPECT_DOUBLE_EQ(kernel_time(streamed, cpu).seconds, before);
  const Target gpu = Target::a100();
  EXPECT_DOUBLE_EQ(kernel_time(w, gpu).seconds,
                   kernel_time(customized(2, 30e6, 2.4e9), gpu).seconds);
}

TEST(Roofline, SmallReplicatedTensorsAreReReadFromCache) {
  const Target cpu = Target::cpu_host();
  KernelWork w = customized(96, 0, 0);
  w.bytes_read = 96 * 131072.0;
  w.replicated = {{131072.0, 95 * 131072.0}};
  KernelTime k = kernel_time(w, cpu);
  EXPECT_DOUBLE_EQ(k.cached_bytes, 95 * 131072.0);
  EXPECT_DOUBLE_EQ(k.dram_bytes, 131072.0);
  EXPECT_DOUBLE_EQ(k.memory_s, 131072.0 / 21e9 + 95 * 131072.0 / 150e9);
  // A tensor larger than half the last-level cache comes from DRAM every time.
  const double big = 100e6;
  w.bytes_read = 2 * big;
  w.replicated = {{big, big}};
  k = kernel_time(w, cpu);
  EXPECT_DOUBLE_EQ(k.cached_bytes, 0);
  EXPECT_DOUBLE_EQ(k.dram_bytes, 2 * big);
}

TEST(Roofline, SmallMLibraryMatmulRunsAtTheLibraryRate) {
  const Target cpu = Target::cpu_host();
  KernelWork w;
  w.kind = KernelKind::kLibraryMatmul;
  w.flops = 1e9;
  w.matmul_rows = 8;
  EXPECT_DOUBLE_EQ(kernel_time(w, cpu).compute_s, 1e9 / (0.18 * 192e9));
  w.matmul_rows = 512;
  EXPECT_DOUBLE_EQ(kernel_time(w, cpu).compute_s, 1e9 / 120e9);
  // Generated kernels are not subject to it.
  KernelWork c = customized(2, 0, 1e9);
  EXPECT_DOUBLE_EQ(kernel_time(c, cpu).compute_s, 1e9 / 120e9);
}

TEST(Roofline, SmallMLibraryMatmulStreamsAtTheLibraryBandwidth) {
  const Target cpu = Target::cpu_host();
  KernelWork w = library_matmul(8, 64e6);
  EXPECT_DOUBLE_EQ(kernel_time(w, cpu).memory_s, 64e6 / 6.4e9);
  // XLA's one-row GEMV and its large dots stream at the full rate.
  w.matmul_rows = 1;
  EXPECT_DOUBLE_EQ(kernel_time(w, cpu).memory_s, 64e6 / 21e9);
  w.matmul_rows = 512;
  EXPECT_DOUBLE_EQ(kernel_time(w, cpu).memory_s, 64e6 / 21e9);
  // So does a generated product of 8 rows.
  KernelWork c = customized(2, 64e6, 0);
  EXPECT_DOUBLE_EQ(kernel_time(c, cpu).memory_s, 64e6 / 21e9);
  // 0: not modeled, the plain stream.
  Target unmodeled = cpu;
  unmodeled.library_small_m_bandwidth = 0;
  w.matmul_rows = 8;
  EXPECT_DOUBLE_EQ(kernel_time(w, unmodeled).memory_s, 64e6 / 21e9);
}

TEST(Roofline, AStreamSplitOverMoreBlocksThanCoresRunsAtItsOwnRate) {
  Target cpu = Target::cpu_host();  // 2 cores, 21 GB/s
  cpu.split_stream_bandwidth = 20e9;
  EXPECT_DOUBLE_EQ(kernel_time(customized(2, 60e6, 0), cpu).memory_s, 60e6 / 21e9);
  EXPECT_DOUBLE_EQ(kernel_time(customized(3, 60e6, 0), cpu).memory_s, 60e6 / 20e9);
  EXPECT_DOUBLE_EQ(kernel_time(customized(64, 60e6, 0), cpu).memory_s, 60e6 / 20e9);
  // One core: two blocks are already two strips in turn.
  Target one = cpu;
  one.cores = 1;
  EXPECT_DOUBLE_EQ(kernel_time(customized(2, 60e6, 0), one).memory_s, 60e6 / 20e9);
  // XLA's one-row dot shards its weight too; its large dots stream at the full rate; 0 is
  // not modeled; GPUs spread blocks over SMs, not strips.
  EXPECT_DOUBLE_EQ(kernel_time(library_matmul(1, 60e6), cpu).memory_s, 60e6 / 20e9);
  EXPECT_DOUBLE_EQ(kernel_time(library_matmul(512, 60e6), cpu).memory_s, 60e6 / 21e9);
  Target unmodeled = cpu;
  unmodeled.split_stream_bandwidth = 0;
  EXPECT_DOUBLE_EQ(kernel_time(customized(64, 60e6, 0), unmodeled).memory_s, 60e6 / 21e9);
  Target gpu = Target::h100();
  gpu.split_stream_bandwidth = gpu.dram_bandwidth / 2;
  EXPECT_DOUBLE_EQ(kernel_time(customized(1000, 60e6, 0), gpu).memory_s, 60e6 / gpu.dram_bandwidth);
}

TEST(Roofline, CpuLibraryMatmulWidensSixteenBitOperandsInMemory) {
  const Target cpu = Target::cpu_host();
  KernelWork w = library_matmul(512, 10e6);
  w.bytes_16_bit_operands = 8e6;
  EXPECT_DOUBLE_EQ(kernel_time(w, cpu).dram_bytes, 10e6 + 4 * 8e6);
  // A generated kernel widens its tiles in registers; a GPU library takes them as they are.
  KernelWork c = customized(2, 10e6, 0);
  c.bytes_16_bit_operands = 8e6;
  EXPECT_DOUBLE_EQ(kernel_time(c, cpu).dram_bytes, 10e6);
  EXPECT_DOUBLE_EQ(kernel_time(w, Target::h100()).dram_bytes, 10e6);
}

TEST(Roofline, CpuLibraryWideningIsAPassBeforeTheDot) {
  const Target cpu = Target::cpu_host();
  // Compute-bound: the widening (2 bytes read, 4 written per element) adds to the dot's time.
  KernelWork w = library_matmul(512, 10e6);
  w.bytes_16_bit_operands = 8e6;
  w.flops = 100 * cpu.peak_flops * 1e-3;
  const KernelTime k = kernel_time(w, cpu);
  EXPECT_DOUBLE_EQ(k.seconds, 0.1 + 3 * 8e6 / cpu.dram_bandwidth + k.overhead_s);
  // Memory-bound: every byte once, at the stream's rate, as before.
  w.flops = 0;
  EXPECT_NEAR(kernel_time(w, cpu).seconds, (10e6 + 4 * 8e6) / cpu.dram_bandwidth + k.overhead_s,
              1e-12);
}

TEST(Roofline, GpuLowPrecisionMatmulRunsOnTensorCores) {
  const Target h100 = Target::h100();
  KernelWork w = customized(132, 0, 3e12);
  w.low_precision_matmul_flops = 2e12;
  EXPECT_DOUBLE_EQ(kernel_time(w, h100).compute_s, 2e12 / 989e12 + 1e12 / 67e12);
}

TEST(Roofline, BlockOverflowingSharedMemoryCannotRunOnGpu) {
  KernelWork w = customized(132, 1e6, 0);
  w.working_set_bytes = 227 << 10;
  EXPECT_TRUE(kernel_time(w, Target::h100()).fits);
  EXPECT_TRUE(std::isfinite(kernel_time(w, Target::h100()).seconds));
  w.working_set_bytes += 1;
  const KernelTime k = kernel_time(w, Target::h100());
  EXPECT_FALSE(k.fits);
  EXPECT_TRUE(std::isinf(k.seconds));
  EXPECT_FALSE(kernel_time(w, Target::a100()).fits);  // 163 KiB there
  // A CPU has no such hard limit.
  EXPECT_TRUE(kernel_time(w, Target::cpu_host()).fits);
}

TEST(Roofline, GeneratedKernelsComputeAtTheirOwnRate) {
  Target cpu = Target::cpu_host();
  cpu.generated_flops = 60e9;  // a calibration: generated loops at half the library's rate
  EXPECT_DOUBLE_EQ(kernel_time(customized(2, 0, 6e9), cpu).compute_s, 0.1);
  KernelWork library;
  library.kind = KernelKind::kLibraryMatmul;
  library.flops = 6e9;
  library.matmul_rows = 1024;
  EXPECT_DOUBLE_EQ(kernel_time(library, cpu).compute_s, 6e9 / 120e9);
}

TEST(Roofline, ProductsWithABfloat16WeightComputeAtTheirOwnRates) {
  Target cpu = Target::cpu_host();
  cpu.generated_flops = 100e9;
  cpu.vector_width_floats = 16;
  KernelWork w = customized(2, 0, 10e9);
  w.matmul_tiles.push_back({256, 1024, 512, 10e9 / (2.0 * 256 * 1024 * 512), true});
  w.bf16_weight_matmul_flops = 6e9;
  w.f32_bf16_weight_matmul_flops = 2e9;
  cpu.generated_bf16_flops = 1200e9;
  cpu.generated_f32_bf16_flops = 400e9;
  // No packing or lane flops for the tile products: their rates include them.
  EXPECT_DOUBLE_EQ(kernel_time(w, cpu).compute_s, 2e9 / 100e9 + 6e9 / 1200e9 + 2e9 / 400e9);
  // Without a float32-x rate, the bfloat16 one.
  cpu.generated_f32_bf16_flops = 0;
  EXPECT_DOUBLE_EQ(kernel_time(w, cpu).compute_s, 2e9 / 100e9 + 8e9 / 1200e9);
  // Uncalibrated: every flop at generated_flops, the tiles' vector padding included.
  cpu.generated_bf16_flops = 0;
  EXPECT_GT(kernel_time(w, cpu).compute_s, 10e9 / 100e9);
  // A negative or NaN rate is refused, named.
  cpu.generated_bf16_flops = -1;
  EXPECT_THROW(check_target(cpu), std::invalid_argument);
  cpu.generated_bf16_flops = 0;
  cpu.generated_f32_bf16_flops = std::nan("");
  EXPECT_THROW(check_target(cpu), std::invalid_argument);
}

TEST(Roofline, OnChipCopiesTakeCpuTimeAtTheCacheBandwidth) {
  Target cpu = Target::cpu_host();
  cpu.generated_flops = 60e9;
  KernelWork w = customized(2, 0, 6e9);
  w.on_chip_copy_bytes = 15e9;  // 0.1 s at 150 GB/s
  EXPECT_DOUBLE_EQ(kernel_time(w, cpu).compute_s, 0.1 + 15e9 / cpu.cache_bandwidth);
  // the GPU model has no on-chip copy term (shared memory's bandwidth is not in Target)
  const Target gpu = Target::a100();
  EXPECT_DOUBLE_EQ(kernel_time(w, gpu).compute_s,
                   kernel_time(customized(2, 0, 6e9), gpu).compute_s);
}

// A memory-bound kernel's arena passes do not hide under its stream; a GPU has none.
TEST(Roofline, CpuArenaPassesAddToTheStreamAtTheCacheBandwidth) {
  const Target cpu = Target::cpu_host();
  KernelWork w = customized(2, 3e9, 2.4e6);
  const KernelTime streamed = kernel_time(w, cpu);
  ASSERT_GT(streamed.memory_s, streamed.compute_s);
  w.arena_pass_bytes = 3e9;
  EXPECT_DOUBLE_EQ(kernel_time(w, cpu).seconds,
                   streamed.seconds + 3e9 / cpu.cache_bandwidth / streamed.parallel_efficiency);
  const Target gpu = Target::a100();
  EXPECT_DOUBLE_EQ(kernel_time(w, gpu).seconds,
                   kernel_time(customized(2, 3e9, 2.4e6), gpu).seconds);
}

// A customized kernel of one matmul tile [m, k] @ [k, n], run `count` times in all.
KernelWork one_matmul(double m, double k, double n, double count) {
  KernelWork w = customized(2, 0, 2 * m * k * n * count);
  w.matmul_tiles.push_back({m, k, n, count});
  return w;
}

TEST(Roofline, ACpusEmptyVectorLanesAndLaneSumsCostAsFlops) {
  Target cpu = Target::cpu_host();
  cpu.generated_flops = 200e9;
  cpu.vector_width_floats = 16;
  // Vectors along n, full: no more than 2mnk for 8 rows of C, which stream B; more rows
  // share B's packed strips, which cost kPackedElementFlops per element of B per product.
  const KernelWork streamed = one_matmul(8, 1024, 512, 2);
  EXPECT_DOUBLE_EQ(kernel_time(streamed, cpu).compute_s, streamed.flops / 200e9);
  for (double m : {9.0, 256.0}) {
    const KernelWork w = one_matmul(m, 1024, 512, 2);
    EXPECT_DOUBLE_EQ(kernel_time(w, cpu).compute_s,
                     (w.flops + 2 * kPackedElementFlops * 1024 * 512) / 200e9)
        << m;
  }
  // 40 columns: three vectors, the last half empty.
  const KernelWork ragged = one_matmul(8, 64, 40, 1);
  EXPECT_DOUBLE_EQ(kernel_time(ragged, cpu).compute_s, 2.0 * 8 * 64 * 48 / 200e9);
  // GPT-2's tied-logits tile walked 16 values of k at a time: per row, 8 vector FMAs along
  // k and a lane-sum tree of 45 shuffles and adds, each worth 32 flops.
  const KernelWork narrow_k = one_matmul(4096, 16, 8, 48);
  EXPECT_DOUBLE_EQ(kernel_time(narrow_k, cpu).compute_s, 48 * 4096 * 32 * (8 + 45) / 200e9);
  // The same product with all of k per tile: the tree once per row, 48 vectors of k.
  const KernelWork whole_k = one_matmul(4096, 768, 8, 1);
  EXPECT_DOUBLE_EQ(kernel_time(whole_k, cpu).compute_s, 4096 * 32 * (8 * 48 + 45) / 200e9);
  EXPECT_GT(kernel_time(narrow_k, cpu).compute_s, 5 * kernel_time(whole_k, cpu).compute_s);
  // Uncalibrated, the presets' matmul rate prices the same lanes.
  Target presets = cpu;
  presets.generated_flops = 0;
  EXPECT_DOUBLE_EQ(kernel_time(narrow_k, presets).compute_s,
                   48 * 4096 * 32 * (8 + 45) / presets.peak_flops);
  // Without a vector width (a GPU, or a target that does not say) the tiles add nothing.
  cpu.vector_width_floats = 0;
  EXPECT_DOUBLE_EQ(kernel_time(narrow_k, cpu).compute_s, narrow_k.flops / 200e9);
}

TEST(Roofline, EachWaveOfBlocksPaysTheBlockOverhead) {
  Target cpu = Target::cpu_host();
  cpu.block_overhead_s = 1e-6;
  // 64 blocks on 2 cores: 32 after each other on each core.
  EXPECT_DOUBLE_EQ(kernel_time(customized(64, 0, 0), cpu).overhead_s, 35e-6 + 32e-6);
  EXPECT_DOUBLE_EQ(kernel_time(customized(3, 0, 0), cpu).overhead_s, 35e-6 + 2e-6);
}

TEST(Roofline, ATargetWithANegativeOrNaNOverheadIsRefused) {
  Target cpu = Target::cpu_host();
  cpu.block_overhead_s = std::nan("");
  EXPECT_THROW(check_target(cpu), std::invalid_argument);
  cpu.block_overhead_s = 0;
  cpu.generated_flops = -1;
  EXPECT_THROW(check_target(cpu), std::invalid_argument);
}

}  // namespace
}  // namespace mj::cost
