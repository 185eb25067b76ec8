// The text form shows every level: kernel ops, the nested block graph with its maps, tile
// shapes, phases, accumulators, stores and fusion groups.
#include <gtest/gtest.h>

#include "cc/ir/print.h"

namespace mj::ir {
namespace {

bool contains(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

#define EXPECT_CONTAINS(text, piece) \
  EXPECT_TRUE(contains(text, piece)) << "missing '" << (piece) << "' in:\n" << (text)

TEST(Print, ReferenceKernelGraph) {
  KernelGraph ref;
  const int x = ref.new_input({8, 4096}, DType::kF32);
  const int g = ref.new_input({4096}, DType::kBF16);
  const int w = ref.new_input({4096, 6144}, DType::kF32);
  const int y = ref.matmul(ref.binary(OpKind::kMul, ref.rms_norm(x, 1e-6), g), w);
  ref.mark_output(ref.reduce(y, -1, ReduceKind::kMax));
  const std::string text = to_string(ref);
  EXPECT_CONTAINS(text, "t0 = input#0  [8, 4096] float32");
  EXPECT_CONTAINS(text, "t1 = input#1  [4096] bfloat16");
  EXPECT_CONTAINS(text, "t3 = rms_norm(t0, eps=1e-06)  [8, 4096] float32");
  EXPECT_CONTAINS(text, "t5 = matmul(t4, t2)  [8, 6144] float32");
  EXPECT_CONTAINS(text, "t6 = reduce(t5, dim=1, max)  [8, 1] float32");
  EXPECT_CONTAINS(text, "output#0 = t6");
}

TEST(Print, FusedRmsNormLinear) {
  auto bg = std::make_shared<BlockGraph>(Dim3{96, 1, 1}, 32);
  const int x = bg->new_input({8, 4096}, DType::kF32, {-1, -1, -1}, 1);
  const int g = bg->new_input({4096}, DType::kF32, {-1, -1, -1}, 0);
  const int w = bg->new_input({4096, 6144}, DType::kF32, {1, -1, -1}, 0);
  const int acc = bg->accum(OpKind::kAccumSum, bg->matmul(bg->binary(OpKind::kMul, x, g), w));
  const int ms = bg->accum(OpKind::kAccumMeanLast, bg->unary(OpKind::kSquare, x));
  const int den = bg->unary(OpKind::kSqrt, bg->unary(OpKind::kAddScalar, ms, 1e-6));
  bg->new_output(bg->binary(OpKind::kDiv, acc, den), {1, -1, -1}, DType::kBF16);
  KernelGraph fused;
  const int kx = fused.new_input({8, 4096}, DType::kF32);
  const int kg = fused.new_input({4096}, DType::kF32);
  const int kw = fused.new_input({4096, 6144}, DType::kF32);
  fused.mark_output(fused.customized({kx, kg, kw}, bg)[0]);
  const std::string text = to_string(fused);
  EXPECT_CONTAINS(text, "t3 = customized(t0, t1, t2)  [8, 6144] bfloat16\n");
  EXPECT_CONTAINS(text, "\n    block graph grid=(96, 1, 1) forloop_range=32\n");
  EXPECT_CONTAINS(text,
                  "\n      t0 = input#0 imap=(-1, -1, -1) fmap=1 of [8, 4096]  "
                  "tile [8, 128] float32  body\n");
  EXPECT_CONTAINS(text, "t2 = input#2 imap=(1, -1, -1) fmap=0 of [4096, 6144]  tile [128, 64]");
  EXPECT_CONTAINS(text, "t3 = mul(t0, t1)  [8, 128] float32  body  group 3");
  EXPECT_CONTAINS(text, "t4 = matmul(t3, t2)  [8, 64] float32  body  group 4");
  EXPECT_CONTAINS(text, "t5 = accum_sum(t4)  [8, 64] float32  epilogue  accumulator  group 5");
  EXPECT_CONTAINS(text, "t7 = accum_mean_last(t6)  [8, 1] float32  epilogue  accumulator");
  EXPECT_CONTAINS(text, "t8 = add_scalar(t7, 1e-06)  [8, 1] float32  epilogue  group 7");
  EXPECT_CONTAINS(text, "t10 = div(t5, t9)  [8, 64] float32  epilogue  group 5");
  EXPECT_CONTAINS(text, "output#0 = t10 omap=(1, -1, -1)  -> [8, 6144] bfloat16");
  EXPECT_CONTAINS(text, "\n  output#0 = t3\n");
  // The block graph alone prints the same lines at the chosen indent.
  EXPECT_CONTAINS(to_string(*bg, 2), "  block graph grid=(96, 1, 1) forloop_range=32\n    t0 =");
}

TEST(Print, MultipleOutputsAndScalars) {
  auto bg = std::make_shared<BlockGraph>(Dim3{1, 1, 1}, 1);
  const int a = bg->new_input({4}, DType::kF32, {-1, -1, -1}, -1);
  bg->new_output(bg->unary(OpKind::kMulScalar, a, 0.1), {-1, -1, -1}, DType::kF32);
  bg->new_output(bg->concat(a, a, 0), {-1, -1, -1}, DType::kF16);
  KernelGraph k;
  k.customized({k.new_input({4}, DType::kF32)}, bg);
  const std::string text = to_string(k);
  EXPECT_CONTAINS(text, "t1, t2 = customized(t0)  [4] float32, [8] float16");
  EXPECT_CONTAINS(text, "mul_scalar(t0, 0.1)");
  EXPECT_CONTAINS(text, "concat(t0, t0, dim=0)");
  EXPECT_CONTAINS(text, "  invariant");
}

}  // namespace
}  // namespace mj::ir
