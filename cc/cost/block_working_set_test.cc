// The per-block on-chip bytes of block_working_set.h.
#include "cc/cost/block_working_set.h"

#include <gtest/gtest.h>

#include "cc/testing/rmsnorm_linear.h"

namespace mj::cost {

using ir::BlockGraph;
using ir::DType;
using ir::OpKind;
using testing::column_split;
using testing::fused_rmsnorm_linear_block;

namespace {

TEST(BlockWorkingSet, FusedRmsNormLinearLoopPhase) {
  // Loop: x [8,128], g [128], w [128,64] f32 tiles, double-buffered; buffers for mul(x, g)
  // (read by the matmul, another group), the matmul result [8,64] (read by accum_sum) and
  // square(x) [8,128] (read by accum_mean_last); the states acc [8,64] and ms [8,1].
  const double inputs = 2 * 4.0 * (8 * 128 + 128 + 128 * 64);
  const double intermediates = 4.0 * (8 * 128 + 8 * 64 + 8 * 128);
  const double states = 4.0 * (8 * 64 + 8);
  // The epilogue (states + sqrt(ms + eps), which div reads from another group) is smaller.
  EXPECT_DOUBLE_EQ(block_working_set_bytes(*fused_rmsnorm_linear_block(column_split(96, 32))),
                   inputs + intermediates + states);
}

TEST(BlockWorkingSet, ThreadFusedChainStaysInRegisters) {
  BlockGraph bg({2, 1, 1}, 1);
  const int a = bg.new_input({8, 64}, DType::kF16, {0, -1, -1}, 0);  // [4, 64]
  const int e = bg.unary(OpKind::kExp, a);
  bg.new_output(bg.unary(OpKind::kNeg, e), {0, -1, -1}, DType::kF16);
  // One fusion group (exp, neg) stored straight from registers; one f16 tile, no double
  // buffer with a single iteration.
  EXPECT_DOUBLE_EQ(block_working_set_bytes(bg), 4 * 64 * 2);
}

TEST(BlockWorkingSet, ValueWithTwoConsumersNeedsABuffer) {
  BlockGraph bg({2, 1, 1}, 1);
  const int a = bg.new_input({8, 64}, DType::kF16, {0, -1, -1}, 0);
  const int e = bg.unary(OpKind::kExp, a);
  bg.new_output(bg.binary(OpKind::kMul, e, e), {0, -1, -1}, DType::kF16);  // one consumer op
  const double single = block_working_set_bytes(bg);
  BlockGraph two({2, 1, 1}, 1);
  const int b = two.new_input({8, 64}, DType::kF16, {0, -1, -1}, 0);
  const int f = two.unary(OpKind::kExp, b);
  two.new_output(two.binary(OpKind::kAdd, two.unary(OpKind::kNeg, f), f), {0, -1, -1}, DType::kF16);
  EXPECT_DOUBLE_EQ(single, 4 * 64 * 2);
  EXPECT_DOUBLE_EQ(block_working_set_bytes(two), 4 * 64 * 2 + 4 * 64 * 4);  // exp's f32 buffer
}

TEST(BlockWorkingSet, BiggerTilesNeedMoreOnChip) {
  // 6 column blocks instead of 96: W tiles [128, 1024] instead of [128, 64].
  EXPECT_GT(block_working_set_bytes(*fused_rmsnorm_linear_block(column_split(6, 32))), 1 << 20);
  EXPECT_LT(block_working_set_bytes(*fused_rmsnorm_linear_block(column_split(96, 32))), 100 << 10);
}

}  // namespace
}  // namespace mj::cost
