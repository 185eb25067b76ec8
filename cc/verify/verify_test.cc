// verify_equivalent on pairs that are equivalent, and on what it must report instead of
// guessing: signature mismatches, nested exp, division by zero.
#include "cc/verify/verify.h"

#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "cc/testing/rmsnorm_linear.h"

namespace mj::verify {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::KernelGraph;
using ir::OpKind;
using ir::ReduceKind;
using ir::Shape;
using testing::fused_rmsnorm_linear;
using testing::FusedRmsNormLinear;
using testing::rmsnorm_linear_reference;

namespace {

VerifyOptions never_shrink() {
  VerifyOptions o;
  o.shrink = VerifyOptions::Shrink::kNever;
  return o;
}

void expect_equivalent(const KernelGraph& a, const KernelGraph& b, const VerifyOptions& o = {}) {
  const VerifyResult r = verify_equivalent(a, b, o);
  EXPECT_TRUE(r.equivalent) << r.reason;
  EXPECT_EQ(r.reason, "");
  EXPECT_LE(r.false_accept_log2, -40.0);
  EXPECT_GE(r.trials, 2);
}

TEST(VerifyEquivalent, Distributivity) {
  auto build = [](bool distributed) {
    KernelGraph g;
    const int a = g.new_input({4, 8}, DType::kF32);
    const int b = g.new_input({4, 8}, DType::kF32);
    const int c = g.new_input({1, 8}, DType::kF32);
    g.mark_output(distributed ? g.binary(OpKind::kAdd, g.binary(OpKind::kMul, a, c),
                                         g.binary(OpKind::kMul, b, c))
                              : g.binary(OpKind::kMul, g.binary(OpKind::kAdd, a, b), c));
    return g;
  };
  expect_equivalent(build(false), build(true));

  KernelGraph wrong;  // a*c + b
  const int a = wrong.new_input({4, 8}, DType::kF32);
  const int b = wrong.new_input({4, 8}, DType::kF32);
  const int c = wrong.new_input({1, 8}, DType::kF32);
  wrong.mark_output(wrong.binary(OpKind::kAdd, wrong.binary(OpKind::kMul, a, c), b));
  const VerifyResult r = verify_equivalent(build(false), wrong);
  EXPECT_FALSE(r.equivalent);
  EXPECT_NE(r.reason.find("output 0"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("trial 0"), std::string::npos) << r.reason;
}

TEST(VerifyEquivalent, FusedRmsNormLinearSmallAtFullSize) {
  const VerifyResult r =
      verify_equivalent(rmsnorm_linear_reference({4, 64, 96}),
                        fused_rmsnorm_linear(FusedRmsNormLinear{}), never_shrink());
  EXPECT_TRUE(r.equivalent) << r.reason;
  EXPECT_FALSE(r.shrunk);
  EXPECT_LE(r.false_accept_log2, -40.0);
}

TEST(VerifyEquivalent, FusedRmsNormLinearSmallShrunk) {
  VerifyOptions o;
  o.shrink = VerifyOptions::Shrink::kAlways;
  const VerifyResult r = verify_equivalent(rmsnorm_linear_reference({4, 64, 96}),
                                           fused_rmsnorm_linear(FusedRmsNormLinear{}), o);
  EXPECT_TRUE(r.equivalent) << r.reason;
  EXPECT_TRUE(r.shrunk);
}

// The example: X[8,4096], G[4096], W[4096,6144], grid 96, for-loop 32. Only a shrunk
// instance makes this cheap (a few ms; the full one is ~10^8 field multiplications per trial).
TEST(VerifyEquivalent, FusedRmsNormLinearFullSizeViaShrinking) {
  FusedRmsNormLinear s;
  s.m = 8, s.k = 4096, s.n = 6144, s.grid = {96, 1, 1}, s.forloop = 32;
  const VerifyResult r =
      verify_equivalent(rmsnorm_linear_reference({8, 4096, 6144}), fused_rmsnorm_linear(s));
  EXPECT_TRUE(r.equivalent) << r.reason;
  EXPECT_TRUE(r.shrunk);
  EXPECT_LE(r.false_accept_log2, -40.0);
}

// times_recip: e * recip(sum(e)) instead of e / sum(e).
KernelGraph softmax(bool stabilized, bool times_recip = false) {
  KernelGraph g;
  const int x = g.new_input({4, 8}, DType::kF32);
  int shifted = x;
  if (stabilized) shifted = g.binary(OpKind::kSub, x, g.reduce(x, -1, ReduceKind::kMax));
  const int e = g.unary(OpKind::kExp, shifted);
  const int sum = g.reduce(e, -1, ReduceKind::kSum);
  g.mark_output(times_recip ? g.binary(OpKind::kMul, e, g.unary(OpKind::kRecip, sum))
                            : g.binary(OpKind::kDiv, e, sum));
  return g;
}

// Equal over the reals, but the unstabilized one is NaN in floats once a logit passes ~88
// (docs/ir-semantics.md, "Numerical safety"): rejected both ways.
TEST(VerifyEquivalent, SoftmaxWithoutTheMaxStabilizerIsNotEquallySafe) {
  expect_equivalent(softmax(true), softmax(true, /*times_recip=*/true));
  for (const auto& [a, b] :
       {std::pair{softmax(true), softmax(false)}, std::pair{softmax(false), softmax(true)}}) {
    const VerifyResult r = verify_equivalent(a, b);
    EXPECT_FALSE(r.equivalent);
    EXPECT_EQ(r.reason.rfind("not equally safe in floating point: graph ", 0), 0u) << r.reason;
    EXPECT_NE(r.reason.find("exp"), std::string::npos) << r.reason;
  }
}

TEST(VerifyEquivalent, SoftmaxIsNotExpAlone) {
  KernelGraph g;
  const int x = g.new_input({4, 8}, DType::kF32);
  g.mark_output(g.unary(OpKind::kExp, x));
  EXPECT_FALSE(verify_equivalent(softmax(false), g).equivalent);
}

// softmax(Q K) V against a block graph walking K and V in 4 steps with the online-softmax
// accumulators.
TEST(VerifyEquivalent, OnlineSoftmaxAttention) {
  KernelGraph ref;
  {
    const int q = ref.new_input({4, 8}, DType::kF32);
    const int k = ref.new_input({8, 16}, DType::kF32);
    const int v = ref.new_input({16, 8}, DType::kF32);
    const int s = ref.matmul(q, k);
    const int e =
        ref.unary(OpKind::kExp, ref.binary(OpKind::kSub, s, ref.reduce(s, -1, ReduceKind::kMax)));
    const int p = ref.binary(OpKind::kDiv, e, ref.reduce(e, -1, ReduceKind::kSum));
    ref.mark_output(ref.matmul(p, v));
  }
  auto fused = [](bool divide) {
    auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 4);
    const int q = bg->new_input({4, 8}, DType::kF32, {0, -1, -1}, -1);
    const int k = bg->new_input({8, 16}, DType::kF32, {-1, -1, -1}, 1);
    const int v = bg->new_input({16, 8}, DType::kF32, {-1, -1, -1}, 0);
    const int s = bg->matmul(q, k);
    const int num = bg->accum_exp_matmul(s, v);
    const int den = bg->accum(OpKind::kAccumExpSumLast, s);
    bg->new_output(divide ? bg->binary(OpKind::kDiv, num, den) : num, {0, -1, -1}, DType::kF32);
    KernelGraph g;
    const int kq = g.new_input({4, 8}, DType::kF32);
    const int kk = g.new_input({8, 16}, DType::kF32);
    const int kv = g.new_input({16, 8}, DType::kF32);
    g.mark_output(g.customized({kq, kk, kv}, bg).at(0));
    return g;
  };
  expect_equivalent(ref, fused(true), never_shrink());
  VerifyOptions shrink;
  shrink.shrink = VerifyOptions::Shrink::kAlways;
  expect_equivalent(ref, fused(true), shrink);
  EXPECT_FALSE(verify_equivalent(ref, fused(false), never_shrink()).equivalent);
}

// LoRA: X W + (X A) B = concat(X, X A) @ concat(W, B); concat dims scale when shrinking.
TEST(VerifyEquivalent, LoraConcat) {
  auto build = [](bool concat) {
    KernelGraph g;
    const int x = g.new_input({16, 32}, DType::kF32);
    const int w = g.new_input({32, 64}, DType::kF32);
    const int a = g.new_input({32, 4}, DType::kF32);
    const int b = g.new_input({4, 64}, DType::kF32);
    const int xa = g.matmul(x, a);
    g.mark_output(concat ? g.matmul(g.concat(x, xa, 1), g.concat(w, b, 0))
                         : g.binary(OpKind::kAdd, g.matmul(x, w), g.matmul(xa, b)));
    return g;
  };
  expect_equivalent(build(false), build(true), never_shrink());
  VerifyOptions shrink;
  shrink.shrink = VerifyOptions::Shrink::kAlways;
  const VerifyResult r = verify_equivalent(build(false), build(true), shrink);
  EXPECT_TRUE(r.equivalent) << r.reason;
  EXPECT_TRUE(r.shrunk);
}

TEST(VerifyEquivalent, CompositeActivationsAndRelu) {
  auto build = [](bool expanded) {
    KernelGraph g;
    const int x = g.new_input({3, 5}, DType::kF32);
    const int y = g.new_input({3, 5}, DType::kF32);
    const int act = expanded ? g.binary(OpKind::kMul, x, g.unary(OpKind::kSigmoid, x))
                             : g.unary(OpKind::kSilu, x);
    const int r = expanded ? g.binary(OpKind::kMul, y, g.unary(OpKind::kRelu, x))
                           : g.binary(OpKind::kMul, g.unary(OpKind::kRelu, x), y);
    g.mark_output(g.binary(OpKind::kAdd, act, r));
    return g;
  };
  expect_equivalent(build(false), build(true));

  KernelGraph relu_x, x_only;
  relu_x.mark_output(relu_x.unary(OpKind::kRelu, relu_x.new_input({3, 5}, DType::kF32)));
  x_only.mark_output(x_only.unary(
      OpKind::kNeg, x_only.unary(OpKind::kNeg, x_only.new_input({3, 5}, DType::kF32))));
  EXPECT_FALSE(verify_equivalent(relu_x, x_only).equivalent);
}

TEST(VerifyEquivalent, ExpOfExpIsNotVerifiable) {
  auto build = [] {
    KernelGraph g;
    const int x = g.new_input({2, 3}, DType::kF32);
    g.mark_output(g.unary(OpKind::kExp, g.unary(OpKind::kExp, x)));
    return g;
  };
  const VerifyResult r = verify_equivalent(build(), build());
  EXPECT_FALSE(r.equivalent);
  EXPECT_EQ(r.reason.rfind("not verifiable: nested exp", 0), 0u) << r.reason;
  EXPECT_NE(r.reason.find("output 0"), std::string::npos) << r.reason;
}

TEST(VerifyEquivalent, StructuralDivisionByZeroIsNotVerifiable) {
  auto build = [] {
    KernelGraph g;
    const int x = g.new_input({2, 3}, DType::kF32);
    g.mark_output(g.binary(OpKind::kDiv, x, g.binary(OpKind::kSub, x, x)));
    return g;
  };
  const VerifyResult r = verify_equivalent(build(), build());
  EXPECT_FALSE(r.equivalent);
  EXPECT_EQ(r.reason.rfind("not verifiable: division by zero", 0), 0u) << r.reason;
}

// Documented limitation (docs/ir-semantics.md): every max is a stabilizer and evaluates to 0,
// so x - max(x) passes for x. The full-size float check is what rejects it.
TEST(VerifyEquivalent, AMaxThatDoesNotCancelIsNotDroppedAsAStabilizer) {
  // x - max(x) is not x: a max is only free to vanish where it cancels.
  KernelGraph shifted, plain;
  const int x = shifted.new_input({2, 3}, DType::kF32);
  shifted.mark_output(shifted.binary(OpKind::kSub, x, shifted.reduce(x, 1, ReduceKind::kMax)));
  plain.mark_output(plain.unary(OpKind::kAddScalar, plain.new_input({2, 3}, DType::kF32), 0.0));
  EXPECT_FALSE(verify_equivalent(shifted, plain).equivalent);
}

TEST(VerifyEquivalent, AMaxOverTheSameElementsIsTheSameWhateverTheGrouping) {
  // max over 4 columns = max of the maxes of the two halves, regrouped by a block graph
  // whose loop walks the columns two at a time (the running max of accum_max_last).
  KernelGraph whole, halves;
  const int x = whole.new_input({2, 4}, DType::kF32);
  whole.mark_output(whole.reduce(x, 1, ReduceKind::kMax));
  const int y = halves.new_input({2, 4}, DType::kF32);
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 2);
  const int t = bg->new_input({2, 4}, DType::kF32, {0, -1, -1}, 1);
  bg->new_output(bg->accum(OpKind::kAccumMaxLast, t), {0, -1, -1}, DType::kF32);
  halves.mark_output(halves.customized({y}, bg)[0]);
  EXPECT_TRUE(verify_equivalent(whole, halves).equivalent);
}

// softmax(Q K) V with the stabilizer, Q[8, 4], K[4, 16], V[16, 4].
KernelGraph attention_reference() {
  KernelGraph g;
  const int q = g.new_input({8, 4}, DType::kF32);
  const int k = g.new_input({4, 16}, DType::kF32);
  const int v = g.new_input({16, 4}, DType::kF32);
  const int s = g.matmul(q, k);
  const int e = g.unary(OpKind::kExp, g.binary(OpKind::kSub, s, g.reduce(s, 1, ReduceKind::kMax)));
  g.mark_output(g.matmul(g.binary(OpKind::kDiv, e, g.reduce(e, 1, ReduceKind::kSum)), v));
  return g;
}

// One block graph walking the keys 4 at a time: the numerator is always the online
// accum_exp_matmul (exp(s - M) V with M the max over every iteration); the denominator is
// its partner accum_exp_sum_last (exp(s - M) summed), or a plain sum of exp(s).
KernelGraph online_attention(bool matching_denominator) {
  KernelGraph g;
  const int q = g.new_input({8, 4}, DType::kF32);
  const int k = g.new_input({4, 16}, DType::kF32);
  const int v = g.new_input({16, 4}, DType::kF32);
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 4);
  const int tq = bg->new_input({8, 4}, DType::kF32, {0, -1, -1}, -1);
  const int tk = bg->new_input({4, 16}, DType::kF32, {-1, -1, -1}, 1);
  const int tv = bg->new_input({16, 4}, DType::kF32, {-1, -1, -1}, 0);
  const int s = bg->matmul(tq, tk);
  const int num = bg->accum_exp_matmul(s, tv);
  const int den = matching_denominator
                      ? bg->accum(OpKind::kAccumExpSumLast, s)
                      : bg->accum(OpKind::kAccumSumLast, bg->unary(OpKind::kExp, s));
  bg->new_output(bg->binary(OpKind::kDiv, num, den), {0, -1, -1}, DType::kF32);
  g.mark_output(g.customized({q, k, v}, bg)[0]);
  return g;
}

