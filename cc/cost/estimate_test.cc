// Whole-graph estimates on the example: the fused μGraph against its reference.
#include "cc/cost/estimate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "cc/cost/rank.h"
#include "cc/testing/rmsnorm_linear.h"

namespace mj::cost {

using ir::KernelGraph;
using testing::column_split;
using testing::fused_rmsnorm_linear;
using testing::rmsnorm_linear_reference;

namespace {

constexpr double kX = 8 * 4096 * 4, kG = 4096 * 4, kW = 4096.0 * 6144 * 4, kY = 8 * 6144 * 4;

TEST(Estimate, FusedRmsNormLinearBytesAreWOncePlusXPerBlock) {
  const CostEstimate c = estimate(fused_rmsnorm_linear(column_split(96, 32)), Target::cpu_host());
  EXPECT_DOUBLE_EQ(c.bytes_read, kW + 96 * kX + 96 * kG);
  EXPECT_DOUBLE_EQ(c.bytes_written, kY);
  EXPECT_DOUBLE_EQ(c.bytes_from_cache, 95 * (kX + kG));
  EXPECT_EQ(c.blocks, 96);
  EXPECT_DOUBLE_EQ(c.parallel_efficiency, 1);
  // Memory-bound: DRAM streams W, X and g once and the output; the re-reads hit the L3.
  // Each iteration of each block loads [8, 128] of X and [128] of g, continuing 9 rows where
  // the last iteration ended (streams the prefetchers follow: no fixed cost per run); the
  // [128, 64] tile of W is streamed by the matmul, which prefetches its rows
  // (layout::cpu_streams_weight_tile).
  const Target t = Target::cpu_host();
  EXPECT_DOUBLE_EQ(c.seconds, (kW + kX + kG + kY) / t.dram_bandwidth +
                                  95 * (kX + kG) / t.cache_bandwidth + t.custom_call_overhead_s);
}

TEST(Estimate, ReferenceIsTheSumOfItsLibraryKernels) {
  const Target t = Target::cpu_host();
  const CostEstimate c = estimate(rmsnorm_linear_reference(), t);
  EXPECT_DOUBLE_EQ(c.bytes_read, (kX + kG) + (kX + kW));
  EXPECT_DOUBLE_EQ(c.bytes_written, kX + kY);
  EXPECT_EQ(c.blocks, 0);
  EXPECT_DOUBLE_EQ(c.parallel_efficiency, 1);
  // XLA's small-M matmul path: ~18% of FMA peak, and a weight streamed at a fraction of a
  // plain read (target.h); the weight's stream is the longer of the two here.
  const double matmul_compute = 2.0 * 8 * 6144 * 4096 / t.library_small_m_matmul_flops;
  const double matmul_stream = (kX + kW + kY) / t.library_small_m_bandwidth;
  ASSERT_GT(matmul_stream, matmul_compute);
  const double matmul = matmul_stream;
  const double fusion = 2 * kX + kG;
  EXPECT_DOUBLE_EQ(c.seconds, fusion / t.dram_bandwidth + matmul + 2 * t.library_kernel_overhead_s);
  EXPECT_NE(c.breakdown.find("fusion(rms_norm, mul)"), std::string::npos) << c.breakdown;
  EXPECT_NE(c.breakdown.find("matmul"), std::string::npos) << c.breakdown;
}

TEST(Estimate, FusedRanksAheadOfReferenceOnTheCpu) {
  const KernelGraph ref = rmsnorm_linear_reference(),
                    fused = fused_rmsnorm_linear(column_split(96, 32));
  const Target t = Target::cpu_host();
  // More bytes than the reference (X re-read by every block), yet faster: the re-reads come
  // from cache and the fused matmul runs at the generated kernel's rate.
  EXPECT_GT(estimate(fused, t).bytes_read, estimate(ref, t).bytes_read);
  EXPECT_LT(estimate(fused, t).seconds, estimate(ref, t).seconds);
  EXPECT_EQ(rank_by_cost({&ref, &fused}, t), (std::vector<int>{1, 0}));
}

TEST(Estimate, OneBlockRanksBehindAGridThatFillsTheCores) {
  const KernelGraph one = fused_rmsnorm_linear(column_split(1, 32)),
                    two = fused_rmsnorm_linear(column_split(2, 32));
  const Target t = Target::cpu_host();
  const CostEstimate c1 = estimate(one, t), c2 = estimate(two, t);
  EXPECT_DOUBLE_EQ(c1.parallel_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(c2.parallel_efficiency, 1);
  EXPECT_LT(c1.bytes_read, c2.bytes_read);  // one block reads X once, yet it is slower
  EXPECT_GT(c1.seconds, c2.seconds);
  EXPECT_EQ(rank_by_cost({&one, &two}, t), (std::vector<int>{1, 0}));
}

TEST(Estimate, ReplicatingWAcrossTheGridCostsMore) {
  const KernelGraph plain = fused_rmsnorm_linear(column_split(96, 32));
  const KernelGraph w_twice = fused_rmsnorm_linear(column_split(96, 32, /*row_blocks=*/2));
  for (const Target& t : {Target::cpu_host(), Target::h100()}) {
    const CostEstimate a = estimate(plain, t), b = estimate(w_twice, t);
    EXPECT_NEAR(b.bytes_read - a.bytes_read, kW + 96 * kG, 1) << t.name;
    EXPECT_GT(b.seconds, a.seconds) << t.name;  // W is too big for any cache
    EXPECT_EQ(rank_by_cost({&w_twice, &plain}, t), (std::vector<int>{1, 0})) << t.name;
  }
}

TEST(Estimate, GpuSharedMemoryOverflowIsRankedLast) {
  // 6 column blocks: W tiles [128, 1024] f32, double-buffered, ≈ 1 MiB per block.
  const KernelGraph wide = fused_rmsnorm_linear(column_split(6, 32)),
                    narrow = fused_rmsnorm_linear(column_split(96, 32));
  const KernelGraph ref = rmsnorm_linear_reference();
  const Target a100 = Target::a100();
  const CostEstimate c = estimate(wide, a100);
  EXPECT_TRUE(std::isinf(c.seconds));
  EXPECT_NE(c.breakdown.find("exceeds shared memory"), std::string::npos) << c.breakdown;
  EXPECT_TRUE(std::isfinite(estimate(narrow, a100).seconds));
  EXPECT_EQ(rank_by_cost({&wide, &ref, &narrow}, a100).back(), 0);
  // The same tiles are fine on the CPU, where only their speed is modeled.
  EXPECT_TRUE(std::isfinite(estimate(wide, Target::cpu_host()).seconds));
}

TEST(Estimate, RejectsAnUnusableTarget) {
  Target t = Target::cpu_host();
  t.peak_flops = 0;
  EXPECT_THROW(estimate(rmsnorm_linear_reference(), t), std::invalid_argument);
}

}  // namespace
}  // namespace mj::cost
