// The fused LayerNorm + Linear μGraph (cc/testing/layernorm_linear.h) computes what the
// unfused graph does, with and without gamma and beta, in float64 and float32; and in float32
// it stays as accurate as the unfused graph on rows built to break a one-pass variance: a
// large mean over a small spread, where E[x^2] - mean^2 cancels to nothing, and a constant
// row, whose variance is exactly 0.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cc/interp/float_interp.h"
#include "cc/interp/interp.h"
#include "cc/interp/interp_test_support.h"
#include "cc/testing/layernorm_linear.h"

namespace mj::interp {

using testing::fused_layernorm_linear;
using testing::FusedLayerNormLinear;
using testing::layernorm_linear_reference;

namespace {

using interp_testing::cast_tensors;
using interp_testing::mismatch;
using interp_testing::random_tensor;

std::vector<DenseTensor<double>> random_inputs(const FusedLayerNormLinear& f, std::mt19937& rng) {
  const auto& s = f.shape;
  std::vector<DenseTensor<double>> in = {random_tensor({s.m, s.k}, rng)};
  if (f.affine) {
    in.push_back(random_tensor({1, s.k}, rng, 0.5, 1.5));
    in.push_back(random_tensor({1, s.k}, rng));
  }
  in.push_back(random_tensor({s.k, s.n}, rng));
  return in;
}

template <class T>
class LayerNormLinearFusion : public ::testing::Test {};
using FloatTypes = ::testing::Types<double, float>;
TYPED_TEST_SUITE(LayerNormLinearFusion, FloatTypes);

TYPED_TEST(LayerNormLinearFusion, FusedEqualsUnfused) {
  for (bool affine : {false, true}) {
    FusedLayerNormLinear f;
    f.affine = affine;
    std::mt19937 rng(2405);
    const auto inputs = random_inputs(f, rng);
    const auto want = interpret_f64(layernorm_linear_reference(f.shape, affine, f.eps), inputs);
    const auto got = interpret(fused_layernorm_linear(f), cast_tensors<TypeParam>(inputs),
                               FloatDomain<TypeParam>{});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(mismatch(got[0], want[0]), "") << "affine " << affine;
  }
}

// max |a - b| / max |b| over row r of [m, n] outputs.
double row_error(const DenseTensor<float>& a, const DenseTensor<float>& b, int64_t r) {
  const int64_t n = b.shape[1];
  double worst = 0, scale = 0;
  for (int64_t j = r * n; j < (r + 1) * n; ++j) {
    worst = std::max(worst, std::fabs(double(a.data[j]) - double(b.data[j])));
    scale = std::max(scale, std::fabs(double(b.data[j])));
  }
  return scale > 0 ? worst / scale : worst;
}

TEST(LayerNormLinearFusionF32, AsAccurateAsTheUnfusedGraphOnALargeMean) {
  FusedLayerNormLinear f;
  f.affine = true;
  std::mt19937 rng(15);
  auto inputs = random_inputs(f, rng);
  const int64_t k = f.shape.k;
  std::vector<double>& x = inputs[0].data;
  for (int64_t j = 0; j < k; ++j) {
    x[1 * k + j] = 1e4 + 1e-2 * x[1 * k + j];  // mean 1e4, spread 1e-2
    x[2 * k + j] = 5.0;                        // variance exactly 0
  }
  // The inputs break a one-pass variance: E[x^2] - mean^2 in float32 on row 1 is nowhere
  // near its variance (about 3e-5), the last digits of 1e8 being about 8.
  float sum = 0, sum_sq = 0;
  for (int64_t j = 0; j < k; ++j) {
    const float v = float(x[1 * k + j]);
    sum += v, sum_sq += v * v;
  }
  const float one_pass = sum_sq / float(k) - (sum / float(k)) * (sum / float(k));
  double two_pass = 0, mean = 0;
  for (int64_t j = 0; j < k; ++j) mean += x[1 * k + j] / double(k);
  for (int64_t j = 0; j < k; ++j) two_pass += (x[1 * k + j] - mean) * (x[1 * k + j] - mean);
  two_pass /= double(k);
  ASSERT_GT(std::fabs(double(one_pass) - two_pass), 100 * two_pass);

  const auto f32 = cast_tensors<float>(inputs);
  const FloatDomain<float> d;
  const auto unfused = interpret(layernorm_linear_reference(f.shape, true, f.eps), f32, d);
  const auto fused = interpret(fused_layernorm_linear(f), f32, d);
  // Both take the mean over the same whole row and center by it, so they differ only in the
  // order of the k-sums of well-scaled terms: float_check.py's float32 tolerance, 2^-13.
  for (int64_t r = 0; r < f.shape.m; ++r) {
    EXPECT_LE(row_error(fused[0], unfused[0], r), std::ldexp(1.0, -13)) << "row " << r;
  }
}

}  // namespace
}  // namespace mj::interp