TEST(VerifyEquivalent, OnlineSoftmaxNeedsTheSameMaxAboveAndBelow) {
  EXPECT_TRUE(verify_equivalent(attention_reference(), online_attention(true)).equivalent);
  // exp(s - M) V / Σ exp(s) is off by exp(-M): once accepted when every max was 0.
  EXPECT_FALSE(verify_equivalent(attention_reference(), online_attention(false)).equivalent);
}

TEST(VerifyEquivalent, SignatureMismatchesAreReportedNotThrown) {
  auto graph = [](std::vector<Shape> inputs, DType dt, int outputs) {
    KernelGraph g;
    int last = -1;
    for (const Shape& s : inputs) last = g.new_input(s, dt);
    for (int i = 0; i < outputs; ++i) g.mark_output(g.unary(OpKind::kNeg, last));
    return g;
  };
  const KernelGraph base = graph({{2, 3}, {4}}, DType::kF32, 1);
  struct Case {
    KernelGraph other;
    const char* reason;
  };
  const Case cases[] = {
      {graph({{2, 3}}, DType::kF32, 1), "not equivalent: input count differs"},
      {graph({{2, 3}, {5}}, DType::kF32, 1), "not equivalent: input 1 shape differs"},
      {graph({{2, 3}, {4}}, DType::kBF16, 1), "not equivalent: input 0 dtype differs"},
      {graph({{2, 3}, {4}}, DType::kF32, 2), "not equivalent: output count differs"},
  };
  for (const Case& c : cases) {
    const VerifyResult r = verify_equivalent(base, c.other);
    EXPECT_FALSE(r.equivalent);
    EXPECT_EQ(r.reason.rfind(c.reason, 0), 0u) << r.reason;
  }
  KernelGraph other_shape;
  other_shape.new_input({2, 3}, DType::kF32);
  const int y = other_shape.new_input({4}, DType::kF32);
  other_shape.mark_output(other_shape.reduce(y, 0, ReduceKind::kSum));
  const VerifyResult r = verify_equivalent(base, other_shape);
  EXPECT_EQ(r.reason, "not equivalent: output 0 shape differs: graph a [4], graph b [1]");
}

TEST(VerifyEquivalent, RequestedTrialsAndBoundScaleTogether) {
  VerifyOptions one, five;
  one.trials = 1;
  five.trials = 5;
  const KernelGraph a = softmax(true), b = softmax(true, /*times_recip=*/true);
  const VerifyResult r1 = verify_equivalent(a, b, one);
  const VerifyResult r5 = verify_equivalent(a, b, five);
  EXPECT_TRUE(r1.equivalent && r5.equivalent);
  EXPECT_EQ(r1.trials, 1);
  EXPECT_EQ(r5.trials, 5);
  EXPECT_LT(r1.false_accept_log2, -40.0);  // one trial with 61-bit primes already meets it
  EXPECT_LT(r5.false_accept_log2, 4 * r1.false_accept_log2);
}

}  // namespace
}  // namespace mj::verify
