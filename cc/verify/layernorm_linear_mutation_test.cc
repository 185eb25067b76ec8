// The fused LayerNorm + Linear μGraph (cc/testing/layernorm_linear.h) is equivalent to the
// frontend's unfused LayerNorm followed by a matmul, with and without gamma and beta; its
// near misses (no mean correction, a variance without the mean^2, eps outside the square
// root, gamma dropped) are valid graphs of the same signature, and the verifier must reject
// each of them.
#include <gtest/gtest.h>

#include "cc/testing/layernorm_linear.h"
#include "cc/verify/verify.h"

namespace mj::verify {

using testing::fused_layernorm_linear;
using testing::FusedLayerNormLinear;
using testing::layernorm_linear_reference;

namespace {

// Against the reference with eps 1e-6 (FusedLayerNormLinear's default).
VerifyResult check(const FusedLayerNormLinear& f, VerifyOptions::Shrink shrink) {
  VerifyOptions o;
  o.shrink = shrink;
  return verify_equivalent(layernorm_linear_reference(f.shape, f.affine, 1e-6),
                           fused_layernorm_linear(f), o);
}

constexpr VerifyOptions::Shrink kBothSizes[] = {VerifyOptions::Shrink::kNever,
                                                VerifyOptions::Shrink::kAlways};

class LayerNormLinearVerify : public ::testing::TestWithParam<bool> {
 protected:
  FusedLayerNormLinear base() const {
    FusedLayerNormLinear f;
    f.affine = GetParam();
    return f;
  }
};

TEST_P(LayerNormLinearVerify, TheFusedGraphIsAccepted) {
  for (auto shrink : kBothSizes) {
    const VerifyResult r = check(base(), shrink);
    EXPECT_TRUE(r.equivalent) << r.reason;
  }
}

TEST_P(LayerNormLinearVerify, WithoutTheMeanCorrectionIsRejected) {
  FusedLayerNormLinear f = base();
  f.centered = false;
  for (auto shrink : kBothSizes) EXPECT_FALSE(check(f, shrink).equivalent);
}

TEST_P(LayerNormLinearVerify, AVarianceWithoutTheMeanSquareIsRejected) {
  FusedLayerNormLinear f = base();
  f.centered_variance = false;
  for (auto shrink : kBothSizes) EXPECT_FALSE(check(f, shrink).equivalent);
}

TEST_P(LayerNormLinearVerify, EpsOutsideTheSquareRootIsRejected) {
  FusedLayerNormLinear f = base();
  f.eps_inside_sqrt = false;
  for (auto shrink : kBothSizes) EXPECT_FALSE(check(f, shrink).equivalent);
}

TEST_P(LayerNormLinearVerify, AnotherEpsIsRejected) {
  FusedLayerNormLinear f = base();
  f.eps = 1e-5;
  for (auto shrink : kBothSizes) EXPECT_FALSE(check(f, shrink).equivalent);
}

INSTANTIATE_TEST_SUITE_P(AffineOrNot, LayerNormLinearVerify, ::testing::Bool());

TEST(LayerNormLinearVerifyAffine, DroppingGammaIsRejected) {
  FusedLayerNormLinear f;
  f.affine = true;
  f.with_gamma = false;
  for (auto shrink : kBothSizes) EXPECT_FALSE(check(f, shrink).equivalent);
}

}  // namespace
}  // namespace mj::verify
