#include "cc/search/block_op_rules.h"

#include <gtest/gtest.h>

namespace mj::search {

using ir::BlockGraph;
using ir::DType;
using ir::Op;
using ir::OpKind;
using ir::Phase;

namespace {

Op op_of(OpKind kind, std::vector<int> inputs, int dim = -1) {
  Op op;
  op.kind = kind;
  op.inputs = std::move(inputs);
  op.dim = dim;
  return op;
}

TEST(BlockOpRules, PhasesNeverMixAndAccumulatorsTakeTheBody) {
  BlockGraph bg({1, 1, 1}, 4);
  const int body = bg.new_input({8, 16}, DType::kF32, {-1, -1, -1}, 1);
  const int inv = bg.new_input({8, 16}, DType::kF32, {-1, -1, -1}, -1);
  const int epi = bg.accum(OpKind::kAccumSumLast, body);
  EXPECT_EQ(result_phase(bg, op_of(OpKind::kMul, {body, inv})), Phase::kBody);
  EXPECT_EQ(result_phase(bg, op_of(OpKind::kMul, {epi, inv})), Phase::kEpilogue);
  EXPECT_EQ(result_phase(bg, op_of(OpKind::kExp, {inv})), Phase::kInvariant);
  EXPECT_FALSE(result_phase(bg, op_of(OpKind::kMul, {body, epi})));
  EXPECT_EQ(result_phase(bg, op_of(OpKind::kAccumSum, {body})), Phase::kEpilogue);
  EXPECT_FALSE(result_phase(bg, op_of(OpKind::kAccumSum, {inv})));
}

TEST(BlockOpRules, AccumulatorsMustNotSumAcrossPositionsOfTheLoopIndex) {
  const int m = 0, k = 1, n = 2;
  // accum_sum of a tile that still has k adds X[:, i] of different iterations: rejected.
  EXPECT_FALSE(accumulates_loop_index_only(op_of(OpKind::kAccumSum, {0}), {m, k}, k));
  // After the matmul contracted k, summing over iterations completes the contraction.
  EXPECT_TRUE(accumulates_loop_index_only(op_of(OpKind::kAccumSum, {0}), {m, n}, k));
  // The *_last accumulators reduce k themselves when it is the last dim.
  EXPECT_TRUE(accumulates_loop_index_only(op_of(OpKind::kAccumRmsLast, {0}), {m, k}, k));
  EXPECT_FALSE(accumulates_loop_index_only(op_of(OpKind::kAccumRmsLast, {0}), {k, m}, k));
}

TEST(BlockOpRules, ReducingAGridSplitIndexNeedsPartialResults) {
  BlockLayout l;
  l.grid = {4, 1, 1};
  l.axis_class = {2, kNoClass, kNoClass};
  EXPECT_TRUE(reduces_split_index(op_of(OpKind::kReduce, {0}, 1), {0, 2}, l));
  EXPECT_FALSE(reduces_split_index(op_of(OpKind::kReduce, {0}, 0), {0, 2}, l));
  EXPECT_TRUE(reduces_split_index(op_of(OpKind::kAccumSumLast, {0}), {0, 2}, l));
  EXPECT_FALSE(reduces_split_index(op_of(OpKind::kAccumSum, {0}), {0, 2}, l));
}

}  // namespace
}  // namespace mj::search
