// The split-KV form of a one-kernel attention: the partials kernel on a grid axis of its
// own, the max of the slices' maxima at the kernel level, the combine kernel walking the
// slices; counts that do not divide the loop, kernels of other forms and grids with no axis
// left are not split. Whether the split computes the same is the verifier's to
// say (tests/superopt/test_split_kv.py).
#include "cc/ir/split_kv.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace mj::ir {
namespace {

constexpr int kHeads = 2, kRows = 8, kKeys = 16, kDim = 4;

std::vector<const Op*> kernels(const KernelGraph& g) {
  std::vector<const Op*> found;
  for (const Op& op : g.ops()) {
    if (op.kind == OpKind::kCustomized) found.push_back(&op);
  }
  return found;
}

// softmax(Q K) V per head in one kernel: blocks own (head, query tile), the loop walks the
// keys `steps` at a time with the online softmax. `online` false: accum_sum of the scores'
// product instead (no softmax). A grid with z > 1 splits V's columns and the output's.
KernelGraph attention(Dim3 grid, int steps, bool online = true) {
  const int columns = grid[2] > 1 ? 2 : -1;
  KernelGraph g;
  const int q = g.new_input({kHeads, kRows, kDim}, DType::kF32);
  const int k = g.new_input({kHeads, kDim, kKeys}, DType::kF32);
  const int v = g.new_input({kHeads, kKeys, kDim}, DType::kF32);
  auto bg = std::make_shared<BlockGraph>(grid, steps);
  const int tq = bg->new_input({kHeads, kRows, kDim}, DType::kF32, {0, 1, -1}, -1);
  const int tk = bg->new_input({kHeads, kDim, kKeys}, DType::kF32, {0, -1, -1}, 2);
  const int tv = bg->new_input({kHeads, kKeys, kDim}, DType::kF32, {0, -1, columns}, 1);
  const int s = bg->unary(OpKind::kMulScalar, bg->matmul(tq, tk), 0.5);
  const int y = online ? bg->binary(OpKind::kDiv, bg->accum_exp_matmul(s, tv),
                                    bg->accum(OpKind::kAccumExpSumLast, s))
                       : bg->accum(OpKind::kAccumSum, bg->matmul(s, tv));
  bg->new_output(y, {0, 1, columns}, DType::kF32);
  g.mark_output(g.customized({q, k, v}, bg)[0]);
  return g;
}

TEST(SplitKv, SplitsTheKeysAcrossAFreeGridAxisAndCombines) {
  const auto split = split_kv(attention({2, 2, 1}, 4), {2});
  ASSERT_EQ(split.size(), 1u);
  const KernelGraph& g = split[0];
  const auto ks = kernels(g);
  ASSERT_EQ(ks.size(), 2u);
  const BlockGraph& partials = *ks[0]->block_graph;
  EXPECT_EQ(partials.grid(), (Dim3{2, 2, 2}));
  EXPECT_EQ(partials.forloop_range(), 2);
  ASSERT_EQ(partials.num_outputs(), 3);
  EXPECT_EQ(partials.kernel_output_shape(0), (Shape{kHeads, kRows, 2 * kDim}));
  EXPECT_EQ(partials.kernel_output_shape(1), (Shape{kHeads, kRows, 2}));
  EXPECT_EQ(partials.kernel_output_shape(2), (Shape{kHeads, kRows, 2}));
  for (const Op& op : partials.ops()) {
    EXPECT_NE(op.kind, OpKind::kDiv);  // each slice's division is the combine's to do
    if (op.kind == OpKind::kInput && op.fmap >= 0) EXPECT_EQ(op.imap[2], op.fmap);
  }
  int maxima = 0;
  for (const Op& op : g.ops())
    maxima += op.kind == OpKind::kReduce && op.reduce == ReduceKind::kMax;
  EXPECT_EQ(maxima, 1);
  const BlockGraph& combine = *ks[1]->block_graph;
  EXPECT_EQ(combine.grid(), (Dim3{2, 2, 1}));
  EXPECT_EQ(combine.forloop_range(), 2);
  EXPECT_EQ(combine.kernel_output_shape(0), (Shape{kHeads, kRows, kDim}));
  EXPECT_EQ(g.tensor(g.output_ids()[0]).shape, (Shape{kHeads, kRows, kDim}));
}

TEST(SplitKv, MakesOneGraphPerCountThatDividesTheLoop) {
  // 4 iterations: 3 and 8 slices do not divide them; 4 leaves one iteration a slice.
  const auto split = split_kv(attention({2, 2, 1}, 4), {1, 2, 3, 4, 8});
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(kernels(split[0])[0]->block_graph->grid()[2], 2);
  EXPECT_EQ(kernels(split[1])[0]->block_graph->grid()[2], 4);
  EXPECT_EQ(kernels(split[1])[0]->block_graph->forloop_range(), 1);
}

TEST(SplitKv, LeavesKernelsOfOtherFormsAlone) {
  EXPECT_TRUE(split_kv(attention({2, 2, 1}, 4, false), {2}).empty());
}

TEST(SplitKv, NeedsAGridAxisLeftAtOne) {
  EXPECT_TRUE(split_kv(attention({2, 2, 2}, 4), {2}).empty());
}

}  // namespace
}  // namespace mj::ir
