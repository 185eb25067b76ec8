// Mutation tests: each mutant of the fused RMSNorm + Linear μGraph is a valid
// graph of the same signature that computes something else, and the verifier must reject it
// on values. Each base graph is first shown to be accepted, so a verifier that accepted
// everything, or rejected everything, fails here.
#include <gtest/gtest.h>

#include "cc/testing/rmsnorm_linear.h"
#include "cc/verify/verify.h"

namespace mj::verify {

using ir::OpKind;
using testing::fused_rmsnorm_linear;
using testing::FusedRmsNormLinear;
using testing::rmsnorm_linear_reference;

namespace {

// X[16,64] rows split by grid y, W[64,64] columns split by grid x, k walked in 4 steps:
// tiles X [4,16], W [16,16], output [4,16]. Grid axes of equal size and square tiles leave
// room for mutants that still type-check.
FusedRmsNormLinear grid_2d() {
  FusedRmsNormLinear s;
  s.m = 16, s.k = 64, s.n = 64;
  s.grid = {4, 4, 1};
  s.forloop = 4;
  s.x_imap = {-1, 0, -1};
  s.omap = {1, 0, -1};
  return s;
}

// X replicated, so the X tile [16,16] and the W tile [16,16] can trade places in the matmul.
FusedRmsNormLinear square_tiles() {
  FusedRmsNormLinear s;
  s.m = 16, s.k = 64, s.n = 64;
  s.grid = {4, 1, 1};
  s.forloop = 4;
  return s;
}

VerifyResult check(const FusedRmsNormLinear& s,
                   VerifyOptions::Shrink shrink = VerifyOptions::Shrink::kAuto) {
  VerifyOptions o;
  o.shrink = shrink;
  return verify_equivalent(rmsnorm_linear_reference({s.m, s.k, s.n}, 1e-6), fused_rmsnorm_linear(s),
                           o);
}

constexpr VerifyOptions::Shrink kBothSizes[] = {VerifyOptions::Shrink::kNever,
                                                VerifyOptions::Shrink::kAlways};

void expect_rejected_on_values(const FusedRmsNormLinear& s) {
  for (VerifyOptions::Shrink shrink : kBothSizes) {
    const VerifyResult r = check(s, shrink);
    EXPECT_FALSE(r.equivalent);
    EXPECT_EQ(r.reason.rfind("not equivalent: output 0 at ", 0), 0u) << r.reason;
  }
}

TEST(VerifyMutation, BaseGraphsAreAccepted) {
  for (const FusedRmsNormLinear& s : {grid_2d(), square_tiles()}) {
    for (VerifyOptions::Shrink shrink : kBothSizes) {
      const VerifyResult r = check(s, shrink);
      EXPECT_TRUE(r.equivalent) << r.reason;
      EXPECT_EQ(r.shrunk, shrink == VerifyOptions::Shrink::kAlways);
    }
  }
}

TEST(VerifyMutation, WrongImap) {
  FusedRmsNormLinear s = grid_2d();
  s.x_imap = {0, -1, -1};  // X rows follow grid x, but the output rows follow grid y
  expect_rejected_on_values(s);
}

TEST(VerifyMutation, WrongOmap) {
  FusedRmsNormLinear s = grid_2d();
  s.omap = {0, 1, -1};  // tiles stored with the grid axes swapped
  expect_rejected_on_values(s);
}

TEST(VerifyMutation, WrongFmap) {
  // The loop walks W's columns instead of its rows (the grid takes the rows so the tile
  // keeps its shape): the k reduction is split across blocks and mixed with columns.
  FusedRmsNormLinear s = grid_2d();
  s.w_fmap = 1;
  s.w_imap = {0, -1, -1};
  expect_rejected_on_values(s);
}

TEST(VerifyMutation, MissingAccumulatorOverTheLastDim) {
  FusedRmsNormLinear s = grid_2d();
  s.rms_accum = OpKind::kAccumSum;  // sums x^2 over iterations only, not over the tile
  expect_rejected_on_values(s);
}

TEST(VerifyMutation, SwappedMatmulOperands) {
  FusedRmsNormLinear s = square_tiles();
  s.swap_matmul = true;
  expect_rejected_on_values(s);
}

TEST(VerifyMutation, SumWhereMeanIsNeeded) {
  FusedRmsNormLinear s = grid_2d();
  s.rms_accum = OpKind::kAccumSumLast;
  expect_rejected_on_values(s);
}

TEST(VerifyMutation, DroppedEps) {
  FusedRmsNormLinear s = grid_2d();
  s.with_eps = false;
  expect_rejected_on_values(s);
}

// Shrinking must not hide a mutation: the full-size graph, mutated, is still rejected.
TEST(VerifyMutation, FullSizeMutantsAreRejectedThroughShrinking) {
  FusedRmsNormLinear s;
  s.m = 8, s.k = 4096, s.n = 6144, s.grid = {96, 1, 1}, s.forloop = 32;
  FusedRmsNormLinear sum_not_mean = s, no_eps = s;
  sum_not_mean.rms_accum = OpKind::kAccumSumLast;
  no_eps.with_eps = false;
  for (const FusedRmsNormLinear& m : {sum_not_mean, no_eps}) {
    const VerifyResult r = check(m);
    EXPECT_FALSE(r.equivalent);
    EXPECT_TRUE(r.shrunk);
    EXPECT_EQ(r.reason.rfind("not equivalent: output 0 at ", 0), 0u) << r.reason;
  }
}

}  // namespace
}  // namespace mj::verify
