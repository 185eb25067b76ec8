// The CPU's vector-code costs beyond op_flops: exps and row folds of an online softmax,
// shared by the accumulators of one score tile, and counted by CPU targets only.
#include "cc/cost/cpu_vector_cost.h"

#include <gtest/gtest.h>

#include "cc/cost/block_graph_work.h"
#include "cc/cost/roofline.h"
#include "cc/cost/target.h"

namespace mj::cost {

using ir::BlockGraph;
using ir::DType;
using ir::OpKind;

namespace {

// softmax(S) @ V over S[16, 1024], V[1024, 64]: one block per 8 rows, the keys walked
// `key_tile` at a time.
std::unique_ptr<BlockGraph> online_softmax(int key_tile, bool with_sum = true) {
  auto bg = std::make_unique<BlockGraph>(ir::Dim3{2, 1, 1}, 1024 / key_tile);
  const int s = bg->new_input({16, 1024}, DType::kF32, {0, -1, -1}, 1);
  const int v = bg->new_input({1024, 64}, DType::kF32, {-1, -1, -1}, 0);
  const int o = bg->accum_exp_matmul(s, v);
  const int y = with_sum ? bg->binary(OpKind::kDiv, o, bg->accum(OpKind::kAccumExpSumLast, s)) : o;
  bg->new_output(y, {0, -1, -1}, DType::kF32);
  return bg;
}

TEST(CpuVectorCost, AnOnlineSoftmaxPaysItsExpsOnceAndAFoldPerRowAndReduction) {
  const double scores = 16.0 * 1024, rows_steps = 16.0 * 1024 / 128;
  const double max_and_exps = scores * (kExpFlops + kRowElementFlops) + rows_steps * kRowFoldFlops;
  const double sum = scores * kRowElementFlops + rows_steps * kRowFoldFlops;
  // The division of [8, 64] by the sums, once per block in the epilogue.
  const double divide = 16.0 * 64 * cpu_extra_element_flops(OpKind::kDiv, true);
  EXPECT_DOUBLE_EQ(block_graph_work(*online_softmax(128, false)).cpu_extra_flops, max_and_exps);
  EXPECT_DOUBLE_EQ(block_graph_work(*online_softmax(128)).cpu_extra_flops,
                   max_and_exps + sum + divide);
}

// accum_max_last first (it takes no exps), then the exps' accumulators: one running max,
// one pass of exps.
TEST(CpuVectorCost, AMaxBeforeTheSoftmaxAccumulatorsLeavesTheirExpsCountedOnce) {
  BlockGraph bg(ir::Dim3{2, 1, 1}, 8);
  const int s = bg.new_input({16, 1024}, DType::kF32, {0, -1, -1}, 1);
  const int v = bg.new_input({1024, 64}, DType::kF32, {-1, -1, -1}, 0);
  bg.new_output(bg.accum(OpKind::kAccumMaxLast, s), {0, -1, -1}, DType::kF32);
  bg.new_output(bg.accum_exp_matmul(s, v), {0, -1, -1}, DType::kF32);
  const double scores = 16.0 * 1024, rows_steps = 16.0 * 1024 / 128;
  EXPECT_DOUBLE_EQ(block_graph_work(bg).cpu_extra_flops,
                   scores * (kExpFlops + kRowElementFlops) + rows_steps * kRowFoldFlops);
}

TEST(CpuVectorCost, ShortKeyTilesFoldMoreRowsAndCostMoreOnACpuOnly) {
  const KernelWork short_tiles = block_graph_work(*online_softmax(64));
  const KernelWork long_tiles = block_graph_work(*online_softmax(256));
  EXPECT_DOUBLE_EQ(short_tiles.flops, long_tiles.flops);
  EXPECT_GT(short_tiles.cpu_extra_flops, long_tiles.cpu_extra_flops);
  const Target cpu = Target::cpu_host();
  EXPECT_GT(kernel_time(short_tiles, cpu).compute_s, kernel_time(long_tiles, cpu).compute_s);
  const Target gpu = Target::a100();
  EXPECT_DOUBLE_EQ(kernel_time(short_tiles, gpu).compute_s, kernel_time(long_tiles, gpu).compute_s);
}

TEST(CpuVectorCost, TheGeneratedErfWithBothBranchesCostsMoreThanALibrarys) {
  EXPECT_GT(cpu_extra_element_flops(OpKind::kErf, true),
            cpu_extra_element_flops(OpKind::kErf, false));
  EXPECT_EQ(cpu_extra_element_flops(OpKind::kAdd, true), 0);
  EXPECT_GT(cpu_extra_element_flops(OpKind::kExp, false), 0);
}

}  // namespace
}  // namespace mj::cost
