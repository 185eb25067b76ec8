// Predefined kernel ops as library kernels, with the XLA-like fusion of kernel_graph_work.h.
#include "cc/cost/kernel_graph_work.h"

#include <gtest/gtest.h>

#include "cc/testing/rmsnorm_linear.h"

namespace mj::cost {

using ir::DType;
using ir::KernelGraph;
using ir::OpKind;
using ir::ReduceKind;
using testing::column_split;
using testing::fused_rmsnorm_linear_block;
using testing::rmsnorm_linear_reference;

namespace {

std::vector<std::string> labels(const std::vector<KernelWork>& ks) {
  std::vector<std::string> out;
  for (const KernelWork& k : ks) out.push_back(k.label);
  return out;
}

TEST(KernelGraphWork, ReferenceRmsNormLinearIsOneFusionAndOneMatmul) {
  const std::vector<KernelWork> ks = kernel_graph_work(rmsnorm_linear_reference());
  ASSERT_EQ(labels(ks), (std::vector<std::string>{"fusion(rms_norm, mul)", "matmul"}));
  const double x = 8 * 4096 * 4, g = 4096 * 4, w = 4096.0 * 6144 * 4, y = 8 * 6144 * 4;
  EXPECT_DOUBLE_EQ(ks[0].bytes_read, x + g);
  EXPECT_DOUBLE_EQ(ks[0].bytes_written, x);  // the normalized, scaled X the matmul reads
  EXPECT_DOUBLE_EQ(ks[0].flops, 3 * 8 * 4096 + 8 * 4096);
  EXPECT_EQ(ks[1].kind, KernelKind::kLibraryMatmul);
  EXPECT_DOUBLE_EQ(ks[1].bytes_read, x + w);
  EXPECT_DOUBLE_EQ(ks[1].bytes_written, y);
  EXPECT_DOUBLE_EQ(ks[1].flops, 2.0 * 8 * 6144 * 4096);
  EXPECT_EQ(ks[1].matmul_rows, 8);
}

TEST(KernelGraphWork, LibraryMatmulCountsItsSixteenBitOperands) {
  KernelGraph g;
  const int x = g.new_input({4, 64}, DType::kF32);
  const int w = g.new_input({64, 32}, DType::kBF16);
  g.mark_output(g.matmul(x, w));
  const std::vector<KernelWork> ks = kernel_graph_work(g);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_DOUBLE_EQ(ks[0].bytes_16_bit_operands, 64 * 32 * 2);
  EXPECT_DOUBLE_EQ(ks[0].bytes_read, 4 * 64 * 4 + 64 * 32 * 2);
}

TEST(KernelGraphWork, ElementwiseChainFusesAndReadsSharedOperandOnce) {
  KernelGraph g;
  const int a = g.new_input({4, 16}, DType::kF32);
  const int e = g.unary(OpKind::kExp, a);
  g.mark_output(g.binary(OpKind::kAdd, g.unary(OpKind::kNeg, e), a));
  const std::vector<KernelWork> ks = kernel_graph_work(g);
  ASSERT_EQ(labels(ks), (std::vector<std::string>{"fusion(exp, neg, add)"}));
  EXPECT_DOUBLE_EQ(ks[0].bytes_read, 4 * 16 * 4);
  EXPECT_DOUBLE_EQ(ks[0].bytes_written, 4 * 16 * 4);
  EXPECT_DOUBLE_EQ(ks[0].flops, 3 * 64);
}

TEST(KernelGraphWork, ValuesUsedTwiceOrReturnedAreWritten) {
  KernelGraph g;
  const int a = g.new_input({4, 16}, DType::kBF16);
  const int e = g.unary(OpKind::kExp, a);  // read by neg and by mul
  const int n = g.unary(OpKind::kNeg, e);  // a program output, and read by mul
  g.mark_output(n);
  g.mark_output(g.binary(OpKind::kMul, n, e));
  const std::vector<KernelWork> ks = kernel_graph_work(g);
  ASSERT_EQ(labels(ks), (std::vector<std::string>{"fusion(exp)", "fusion(neg)", "fusion(mul)"}));
  const double t = 4 * 16 * 2;
  EXPECT_DOUBLE_EQ(ks[0].bytes_written, t);
  EXPECT_DOUBLE_EQ(ks[1].bytes_read, t);
  EXPECT_DOUBLE_EQ(ks[1].bytes_written, t);
  EXPECT_DOUBLE_EQ(ks[2].bytes_read, 2 * t);
}

TEST(KernelGraphWork, SoftmaxSplitsAtBroadcastsAndSharedValues) {
  KernelGraph g;
  const int x = g.new_input({8, 128}, DType::kF32);
  const int m = g.reduce(x, -1, ReduceKind::kMax);
  const int e = g.unary(OpKind::kExp, g.binary(OpKind::kSub, x, m));  // m is broadcast
  const int s = g.reduce(e, -1, ReduceKind::kSum);                    // e is read twice
  g.mark_output(g.binary(OpKind::kDiv, e, s));
  EXPECT_EQ(labels(kernel_graph_work(g)),
            (std::vector<std::string>{"fusion(reduce)", "fusion(sub, exp)", "fusion(reduce)",
                                      "fusion(div)"}));
}

TEST(KernelGraphWork, ElementwiseFeedsAReductionButAFusionHoldsOnlyOne) {
  KernelGraph g;
  const int x = g.new_input({8, 128}, DType::kF32);
  const int r = g.reduce(g.unary(OpKind::kSquare, x), 1, ReduceKind::kSum);  // input fusion
  const int scaled = g.unary(OpKind::kMulScalar, r, 0.5);  // joins the reduction's fusion
  g.mark_output(g.reduce(scaled, 0, ReduceKind::kMax));    // would be a second reduction
  const std::vector<KernelWork> ks = kernel_graph_work(g);
  ASSERT_EQ(labels(ks),
            (std::vector<std::string>{"fusion(square, reduce, mul_scalar)", "fusion(reduce)"}));
  EXPECT_DOUBLE_EQ(ks[0].bytes_read, 8 * 128 * 4);
  EXPECT_DOUBLE_EQ(ks[0].bytes_written, 8 * 4);
}

TEST(KernelGraphWork, CustomizedOpIsOneKernelBetweenLibraryKernels) {
  KernelGraph g;
  const int x = g.new_input({8, 4096}, DType::kF32);
  const int gain = g.new_input({4096}, DType::kF32);
  const int w = g.new_input({4096, 6144}, DType::kF32);
  const int y = g.customized({x, gain, w}, fused_rmsnorm_linear_block(column_split(96, 32)))[0];
  g.mark_output(g.unary(OpKind::kSilu, y));
  const std::vector<KernelWork> ks = kernel_graph_work(g);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].kind, KernelKind::kCustomized);
  EXPECT_EQ(ks[0].blocks, 96);
  EXPECT_EQ(ks[1].label, "fusion(silu)");
  EXPECT_DOUBLE_EQ(ks[1].bytes_read, 8 * 6144 * 4);
}

}  // namespace
}  // namespace mj::cost
