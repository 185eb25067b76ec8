// Folding a fused kernel's prologue into its block graph: a norm whose rows the tile holds
// whole folds, one split by the for-loop does not, broadcast sources are read whole, a value
// still read elsewhere keeps its kernel-level op, and a matmul folds with its operands'
// prologues.
#include "cc/ir/fold_prologue.h"

#include <gtest/gtest.h>

#include <memory>

namespace mj::ir {
namespace {

int count(const Graph& g, OpKind kind) {
  int n = 0;
  for (const Op& op : g.ops()) n += op.kind == kind;
  return n;
}

const BlockGraph& only_block_graph(const KernelGraph& g) {
  for (const Op& op : g.ops()) {
    if (op.kind == OpKind::kCustomized) return *op.block_graph;
  }
  throw IrError("no customized op");
}

// rms_norm(x) [* scale] at the kernel level, then one kernel multiplying it by w over a grid
// of row blocks, with the k dim walked by a for-loop of `steps` (the norm's dim: split when
// steps > 1).
KernelGraph norm_then_kernel(bool with_scale, int steps, bool norm_is_output = false) {
  KernelGraph g;
  const int x = g.new_input({4, 8}, DType::kF32);
  const int w = g.new_input({8, 8}, DType::kF32);
  int n = g.rms_norm(x, 1e-6);
  if (with_scale) n = g.binary(OpKind::kMul, n, g.new_input({1, 8}, DType::kF32));
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, steps);
  const int a = bg->new_input({4, 8}, DType::kF32, {0, -1, -1}, steps > 1 ? 1 : -1);
  const int b = bg->new_input({8, 8}, DType::kF32, {-1, -1, -1}, steps > 1 ? 0 : -1);
  int y = bg->matmul(a, b);
  if (steps > 1) y = bg->accum(OpKind::kAccumSum, y);
  bg->new_output(y, {0, -1, -1}, DType::kF32);
  g.mark_output(g.customized({n, w}, bg)[0]);
  if (norm_is_output) g.mark_output(n);
  return g;
}

TEST(FoldPrologue, FoldsANormWhoseRowsTheTileHoldsWhole) {
  const auto folded = fold_prologues(norm_then_kernel(false, 1));
  ASSERT_TRUE(folded.has_value());
  EXPECT_EQ(count(*folded, OpKind::kRmsNorm), 0);
  EXPECT_EQ(count(*folded, OpKind::kCustomized), 1);
  const BlockGraph& bg = only_block_graph(*folded);
  EXPECT_EQ(count(bg, OpKind::kRmsNorm), 1);
  EXPECT_EQ(bg.kernel_input_shape(0), (Shape{4, 8}));  // x, in the norm's place
  EXPECT_EQ(folded->input_ids().size(), 2u);
}

TEST(FoldPrologue, LeavesANormTheForLoopSplits) {
  // Each iteration holds a quarter of a row: a norm of it is not the row's norm.
  EXPECT_FALSE(fold_prologues(norm_then_kernel(false, 4)).has_value());
}

TEST(FoldPrologue, ReadsABroadcastSourceWhole) {
  const auto folded = fold_prologues(norm_then_kernel(true, 1));
  ASSERT_TRUE(folded.has_value());
  EXPECT_EQ(count(*folded, OpKind::kMul), 0);
  const BlockGraph& bg = only_block_graph(*folded);
  ASSERT_EQ(bg.num_inputs(), 3);  // x, scale, w
  for (const Op& op : bg.ops()) {
    if (op.kind == OpKind::kInput && op.io_index == 1) {
      EXPECT_EQ(op.imap, (Dim3{-1, -1, -1}));  // the scale's one row, for every block
    }
  }
}

TEST(FoldPrologue, KeepsAValueStillReadElsewhere) {
  const auto folded = fold_prologues(norm_then_kernel(false, 1, true));
  ASSERT_TRUE(folded.has_value());
  EXPECT_EQ(count(*folded, OpKind::kRmsNorm), 1);  // for the second output
  EXPECT_EQ(count(only_block_graph(*folded), OpKind::kRmsNorm), 1);
  EXPECT_EQ(folded->output_ids().size(), 2u);
}

TEST(FoldPrologue, NothingToFoldWithoutAKernelLevelPrologue) {
  KernelGraph g;
  const int x = g.new_input({4, 8}, DType::kF32);
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 1);
  const int a = bg->new_input({4, 8}, DType::kF32, {0, -1, -1}, -1);
  bg->new_output(bg->unary(OpKind::kExp, a), {0, -1, -1}, DType::kF32);
  g.mark_output(g.customized({x}, bg)[0]);
  EXPECT_FALSE(fold_prologues(g).has_value());
}

