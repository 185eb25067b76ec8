// Flop counts per op, the roofline way (op_flops.h).
#include "cc/cost/op_flops.h"

#include <gtest/gtest.h>

namespace mj::cost {

using ir::BlockGraph;
using ir::DType;
using ir::Graph;
using ir::KernelGraph;
using ir::Op;
using ir::OpKind;
using ir::ReduceKind;

namespace {

const Op& producer(const Graph& g, int t) { return g.ops()[g.tensor(t).producer]; }

TEST(OpFlops, KernelOps) {
  KernelGraph g;
  const int a = g.new_input({2, 8, 16}, DType::kBF16);
  const int b = g.new_input({16, 4}, DType::kBF16);
  const int c = g.new_input({16, 4}, DType::kF32);
  const int mm = g.matmul(a, b);  // [2, 8, 4]
  EXPECT_DOUBLE_EQ(op_flops(g, producer(g, mm)).total, 2.0 * 2 * 8 * 4 * 16);
  EXPECT_DOUBLE_EQ(op_flops(g, producer(g, mm)).low_precision_matmul, 2.0 * 2 * 8 * 4 * 16);
  const int mixed = g.matmul(a, c);  // computes in f32: no tensor cores
  EXPECT_DOUBLE_EQ(op_flops(g, producer(g, mixed)).low_precision_matmul, 0);
  EXPECT_DOUBLE_EQ(op_flops(g, producer(g, g.binary(OpKind::kAdd, mm, mixed))).total, 64);
  EXPECT_DOUBLE_EQ(op_flops(g, producer(g, g.reduce(a, 1, ReduceKind::kMax))).total, 256);
  EXPECT_DOUBLE_EQ(op_flops(g, producer(g, g.rms_norm(a, 1e-6))).total, 3 * 256);
  EXPECT_DOUBLE_EQ(op_flops(g, producer(g, g.concat(b, c, 0))).total, 0);
  EXPECT_DOUBLE_EQ(op_flops(g, producer(g, a)).total, 0);
}

TEST(OpFlops, Accumulators) {
  BlockGraph bg({1, 1, 1}, 4);
  const int s = bg.new_input({8, 64}, DType::kF16, {-1, -1, -1}, 1);   // [8, 16] per iteration
  const int v = bg.new_input({64, 32}, DType::kF16, {-1, -1, -1}, 0);  // [16, 32]
  const auto flops = [&](int t) { return op_flops(bg, producer(bg, t)); };
  EXPECT_DOUBLE_EQ(flops(bg.accum(OpKind::kAccumSum, s)).total, 128);
  EXPECT_DOUBLE_EQ(flops(bg.accum(OpKind::kAccumMaxLast, s)).total, 128);
  EXPECT_DOUBLE_EQ(flops(bg.accum(OpKind::kAccumExpSumLast, s)).total, 2 * 128);
  EXPECT_DOUBLE_EQ(flops(bg.accum(OpKind::kAccumRmsLast, s, 1e-6)).total, 2 * 128);
  const OpFlops em = flops(bg.accum_exp_matmul(s, v));
  EXPECT_DOUBLE_EQ(em.total, 2.0 * 8 * 32 * 16 + 2 * 128);
  EXPECT_DOUBLE_EQ(em.low_precision_matmul, 2.0 * 8 * 32 * 16);
}

}  // namespace
}  // namespace mj::cost
