// Thread-level fusion groups of block graphs.
#include <gtest/gtest.h>

#include "cc/ir/thread_fusion.h"

namespace mj::ir {
namespace {

int op_of(const BlockGraph& g, int t) { return g.tensor(t).producer; }

TEST(ThreadFusion, MatmulSiluMulChainIsOneGroup) {
  BlockGraph bg({2, 1, 1}, 1);
  const int x = bg.new_input({8, 16}, DType::kF32, {-1, -1, -1}, -1);
  const int w = bg.new_input({16, 32}, DType::kF32, {1, -1, -1}, -1);
  const int other = bg.new_input({8, 32}, DType::kF32, {1, -1, -1}, -1);
  const int mm = bg.matmul(x, w);
  const int act = bg.unary(OpKind::kSilu, mm);
  const int y = bg.binary(OpKind::kMul, act, other);
  bg.new_output(y, {1, -1, -1}, DType::kF32);
  const std::vector<int> groups = thread_fusion_groups(bg);
  ASSERT_EQ(groups.size(), bg.ops().size());
  const int root = op_of(bg, mm);
  EXPECT_EQ(groups[root], root);
  EXPECT_EQ(groups[op_of(bg, act)], root);
  EXPECT_EQ(groups[op_of(bg, y)], root);
  for (int t : {x, w, other}) EXPECT_EQ(groups[op_of(bg, t)], -1);
  EXPECT_EQ(groups.back(), -1);  // the store
}

TEST(ThreadFusion, ASharedValueStartsNoChain) {
  BlockGraph bg({1, 1, 1}, 1);
  const int x = bg.new_input({8, 16}, DType::kF32, {-1, -1, -1}, -1);
  const int e = bg.unary(OpKind::kExp, x);  // own group: x is an input tile
  const int a = bg.unary(OpKind::kNeg, e);  // e has two consumers: a new group
  const int b = bg.unary(OpKind::kRelu, e);
  const int c = bg.binary(OpKind::kAdd, a, b);  // joins a's group, its first operand
  bg.new_output(c, {-1, -1, -1}, DType::kF32);
  const std::vector<int> groups = thread_fusion_groups(bg);
  EXPECT_EQ(groups[op_of(bg, e)], op_of(bg, e));
  EXPECT_EQ(groups[op_of(bg, a)], op_of(bg, a));
  EXPECT_EQ(groups[op_of(bg, b)], op_of(bg, b));
  EXPECT_EQ(groups[op_of(bg, c)], op_of(bg, a));
}

TEST(ThreadFusion, PhaseAndBroadcastBoundaries) {
  BlockGraph bg({1, 1, 1}, 4);
  const int x = bg.new_input({8, 16}, DType::kF32, {-1, -1, -1}, 1);
  const int sq = bg.unary(OpKind::kSquare, x);
  const int acc = bg.accum(OpKind::kAccumSum, sq);     // epilogue: not fused into the body
  const int ms = bg.accum(OpKind::kAccumMeanLast, x);  // [8, 1]
  const int r = bg.unary(OpKind::kRsqrt, ms);          // joins ms
  const int y = bg.binary(OpKind::kMul, acc, r);       // joins acc (same shape), not r
  bg.new_output(y, {-1, -1, -1}, DType::kF32);
  const std::vector<int> groups = thread_fusion_groups(bg);
  EXPECT_EQ(groups[op_of(bg, sq)], op_of(bg, sq));
  EXPECT_EQ(groups[op_of(bg, acc)], op_of(bg, acc));
  EXPECT_EQ(groups[op_of(bg, r)], op_of(bg, ms));
  EXPECT_EQ(groups[op_of(bg, y)], op_of(bg, acc));

  BlockGraph bcast({1, 1, 1}, 1);
  const int v = bcast.new_input({8, 1}, DType::kF32, {-1, -1, -1}, -1);
  const int m = bcast.new_input({8, 16}, DType::kF32, {-1, -1, -1}, -1);
  const int e = bcast.unary(OpKind::kExp, v);
  const int z = bcast.binary(OpKind::kMul, e, m);  // e is stretched: z starts a group
  bcast.new_output(z, {-1, -1, -1}, DType::kF32);
  const std::vector<int> g2 = thread_fusion_groups(bcast);
  EXPECT_EQ(g2[op_of(bcast, z)], op_of(bcast, z));
}

TEST(ThreadFusion, StoredValuesAreNotFusedThrough) {
  BlockGraph bg({1, 1, 1}, 1);
  const int x = bg.new_input({4}, DType::kF32, {-1, -1, -1}, -1);
  const int e = bg.unary(OpKind::kExp, x);
  bg.new_output(e, {-1, -1, -1}, DType::kF32);
  const int n = bg.unary(OpKind::kNeg, e);
  bg.new_output(n, {-1, -1, -1}, DType::kF32);
  const std::vector<int> groups = thread_fusion_groups(bg);
  EXPECT_EQ(groups[op_of(bg, n)], op_of(bg, n));
}

}  // namespace
}  // namespace mj::ir
