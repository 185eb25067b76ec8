// The paper's fused RMSNorm + Linear μGraph: one kernel that accumulates (X*G)@W and the
// mean of X^2 over the same for-loop and divides the rms out after the matmul. It must equal
// the unfused kernel graph rms_norm(X) * G @ W, and both must equal brute-force loops.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "cc/interp/interp.h"
#include "cc/interp/interp_test_support.h"
#include "cc/ir/graph.h"

namespace mj::interp {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::KernelGraph;
using ir::OpKind;

namespace {

using interp_testing::cast_tensors;
using interp_testing::mismatch;
using interp_testing::random_tensor;

constexpr int64_t kM = 4, kK = 64, kN = 96;
constexpr int kGrid = 6, kSteps = 4;
constexpr double kEps = 1e-5;

KernelGraph unfused_graph() {
  KernelGraph g;
  const int x = g.new_input({kM, kK}, DType::kF32);
  const int gain = g.new_input({kK}, DType::kF32);
  const int w = g.new_input({kK, kN}, DType::kF32);
  g.mark_output(g.matmul(g.binary(OpKind::kMul, g.rms_norm(x, kEps), gain), w));
  return g;
}

KernelGraph fused_graph() {
  // Block b owns output columns [16b, 16b + 16); the loop walks K in 4 steps of 16.
  auto bg = std::make_shared<BlockGraph>(Dim3{kGrid, 1, 1}, kSteps);
  const int x = bg->new_input({kM, kK}, DType::kF32, {-1, -1, -1}, 1);
  const int gain = bg->new_input({kK}, DType::kF32, {-1, -1, -1}, 0);
  const int w = bg->new_input({kK, kN}, DType::kF32, {1, -1, -1}, 0);
  const int acc = bg->accum(OpKind::kAccumSum, bg->matmul(bg->binary(OpKind::kMul, x, gain), w));
  const int mean_sq = bg->accum(OpKind::kAccumMeanLast, bg->unary(OpKind::kSquare, x));
  const int rms = bg->unary(OpKind::kSqrt, bg->unary(OpKind::kAddScalar, mean_sq, kEps));
  bg->new_output(bg->binary(OpKind::kDiv, acc, rms), {1, -1, -1}, DType::kF32);

  KernelGraph g;
  const int kx = g.new_input({kM, kK}, DType::kF32);
  const int kg = g.new_input({kK}, DType::kF32);
  const int kw = g.new_input({kK, kN}, DType::kF32);
  g.mark_output(g.customized({kx, kg, kw}, bg).at(0));
  return g;
}

DenseTensor<double> brute_force(const DenseTensor<double>& x, const DenseTensor<double>& gain,
                                const DenseTensor<double>& w) {
  DenseTensor<double> y{{kM, kN}, {}};
  for (int64_t r = 0; r < kM; ++r) {
    double sq = 0;
    for (int64_t k = 0; k < kK; ++k) sq += x.data[r * kK + k] * x.data[r * kK + k];
    const double rms = std::sqrt(sq / kK + kEps);
    for (int64_t c = 0; c < kN; ++c) {
      double dot = 0;
      for (int64_t k = 0; k < kK; ++k) {
        dot += x.data[r * kK + k] / rms * gain.data[k] * w.data[k * kN + c];
      }
      y.data.push_back(dot);
    }
  }
  return y;
}

template <class T>
class RmsNormLinearFusion : public ::testing::Test {};
using FloatTypes = ::testing::Types<double, float>;
TYPED_TEST_SUITE(RmsNormLinearFusion, FloatTypes);

TYPED_TEST(RmsNormLinearFusion, FusedEqualsUnfused) {
  std::mt19937 rng(2405);
  const std::vector<DenseTensor<double>> inputs = {random_tensor({kM, kK}, rng),
                                                   random_tensor({kK}, rng, 0.5, 1.5),
                                                   random_tensor({kK, kN}, rng)};
  const FloatDomain<TypeParam> d;
  const auto unfused = interpret(unfused_graph(), cast_tensors<TypeParam>(inputs), d);
  const auto fused = interpret(fused_graph(), cast_tensors<TypeParam>(inputs), d);
  const auto want = brute_force(inputs[0], inputs[1], inputs[2]);
  ASSERT_EQ(unfused.size(), 1u);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(mismatch(unfused[0], want), "");
  EXPECT_EQ(mismatch(fused[0], want), "");
}

}  // namespace
}  // namespace mj::interp
