// Shrunk instances: the rebuilt graphs keep grids, loops, maps and split counts, with small
// tiles, and the two graphs' inputs and outputs keep matching shapes.
#include "cc/verify/shrink.h"

#include <gtest/gtest.h>

#include <memory>

#include "cc/testing/rmsnorm_linear.h"

namespace mj::verify {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::KernelGraph;
using ir::Op;
using ir::OpKind;
using ir::Shape;
using testing::fused_rmsnorm_linear;
using testing::FusedRmsNormLinear;
using testing::rmsnorm_linear_reference;

namespace {

std::vector<Shape> input_shapes(const KernelGraph& g) {
  std::vector<Shape> s;
  for (int id : g.input_ids()) s.push_back(g.tensor(id).shape);
  return s;
}

const BlockGraph& only_block_graph(const KernelGraph& g) {
  for (const Op& op : g.ops()) {
    if (op.kind == OpKind::kCustomized) return *op.block_graph;
  }
  throw std::logic_error("no customized op");
}

TEST(Shrink, IssueRmsNormLinearPair) {
  FusedRmsNormLinear s;
  s.m = 8, s.k = 4096, s.n = 6144, s.grid = {96, 1, 1}, s.forloop = 32;
  const auto [ref, fused] =
      shrink_pair(rmsnorm_linear_reference({8, 4096, 6144}), fused_rmsnorm_linear(s), 2);
  // k: split 32 ways by the loop -> 32 * 2; n: 96 blocks -> 96 * 2; m unsplit -> 2
  const std::vector<Shape> want = {{2, 64}, {64}, {64, 192}};
  EXPECT_EQ(input_shapes(ref), want);
  EXPECT_EQ(input_shapes(fused), want);
  EXPECT_EQ(ref.tensor(ref.output_ids()[0]).shape, (Shape{2, 192}));
  EXPECT_EQ(fused.tensor(fused.output_ids()[0]).shape, (Shape{2, 192}));

  const BlockGraph& bg = only_block_graph(fused);
  EXPECT_EQ(bg.grid(), (Dim3{96, 1, 1}));
  EXPECT_EQ(bg.forloop_range(), 32);
  EXPECT_EQ(bg.tensor(bg.input_ids()[0]).shape, (Shape{2, 2}));  // X tile
  EXPECT_EQ(bg.tensor(bg.input_ids()[1]).shape, (Shape{2}));     // G tile
  EXPECT_EQ(bg.tensor(bg.input_ids()[2]).shape, (Shape{2, 2}));  // W tile
  const Op& w_in = bg.ops()[bg.tensor(bg.input_ids()[2]).producer];
  EXPECT_EQ(w_in.imap, (Dim3{1, -1, -1}));
  EXPECT_EQ(w_in.fmap, 0);
  EXPECT_EQ(bg.ops().back().omap, (Dim3{1, -1, -1}));
  // the rebuilt graph has the same ops in the same order
  const KernelGraph full = fused_rmsnorm_linear(s);
  const BlockGraph& original = only_block_graph(full);
  ASSERT_EQ(bg.ops().size(), original.ops().size());
  for (size_t i = 0; i < bg.ops().size(); ++i) {
    EXPECT_EQ(bg.ops()[i].kind, original.ops()[i].kind) << i;
    EXPECT_EQ(bg.ops()[i].scalar, original.ops()[i].scalar) << i;
  }
}

TEST(Shrink, MaxTileSetsTheTileSize) {
  FusedRmsNormLinear s;
  s.m = 8, s.k = 4096, s.n = 6144, s.grid = {96, 1, 1}, s.forloop = 32;
  const auto [ref, fused] =
      shrink_pair(rmsnorm_linear_reference({8, 4096, 6144}), fused_rmsnorm_linear(s), 3);
  EXPECT_EQ(input_shapes(fused), (std::vector<Shape>{{3, 96}, {96}, {96, 288}}));
}

TEST(Shrink, BroadcastDimsStayOne) {
  KernelGraph g;
  const int a = g.new_input({6, 1}, DType::kF32);
  const int b = g.new_input({6, 10}, DType::kF32);
  const int c = g.new_input({1}, DType::kF32);
  g.mark_output(g.binary(OpKind::kMul, g.binary(OpKind::kAdd, a, b), c));
  const auto [x, y] = shrink_pair(g, g, 2);
  EXPECT_EQ(input_shapes(x), (std::vector<Shape>{{2, 1}, {2, 2}, {1}}));
  EXPECT_EQ(input_shapes(y), input_shapes(x));
}

TEST(Shrink, ConcatDimsScaleTogether) {
  KernelGraph g;
  const int x = g.new_input({16, 32}, DType::kF32);
  const int w = g.new_input({32, 64}, DType::kF32);
  const int a = g.new_input({32, 4}, DType::kF32);
  const int b = g.new_input({4, 64}, DType::kF32);
  g.mark_output(g.matmul(g.concat(x, g.matmul(x, a), 1), g.concat(w, b, 0)));
  const auto [s, unused] = shrink_pair(g, g, 2);
  // the k class holds 32, 4 and 36 (gcd 4) and scales by 2 / 4
  EXPECT_EQ(input_shapes(s), (std::vector<Shape>{{2, 16}, {16, 2}, {16, 2}, {2, 2}}));
}

TEST(Shrink, ATileOfOneKeepsItsKernelDim) {
  auto bg = std::make_shared<BlockGraph>(Dim3{4, 1, 1}, 1);
  bg->new_output(bg->unary(OpKind::kNeg, bg->new_input({4, 6}, DType::kF32, {0, -1, -1}, -1)),
                 {0, -1, -1}, DType::kF32);
  KernelGraph g;
  g.mark_output(g.customized({g.new_input({4, 6}, DType::kF32)}, bg).at(0));
  const auto [s, unused] = shrink_pair(g, g, 2);
  EXPECT_EQ(input_shapes(s), (std::vector<Shape>{{4, 2}}));
}

TEST(Shrink, OddSplitCountsAreKept) {
  auto bg = std::make_shared<BlockGraph>(Dim3{3, 1, 1}, 5);
  const int t = bg->new_input({9, 25}, DType::kF32, {0, -1, -1}, 1);
  bg->new_output(bg->accum(OpKind::kAccumSumLast, t), {0, -1, -1}, DType::kF32);
  KernelGraph g;
  g.mark_output(g.customized({g.new_input({9, 25}, DType::kF32)}, bg).at(0));
  const auto [s, unused] = shrink_pair(g, g, 2);
  EXPECT_EQ(input_shapes(s), (std::vector<Shape>{{6, 10}}));
  EXPECT_EQ(only_block_graph(s).tensor(only_block_graph(s).input_ids()[0]).shape, (Shape{2, 2}));
}

TEST(Shrink, InstanceSizeCountsValuesAndMatmulProducts) {
  KernelGraph g;
  const int a = g.new_input({2, 3}, DType::kF32);
  const int b = g.new_input({3, 4}, DType::kF32);
  g.mark_output(g.matmul(g.unary(OpKind::kNeg, a), b));
  EXPECT_EQ(instance_size(g), 6 + 12 + 6 + (8 + 8 * 3));

  FusedRmsNormLinear s;
  s.m = 8, s.k = 4096, s.n = 6144, s.grid = {96, 1, 1}, s.forloop = 32;
  const KernelGraph full = fused_rmsnorm_linear(s);
  const auto [ref, small] = shrink_pair(rmsnorm_linear_reference({8, 4096, 6144}), full, 2);
  // 96 blocks x 32 iterations remain, on tiles of 2 x 2
  EXPECT_GT(instance_size(full), int64_t(1) << 27);
  EXPECT_LT(instance_size(small), instance_size(full) / 1000);
}

}  // namespace
}  // namespace mj::verify
