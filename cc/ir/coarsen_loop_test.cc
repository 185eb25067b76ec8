// Running a for-loop several steps at a time: a product summed over k and row norms
// accumulated along k coarsen, with their tiles side by side and their accumulators as they
// were; values whose meaning depends on the steps (a sum of whole tiles, a count of
// iterations, a running max, a product along another dim, an operand that does not
// broadcast along the loop) leave the graph as it is. Whether the coarsened code computes
// the same is tests/runtime/test_loop_coarsening.py's to say.
#include "cc/ir/coarsen_loop.h"

#include <gtest/gtest.h>

namespace mj::ir {
namespace {

constexpr int kRows = 8, kK = 64, kCols = 16, kSteps = 16;

const Op& only_op(const Graph& g, OpKind kind) {
  const Op* found = nullptr;
  for (const Op& op : g.ops()) {
    if (op.kind == kind) {
      EXPECT_EQ(found, nullptr) << op_kind_name(kind);
      found = &op;
    }
  }
  if (found == nullptr) throw IrError("no such op");
  return *found;
}

// rms_norm(x) * scale @ w over a loop along k: x [8, 64] and scale [64] walked along k, the
// norm accumulated beside the product (the fused RMSNorm+Linear kernel).
BlockGraph norm_linear() {
  BlockGraph bg({2, 1, 1}, kSteps);
  const int x = bg.new_input({kRows, kK}, DType::kF32, {-1, -1, -1}, 1);
  const int scale = bg.new_input({kK}, DType::kF32, {-1, -1, -1}, 0);
  const int w = bg.new_input({kK, kCols}, DType::kF32, {1, -1, -1}, 0);
  const int rms = bg.accum(OpKind::kAccumRmsLast, x, 1e-6);
  const int acc = bg.accum(OpKind::kAccumSum, bg.matmul(bg.binary(OpKind::kMul, x, scale), w));
  bg.new_output(bg.binary(OpKind::kDiv, acc, rms), {1, -1, -1}, DType::kF32);
  return bg;
}

TEST(CoarsenLoop, ASumOverKAndARowNormCoarsen) {
  const BlockGraph bg = norm_linear();
  ASSERT_TRUE(loop_coarsens(bg));
  const auto coarse = coarsen_loop(bg, 4);
  ASSERT_TRUE(coarse.has_value());
  EXPECT_EQ(coarse->forloop_range(), kSteps / 4);
  const Op& product = only_op(*coarse, OpKind::kMatmul);
  EXPECT_EQ(coarse->tensor(product.inputs[0]).shape, (Shape{kRows, 4 * kK / kSteps}));
  EXPECT_EQ(coarse->tensor(product.inputs[1]).shape, (Shape{4 * kK / kSteps, kCols / 2}));
  // The accumulators and what the epilogue stores keep their shapes.
  EXPECT_EQ(coarse->tensor(only_op(*coarse, OpKind::kAccumSum).outputs[0]).shape,
            (Shape{kRows, kCols / 2}));
  EXPECT_EQ(coarse->tensor(only_op(*coarse, OpKind::kAccumRmsLast).outputs[0]).shape,
            (Shape{kRows, 1}));
  EXPECT_EQ(only_op(*coarse, OpKind::kAccumRmsLast).scalar, 1e-6);
  EXPECT_EQ(coarse->kernel_output_shape(0), bg.kernel_output_shape(0));
}

TEST(CoarsenLoop, OnlyFactorsThatDivideTheLoop) {
  const BlockGraph bg = norm_linear();
  EXPECT_FALSE(coarsen_loop(bg, 3).has_value());
  EXPECT_FALSE(coarsen_loop(bg, 1).has_value());
  EXPECT_TRUE(coarsen_loop(bg, kSteps).has_value());  // one iteration of the whole of k
}

TEST(CoarsenLoop, ASumOfWholeTilesDoesNot) {
  // accum_sum of a tile that moves with the loop: [8, 4] sums over the steps, which a
  // coarser step would make [8, 8] sums of other elements.
  BlockGraph bg({1, 1, 1}, kSteps);
  const int x = bg.new_input({kRows, kK}, DType::kF32, {-1, -1, -1}, 1);
  bg.new_output(bg.accum(OpKind::kAccumSum, bg.unary(OpKind::kExp, x)), {-1, -1, -1}, DType::kF32);
  EXPECT_FALSE(loop_coarsens(bg));
  EXPECT_FALSE(coarsen_loop(bg, 2).has_value());
}

TEST(CoarsenLoop, AnAccumulatorOfAnInvariantValueDoesNot) {
  // The mean of a loop-invariant row counts the iterations, 16 against 8.
  BlockGraph bg({1, 1, 1}, kSteps);
  const int x = bg.new_input({kRows, kK}, DType::kF32, {-1, -1, -1}, 1);
  const int y = bg.new_input({kRows, kCols}, DType::kF32, {-1, -1, -1}, -1);
  const int w = bg.new_input({kK, kCols}, DType::kF32, {-1, -1, -1}, 0);
  const int acc = bg.accum(OpKind::kAccumSum, bg.matmul(x, w));
  const int mean = bg.accum(OpKind::kAccumMeanLast, y);
  bg.new_output(bg.binary(OpKind::kDiv, acc, mean), {-1, -1, -1}, DType::kF32);
  EXPECT_FALSE(loop_coarsens(bg));
}

TEST(CoarsenLoop, AProductAlongAnotherDimDoesNot) {
  // The loop walks x's rows: each step's product is a block of rows, not a partial sum.
  BlockGraph bg({1, 1, 1}, kSteps);
  const int x = bg.new_input({kK, kRows}, DType::kF32, {-1, -1, -1}, 0);
  const int w = bg.new_input({kRows, kCols}, DType::kF32, {-1, -1, -1}, -1);
  bg.new_output(bg.accum(OpKind::kAccumSumLast, bg.matmul(x, w)), {-1, -1, -1}, DType::kF32);
  EXPECT_FALSE(loop_coarsens(bg));
}

TEST(CoarsenLoop, AnOperandThatDoesNotBroadcastAlongTheLoopDoesNot) {
  BlockGraph bg({1, 1, 1}, kSteps);
  const int x = bg.new_input({kRows, kK}, DType::kF32, {-1, -1, -1}, 1);
  const int y = bg.new_input({kRows, kK / kSteps}, DType::kF32, {-1, -1, -1}, -1);
  const int w = bg.new_input({kK, kCols}, DType::kF32, {-1, -1, -1}, 0);
  const int acc = bg.accum(OpKind::kAccumSum, bg.matmul(bg.binary(OpKind::kMul, x, y), w));
  bg.new_output(acc, {-1, -1, -1}, DType::kF32);
  EXPECT_FALSE(loop_coarsens(bg));
}

TEST(CoarsenLoop, AStepBroadcastAgainstALongerStepDoesNot) {
  // x[:, it] ([8, 1] a step) times y's [8, 4] step: two steps at a time would put [8, 2]
  // beside [8, 8], which no longer broadcast.
  BlockGraph bg({1, 1, 1}, kSteps);
  const int x = bg.new_input({kRows, kSteps}, DType::kF32, {-1, -1, -1}, 1);
  const int y = bg.new_input({kRows, kK}, DType::kF32, {-1, -1, -1}, 1);
  const int w = bg.new_input({kK, kCols}, DType::kF32, {-1, -1, -1}, 0);
  const int acc = bg.accum(OpKind::kAccumSum, bg.matmul(bg.binary(OpKind::kMul, x, y), w));
  bg.new_output(acc, {-1, -1, -1}, DType::kF32);
  EXPECT_FALSE(loop_coarsens(bg));
  EXPECT_FALSE(coarsen_loop(bg, 2).has_value());
}

TEST(CoarsenLoop, AnOnlineSoftmaxDoesNot) {
  BlockGraph bg({1, 1, 1}, kSteps);
  const int q = bg.new_input({kRows, kCols}, DType::kF32, {-1, -1, -1}, -1);
  const int k = bg.new_input({kCols, kK}, DType::kF32, {-1, -1, -1}, 1);
  const int v = bg.new_input({kK, kCols}, DType::kF32, {-1, -1, -1}, 0);
  const int s = bg.matmul(q, k);
  const int y =
      bg.binary(OpKind::kDiv, bg.accum_exp_matmul(s, v), bg.accum(OpKind::kAccumExpSumLast, s));
  bg.new_output(y, {-1, -1, -1}, DType::kF32);
  EXPECT_FALSE(loop_coarsens(bg));
}

TEST(CoarsenLoop, ALoopOfOneStepDoesNot) {
  BlockGraph bg({1, 1, 1}, 1);
  const int x = bg.new_input({kRows, kK}, DType::kF32, {-1, -1, -1}, -1);
  const int w = bg.new_input({kK, kCols}, DType::kF32, {-1, -1, -1}, -1);
  bg.new_output(bg.matmul(x, w), {-1, -1, -1}, DType::kF32);
  EXPECT_FALSE(loop_coarsens(bg));
}

}  // namespace
}  // namespace mj::ir
