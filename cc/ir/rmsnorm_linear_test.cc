// The paper's fused RMSNorm + Linear μGraph (the example), built with exact shapes.
#include <gtest/gtest.h>

#include "cc/ir/graph.h"

namespace mj::ir {
namespace {

TEST(RmsNormLinear, ReferenceKernelGraphShapes) {
  KernelGraph ref;
  const int x = ref.new_input({8, 4096}, DType::kF32);
  const int g = ref.new_input({4096}, DType::kF32);
  const int w = ref.new_input({4096, 6144}, DType::kF32);
  const int n = ref.rms_norm(x, 1e-6);
  const int m = ref.binary(OpKind::kMul, n, g);
  const int y = ref.matmul(m, w);
  ref.mark_output(y);
  EXPECT_EQ(ref.tensor(n).shape, (Shape{8, 4096}));
  EXPECT_EQ(ref.tensor(m).shape, (Shape{8, 4096}));
  EXPECT_EQ(ref.tensor(y).shape, (Shape{8, 6144}));
  EXPECT_EQ(ref.output_ids(), std::vector<int>{y});
  EXPECT_EQ(ref.input_ids(), (std::vector<int>{x, g, w}));
  EXPECT_EQ(ref.ops()[ref.tensor(n).producer].scalar, 1e-6);
  EXPECT_EQ(ref.tensor(y).phase, Phase::kInvariant);
}

TEST(RmsNormLinear, FusedBlockGraphTileShapesAndPhases) {
  auto bg = std::make_shared<BlockGraph>(Dim3{96, 1, 1}, 32);
  const int x = bg->new_input({8, 4096}, DType::kF32, {-1, -1, -1}, 1);
  const int g = bg->new_input({4096}, DType::kF32, {-1, -1, -1}, 0);
  const int w = bg->new_input({4096, 6144}, DType::kF32, {1, -1, -1}, 0);
  EXPECT_EQ(bg->tensor(x).shape, (Shape{8, 128}));
  EXPECT_EQ(bg->tensor(g).shape, (Shape{128}));
  EXPECT_EQ(bg->tensor(w).shape, (Shape{128, 64}));
  const int xg = bg->binary(OpKind::kMul, x, g);
  const int xw = bg->matmul(xg, w);
  const int acc = bg->accum(OpKind::kAccumSum, xw);
  const int sq = bg->unary(OpKind::kSquare, x);
  const int ms = bg->accum(OpKind::kAccumMeanLast, sq);
  const int eps = bg->unary(OpKind::kAddScalar, ms, 1e-6);
  const int rt = bg->unary(OpKind::kSqrt, eps);
  const int y = bg->binary(OpKind::kDiv, acc, rt);
  bg->new_output(y, {1, -1, -1}, DType::kF32);

  EXPECT_EQ(bg->tensor(xg).shape, (Shape{8, 128}));
  EXPECT_EQ(bg->tensor(xw).shape, (Shape{8, 64}));
  EXPECT_EQ(bg->tensor(acc).shape, (Shape{8, 64}));
  EXPECT_EQ(bg->tensor(ms).shape, (Shape{8, 1}));
  EXPECT_EQ(bg->tensor(y).shape, (Shape{8, 64}));
  for (int t : {x, g, w, xg, xw, sq}) EXPECT_EQ(bg->tensor(t).phase, Phase::kBody) << t;
  for (int t : {acc, ms, eps, rt, y}) EXPECT_EQ(bg->tensor(t).phase, Phase::kEpilogue) << t;
  EXPECT_EQ(bg->num_blocks(), 96);
  EXPECT_EQ(bg->kernel_output_shape(0), (Shape{8, 6144}));
  EXPECT_EQ(bg->kernel_input_shape(2), (Shape{4096, 6144}));
  EXPECT_EQ(bg->ops()[bg->tensor(w).producer].io_index, 2);
  EXPECT_EQ(bg->ops().back().kind, OpKind::kOutput);
  EXPECT_EQ(bg->ops().back().io_index, 0);
  EXPECT_EQ(bg->ops().back().omap, (Dim3{1, -1, -1}));

  KernelGraph fused;
  const int kx = fused.new_input({8, 4096}, DType::kF32);
  const int kg = fused.new_input({4096}, DType::kF32);
  const int kw = fused.new_input({4096, 6144}, DType::kF32);
  const std::vector<int> outs = fused.customized({kx, kg, kw}, bg);
  ASSERT_EQ(outs.size(), 1u);
  fused.mark_output(outs[0]);
  EXPECT_EQ(fused.tensor(outs[0]).shape, (Shape{8, 6144}));
  EXPECT_EQ(fused.tensor(outs[0]).dtype, DType::kF32);
  const Op& custom = fused.ops()[fused.tensor(outs[0]).producer];
  EXPECT_EQ(custom.kind, OpKind::kCustomized);
  EXPECT_EQ(custom.outputs, outs);
  EXPECT_EQ(custom.inputs, (std::vector<int>{kx, kg, kw}));
  EXPECT_EQ(fused.tensor(kx).phase, Phase::kInvariant);
}

TEST(RmsNormLinear, CustomizedCopiesTheBlockGraph) {
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 1);
  const int a = bg->new_input({4, 8}, DType::kF32, {1, -1, -1}, -1);
  bg->new_output(bg->unary(OpKind::kExp, a), {1, -1, -1}, DType::kBF16);
  KernelGraph k;
  const int ka = k.new_input({4, 8}, DType::kF32);
  const std::vector<int> outs = k.customized({ka}, bg);
  bg->new_output(a, {1, -1, -1}, DType::kF32);  // edit the builder afterwards
  const Op& custom = k.ops()[k.tensor(outs[0]).producer];
  EXPECT_EQ(custom.block_graph->num_outputs(), 1);
  EXPECT_NE(custom.block_graph.get(), bg.get());
  EXPECT_EQ(k.tensor(outs[0]).dtype, DType::kBF16);
}

TEST(RmsNormLinear, BothSplitsOnOneDimTakeTheBlockPartFirst) {
  BlockGraph bg({4, 1, 1}, 8);
  const int t = bg.new_input({64, 3}, DType::kF16, {0, -1, -1}, 0);
  EXPECT_EQ(bg.tensor(t).shape, (Shape{2, 3}));  // 64 / (4 * 8)
  EXPECT_EQ(bg.tensor(t).dtype, DType::kF16);
}

}  // namespace
}  // namespace mj::ir
