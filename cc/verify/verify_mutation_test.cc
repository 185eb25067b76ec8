// Mutation tests: each mutant of the fused RMSNorm + Linear μGraph is a valid graph of the
// same signature that computes something else, and the verifier must reject it on values.
// Each base graph is first shown to be accepted, so a verifier that accepted everything, or
// rejected everything, fails here. Then the small identities that once fooled the verifier
// (shrinking, square roots, division, an unstabilized softmax) and two that it once rejected.
// benchmarks/verifier_mutations.py counts random mutants of every paper graph.
#include <gtest/gtest.h>

#include <functional>

#include "cc/testing/rmsnorm_linear.h"
#include "cc/verify/verify.h"

namespace mj::verify {

using ir::DType;
using ir::KernelGraph;
using ir::OpKind;
using ir::ReduceKind;
using ir::Shape;
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

// ---- small identities: each pair is equal over the reals on part of the domain at most ----

KernelGraph unary_graph(const Shape& shape, const std::function<int(KernelGraph&, int)>& body) {
  KernelGraph g;
  g.mark_output(body(g, g.new_input(shape, DType::kF32)));
  return g;
}

KernelGraph binary_graph(const std::function<int(KernelGraph&, int, int)>& body) {
  KernelGraph g;
  const int x = g.new_input({4, 8}, DType::kF32);
  const int y = g.new_input({4, 8}, DType::kF32);
  g.mark_output(body(g, x, y));
  return g;
}

int sqrt_of(KernelGraph& g, int x) { return g.unary(OpKind::kSqrt, x); }
int rsqrt_of(KernelGraph& g, int x) { return g.unary(OpKind::kRsqrt, x); }

void expect_rejected_both_ways(const KernelGraph& a, const KernelGraph& b,
                               VerifyOptions::Shrink shrink = VerifyOptions::Shrink::kAuto) {
  VerifyOptions o;
  o.shrink = shrink;
  const VerifyResult ab = verify_equivalent(a, b, o), ba = verify_equivalent(b, a, o);
  EXPECT_FALSE(ab.equivalent);
  EXPECT_FALSE(ba.equivalent);
  EXPECT_NE(ab.reason, "");
}

// Shrinking cut the reduced dim to 2, where mean(x) = sum(x) * 0.5: once accepted. The shrunk
// mean divides by the full-size count instead.
TEST(VerifyMutation, MeanIsNotHalfTheSumOnAShrunkInstance) {
  const Shape big{256, 512};
  const KernelGraph mean =
      unary_graph(big, [](KernelGraph& g, int x) { return g.reduce(x, -1, ReduceKind::kMean); });
  const KernelGraph half_sum = unary_graph(big, [](KernelGraph& g, int x) {
    return g.unary(OpKind::kMulScalar, g.reduce(x, -1, ReduceKind::kSum), 0.5);
  });
  const KernelGraph scaled_sum = unary_graph(big, [](KernelGraph& g, int x) {
    return g.unary(OpKind::kMulScalar, g.reduce(x, -1, ReduceKind::kSum), 1.0 / 512);
  });
  for (VerifyOptions::Shrink shrink : kBothSizes) {
    expect_rejected_both_ways(mean, half_sum, shrink);
    VerifyOptions o;
    o.shrink = shrink;
    const VerifyResult r = verify_equivalent(mean, scaled_sum, o);  // once a false reject
    EXPECT_TRUE(r.equivalent) << r.reason;
    EXPECT_EQ(r.shrunk, shrink == VerifyOptions::Shrink::kAlways);
  }
}

// The fused RMSNorm + Linear divides by accum_rms_last's root of a mean over F * tile values:
// full-size counts keep it equal to the reference's rms_norm on a shrunk instance.
TEST(VerifyMutation, ShrunkRmsNormsStillMatchAndWrongCountsDoNot) {
  FusedRmsNormLinear s = grid_2d();
  s.rms_accum = OpKind::kAccumSumLast;  // a sum where the mean is needed, at every size
  for (VerifyOptions::Shrink shrink : kBothSizes) {
    EXPECT_TRUE(check(grid_2d(), shrink).equivalent);
    EXPECT_FALSE(check(s, shrink).equivalent);
  }
}

// sqrt(p) = p^((p+1)/4) was multiplicative in the field: these were accepted though they
// differ in where they are NaN (negative operands).
TEST(VerifyMutation, RootsOfProductsAndQuotientsAreNotProductsOfRoots) {
  using G = KernelGraph;
  expect_rejected_both_ways(
      binary_graph([](G& g, int x, int y) { return sqrt_of(g, g.binary(OpKind::kMul, x, y)); }),
      binary_graph(
          [](G& g, int x, int y) { return g.binary(OpKind::kMul, sqrt_of(g, x), sqrt_of(g, y)); }));
  expect_rejected_both_ways(
      binary_graph([](G& g, int x, int y) { return rsqrt_of(g, g.binary(OpKind::kMul, x, y)); }),
      binary_graph([](G& g, int x, int y) {
        return g.binary(OpKind::kMul, rsqrt_of(g, x), rsqrt_of(g, y));
      }));
  expect_rejected_both_ways(
      binary_graph([](G& g, int x, int y) { return sqrt_of(g, g.binary(OpKind::kDiv, x, y)); }),
      binary_graph(
          [](G& g, int x, int y) { return g.binary(OpKind::kDiv, sqrt_of(g, x), sqrt_of(g, y)); }));
  // rsqrt is recip(sqrt): these stay equal.
  const KernelGraph rsqrt = unary_graph({4, 8}, rsqrt_of);
  const KernelGraph one_over_root =
      unary_graph({4, 8}, [](G& g, int x) { return g.unary(OpKind::kRecip, sqrt_of(g, x)); });
  EXPECT_TRUE(verify_equivalent(rsqrt, one_over_root).equivalent);
}

// x * y / y is x except at y = 0 (and y = inf): a divisor the other graph does not have.
TEST(VerifyMutation, DividingByANewValueIsNotTheIdentity) {
  expect_rejected_both_ways(binary_graph([](KernelGraph& g, int x, int y) {
                              return g.binary(OpKind::kDiv, g.binary(OpKind::kMul, x, y), y);
                            }),
                            binary_graph([](KernelGraph& g, int x, int y) {
                              return g.binary(OpKind::kAdd, x, g.unary(OpKind::kMulScalar, y, 0.0));
                            }));
}

TEST(VerifyMutation, AnUnstabilizedSoftmaxIsRejected) {
  auto softmax = [](bool stabilized) {
    return unary_graph({4, 8}, [stabilized](KernelGraph& g, int x) {
      int s = x;
      if (stabilized) s = g.binary(OpKind::kSub, x, g.reduce(x, -1, ReduceKind::kMax));
      const int e = g.unary(OpKind::kExp, s);
      return g.binary(OpKind::kDiv, e, g.reduce(e, -1, ReduceKind::kSum));
    });
  };
  expect_rejected_both_ways(softmax(true), softmax(false));
}

// Once false rejects; relu is (x + A(x)) / 2 with A even.
TEST(VerifyMutation, ReluMinusReluOfTheNegationIsAccepted) {
  const KernelGraph diff = unary_graph({4, 8}, [](KernelGraph& g, int x) {
    return g.binary(OpKind::kSub, g.unary(OpKind::kRelu, x),
                    g.unary(OpKind::kRelu, g.unary(OpKind::kNeg, x)));
  });
  const KernelGraph x = unary_graph(
      {4, 8}, [](KernelGraph& g, int x) { return g.unary(OpKind::kAddScalar, x, 0.0); });
  EXPECT_TRUE(verify_equivalent(diff, x).equivalent);
  const KernelGraph sum = unary_graph({4, 8}, [](KernelGraph& g, int x) {  // |x|, not x
    return g.binary(OpKind::kAdd, g.unary(OpKind::kRelu, x),
                    g.unary(OpKind::kRelu, g.unary(OpKind::kNeg, x)));
  });
  expect_rejected_both_ways(sum, x);
}

// Known false reject (docs/ir-semantics.md): max is only associative and commutative in the
// fingerprint, so max(x + 1) = max(x) + 1 is not provable, a fusion the search cannot find.
TEST(VerifyMutation, MaxOfAShiftIsAKnownFalseReject) {
  const KernelGraph a = unary_graph({4, 8}, [](KernelGraph& g, int x) {
    return g.reduce(g.unary(OpKind::kAddScalar, x, 1.0), -1, ReduceKind::kMax);
  });
  const KernelGraph b = unary_graph({4, 8}, [](KernelGraph& g, int x) {
    return g.unary(OpKind::kAddScalar, g.reduce(x, -1, ReduceKind::kMax), 1.0);
  });
  EXPECT_FALSE(verify_equivalent(a, b).equivalent);
}

}  // namespace
}  // namespace mj::verify