// scores = q @ k (k: keys as columns, normalized over their rows), then a kernel taking
// exp of the scores over a grid of key blocks, each block all queries and whole keys.
TEST(FoldPrologue, FoldsAMatmulAndTheKeysNormBehindIt) {
  KernelGraph g;
  const int q = g.new_input({2, 4, 8}, DType::kF32);
  const int k = g.new_input({2, 8, 16}, DType::kF32);
  const int mean_sq = g.reduce(g.unary(OpKind::kSquare, k), 1, ReduceKind::kMean);
  const int kn = g.binary(OpKind::kDiv, k, g.unary(OpKind::kSqrt, mean_sq));
  const int s = g.matmul(q, kn);
  auto bg = std::make_shared<BlockGraph>(Dim3{4, 1, 1}, 1);
  const int tile = bg->new_input({2, 4, 16}, DType::kF32, {2, -1, -1}, -1);
  bg->new_output(bg->unary(OpKind::kExp, tile), {2, -1, -1}, DType::kF32);
  g.mark_output(g.customized({s}, bg)[0]);

  const auto folded = fold_prologues(g);
  ASSERT_TRUE(folded.has_value());
  EXPECT_EQ(count(*folded, OpKind::kMatmul), 0);
  EXPECT_EQ(count(*folded, OpKind::kDiv), 0);
  const BlockGraph& f = only_block_graph(*folded);
  EXPECT_EQ(count(f, OpKind::kMatmul), 1);
  EXPECT_EQ(count(f, OpKind::kReduce), 1);
  ASSERT_EQ(f.num_inputs(), 2);  // q whole, k's key block (read once for both paths)
  for (const Op& op : f.ops()) {
    if (op.kind != OpKind::kInput) continue;
    // q has no key dim: every block reads all of it; k is split along its keys (dim 2).
    EXPECT_EQ(op.imap, (Dim3{op.io_index == 0 ? -1 : 2, -1, -1}));
  }
}

// x[2, 4, 8] @ w[8, 16] (a rank-3 activation times a rank-2 weight, batch dims missing
// from w), then a kernel over blocks of the batch and of the columns: x is read by batch,
// w by columns, each through its own dims.
TEST(FoldPrologue, AlignsALowerRankOperandToTheRight) {
  KernelGraph g;
  const int x = g.new_input({2, 4, 8}, DType::kF32);
  const int w = g.new_input({8, 16}, DType::kF32);
  const int y = g.matmul(x, w);
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 4, 1}, 1);
  const int tile = bg->new_input({2, 4, 16}, DType::kF32, {0, 2, -1}, -1);
  bg->new_output(bg->unary(OpKind::kExp, tile), {0, 2, -1}, DType::kF32);
  g.mark_output(g.customized({y}, bg)[0]);

  const auto folded = fold_prologues(g);
  ASSERT_TRUE(folded.has_value());
  const BlockGraph& f = only_block_graph(*folded);
  ASSERT_EQ(f.num_inputs(), 2);
  for (const Op& op : f.ops()) {
    if (op.kind != OpKind::kInput) continue;
    // x: batch blocks along its dim 0, whole columns' worth (it has none); w: no batch dim,
    // column blocks along its dim 1.
    EXPECT_EQ(op.imap, op.io_index == 0 ? (Dim3{0, -1, -1}) : (Dim3{-1, 1, -1}));
  }
}

}  // namespace
}  // namespace mj::ir
