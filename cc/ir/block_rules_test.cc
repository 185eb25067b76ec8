// Block-level rules: grid/imap/fmap splits, phases, accumulators, omap, customized inputs.
#include <gtest/gtest.h>

#include "cc/ir/graph.h"
#include "cc/ir/ir_error_matchers_for_test.h"

namespace mj::ir {
namespace {

TEST(BlockRules, GridAndForloopRange) {
  EXPECT_IR_ERROR(BlockGraph({0, 1, 1}, 4), "BlockGraph", "grid (0, 1, 1)", ">= 1");
  EXPECT_IR_ERROR(BlockGraph({2, 1, 1}, 0), "BlockGraph", "forloop_range 0", ">= 1");
}

TEST(BlockRules, SplitsMustDivide) {
  BlockGraph bg({96, 1, 1}, 32);
  EXPECT_IR_ERROR(bg.new_input({8, 6000}, DType::kF32, {1, -1, -1}, -1), "new_input", "imap",
                  "dim 1", "size 6000", "96 parts", "does not divide");
  EXPECT_IR_ERROR(bg.new_input({8, 100}, DType::kF32, {-1, -1, -1}, 1), "new_input", "fmap",
                  "dim 1", "size 100", "32 parts", "does not divide");
  // The loop splits the block's part: 4800 / 96 = 50 per block, which 32 does not divide.
  EXPECT_IR_ERROR(bg.new_input({4800, 8}, DType::kF32, {0, -1, -1}, 0), "new_input", "fmap",
                  "size 50", "32 parts");
  EXPECT_EQ(bg.num_inputs(), 0);
}

TEST(BlockRules, MapsMustNameExistingDims) {
  BlockGraph bg({4, 2, 1}, 2);
  EXPECT_IR_ERROR(bg.new_input({8, 8}, DType::kF32, {2, -1, -1}, -1), "new_input",
                  "imap (2, -1, -1)", "dim 2", "axis x", "[8, 8]");
  EXPECT_IR_ERROR(bg.new_input({8, 8}, DType::kF32, {0, -3, -1}, -1), "new_input", "dim -3");
  EXPECT_IR_ERROR(bg.new_input({8, 8}, DType::kF32, {0, 1, -1}, 5), "new_input", "fmap", "dim 5");
}

TEST(BlockRules, GridAxesOnDims) {
  BlockGraph bg({4, 2, 1}, 1);
  EXPECT_IR_ERROR(bg.new_input({8, 8}, DType::kF32, {0, 0, -1}, -1), "new_input", "imap (0, 0, -1)",
                  "dim 0", "two grid axes", "x and y");
  EXPECT_IR_ERROR(bg.new_input({8, 8}, DType::kF32, {0, 1, 1}, -1), "new_input", "axis z",
                  "grid size is 1");
  const int t = bg.new_input({8, 8}, DType::kF32, {-1, 0, -1}, -1);  // replicated along x
  EXPECT_EQ(bg.tensor(t).shape, (Shape{4, 8}));
  EXPECT_EQ(bg.tensor(t).phase, Phase::kInvariant);
}

TEST(BlockRules, PhasesDoNotMix) {
  BlockGraph bg({1, 1, 1}, 4);
  const int body = bg.new_input({8, 16}, DType::kF32, {-1, -1, -1}, 1);
  const int inv = bg.new_input({8, 4}, DType::kF32, {-1, -1, -1}, -1);
  const int epi = bg.accum(OpKind::kAccumSum, body);
  EXPECT_EQ(bg.tensor(epi).phase, Phase::kEpilogue);
  EXPECT_EQ(bg.tensor(bg.binary(OpKind::kAdd, body, inv)).phase, Phase::kBody);
  EXPECT_EQ(bg.tensor(bg.binary(OpKind::kAdd, inv, epi)).phase, Phase::kEpilogue);
  EXPECT_EQ(bg.tensor(bg.unary(OpKind::kExp, inv)).phase, Phase::kInvariant);
  EXPECT_IR_ERROR(bg.binary(OpKind::kMul, body, epi), "mul", "mixes body tensor t0 [8, 4]",
                  "epilogue tensor t2 [8, 4]");
  const int body_rhs = bg.new_input({16, 4}, DType::kF32, {-1, -1, -1}, 0);  // tile [4, 4]
  EXPECT_IR_ERROR(bg.matmul(epi, body_rhs), "matmul", "epilogue tensor t2", "body tensor");
}

TEST(BlockRules, Accumulators) {
  BlockGraph bg({1, 1, 1}, 4);
  const int s = bg.new_input({8, 16}, DType::kF32, {-1, -1, -1}, 1);   // tile [8, 4]
  const int v = bg.new_input({16, 32}, DType::kF32, {-1, -1, -1}, 0);  // tile [4, 32]
  const int inv = bg.new_input({8, 2}, DType::kF32, {-1, -1, -1}, -1);
  for (OpKind k : {OpKind::kAccumSumLast, OpKind::kAccumMeanLast, OpKind::kAccumMaxLast,
                   OpKind::kAccumExpSumLast}) {
    const int r = bg.accum(k, s);
    EXPECT_EQ(bg.tensor(r).shape, (Shape{8, 1})) << op_kind_name(k);
    EXPECT_EQ(bg.tensor(r).phase, Phase::kEpilogue);
  }
  const int rms = bg.accum(OpKind::kAccumRmsLast, s, 1e-5);
  EXPECT_EQ(bg.ops()[bg.tensor(rms).producer].scalar, 1e-5);
  const int o = bg.accum_exp_matmul(s, v);
  EXPECT_EQ(bg.tensor(o).shape, (Shape{8, 32}));
  EXPECT_EQ(bg.tensor(o).phase, Phase::kEpilogue);
  EXPECT_EQ(bg.tensor(bg.accum(OpKind::kAccumSum, inv)).phase, Phase::kEpilogue);

  EXPECT_IR_ERROR(bg.accum(OpKind::kAccumSum, o), "accum_sum", "t", "[8, 32]",
                  "is in the epilogue");
  EXPECT_IR_ERROR(bg.accum_exp_matmul(s, bg.accum(OpKind::kAccumSum, v)), "accum_exp_matmul",
                  "epilogue");
  EXPECT_IR_ERROR(bg.accum(OpKind::kExp, s), "accum", "'exp'");
  EXPECT_IR_ERROR(bg.accum(OpKind::kAccumExpMatmul, s), "accum", "'accum_exp_matmul'");
  EXPECT_IR_ERROR(bg.accum_exp_matmul(v, v), "accum_exp_matmul", "inner dims");
  EXPECT_IR_ERROR(bg.accum(OpKind::kAccumSum, 99), "accum_sum", "unknown tensor t99");
}

TEST(BlockRules, Outputs) {
  BlockGraph bg({4, 2, 1}, 2);
  const int x = bg.new_input({8, 16}, DType::kF32, {0, 1, -1}, -1);  // tile [2, 8]
  const int b = bg.new_input({8, 16}, DType::kF32, {0, 1, -1}, 1);   // tile [2, 4]
  const int acc = bg.accum(OpKind::kAccumSum, b);
  EXPECT_IR_ERROR(bg.new_output(b, {0, 1, -1}, DType::kF32), "new_output", "t1 [2, 4]", "loop body",
                  "forloop_range 2");
  EXPECT_IR_ERROR(bg.new_output(acc, {0, -1, -1}, DType::kF32), "new_output", "-1 on axis y",
                  "cross-block reduction");
  EXPECT_IR_ERROR(bg.new_output(acc, {1, 1, -1}, DType::kF32), "new_output", "omap (1, 1, -1)",
                  "repeats dim 1");
  EXPECT_IR_ERROR(bg.new_output(acc, {0, 2, -1}, DType::kF32), "new_output", "dim 2", "t2 [2, 4]");
  EXPECT_IR_ERROR(bg.new_output(acc, {0, 1, 0}, DType::kF32), "new_output", "axis z",
                  "grid size is 1");
  EXPECT_EQ(bg.num_outputs(), 0);
  bg.new_output(acc, {1, 0, -1}, DType::kBF16);
  bg.new_output(x, {0, 1, -1}, DType::kF32);             // invariant tensors may be stored
  EXPECT_EQ(bg.kernel_output_shape(0), (Shape{4, 16}));  // [2, 4] with dim 1 x4, dim 0 x2
  EXPECT_EQ(bg.kernel_output_dtype(0), DType::kBF16);
  EXPECT_EQ(bg.kernel_output_shape(1), (Shape{8, 16}));
  EXPECT_EQ(bg.output_ids(), (std::vector<int>{acc, x}));
  EXPECT_EQ(bg.ops().back().io_index, 1);
}

TEST(BlockRules, BodyOutputAllowedWithOneIteration) {
  BlockGraph bg({2, 1, 1}, 1);
  const int b = bg.new_input({8, 16}, DType::kF32, {0, -1, -1}, 1);
  EXPECT_EQ(bg.tensor(b).phase, Phase::kBody);
  bg.new_output(bg.unary(OpKind::kRelu, b), {0, -1, -1}, DType::kF32);
  EXPECT_EQ(bg.kernel_output_shape(0), (Shape{8, 16}));
}

std::shared_ptr<BlockGraph> two_input_block_graph() {
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 1);
  const int a = bg->new_input({4, 8}, DType::kF32, {1, -1, -1}, -1);
  const int b = bg->new_input({8}, DType::kBF16, {0, -1, -1}, -1);
  bg->new_output(bg->binary(OpKind::kAdd, a, b), {1, -1, -1}, DType::kF32);
  return bg;
}

TEST(BlockRules, CustomizedInputsMustMatch) {
  KernelGraph k;
  const int a = k.new_input({4, 8}, DType::kF32);
  const int b = k.new_input({8}, DType::kBF16);
  const int b32 = k.new_input({8}, DType::kF32);
  const int wrong = k.new_input({4, 4}, DType::kF32);
  auto bg = two_input_block_graph();
  EXPECT_IR_ERROR(k.customized({a}, bg), "customized", "1 inputs", "declares 2");
  EXPECT_IR_ERROR(k.customized({wrong, b}, bg), "customized", "input 0", "t3 [4, 4]", "[4, 8]");
  EXPECT_IR_ERROR(k.customized({a, b32}, bg), "customized", "input 1", "float32", "bfloat16");
  EXPECT_IR_ERROR(k.customized({a, 17}, bg), "customized", "unknown tensor t17");
  EXPECT_IR_ERROR(k.customized({a, b}, nullptr), "customized", "null");
  auto empty = std::make_shared<BlockGraph>(Dim3{1, 1, 1}, 1);
  empty->new_input({4}, DType::kF32, {-1, -1, -1}, -1);
  EXPECT_IR_ERROR(k.customized({b32}, empty), "customized", "no outputs");
  const std::vector<int> outs = k.customized({a, b}, bg);
  EXPECT_EQ(k.tensor(outs[0]).shape, (Shape{4, 8}));
}

}  // namespace
}  // namespace mj::ir
