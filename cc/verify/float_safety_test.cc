// Numerical safety as part of equivalence (float_safety.h, docs/ir-semantics.md): graphs equal
// over the reals are still rejected when one of them takes exp of an unbounded value, divides
// by a value or takes a square root the other does not; the max-stabilized forms (kernel level,
// block level, online softmax, split softmax with a rescaling combine) are accepted.
#include "cc/verify/float_safety.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cc/verify/field_params.h"
#include "cc/verify/splitmix.h"
#include "cc/verify/verify.h"

namespace mj::verify {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::KernelGraph;
using ir::OpKind;
using ir::ReduceKind;

namespace {

constexpr const char* kUnsafe = "not equally safe in floating point: graph ";

void expect_unsafe(const KernelGraph& a, const KernelGraph& b, const std::string& what) {
  for (bool swapped : {false, true}) {
    const VerifyResult r = swapped ? verify_equivalent(b, a) : verify_equivalent(a, b);
    EXPECT_FALSE(r.equivalent) << (swapped ? "swapped" : "");
    EXPECT_EQ(r.reason.rfind(kUnsafe, 0), 0u) << r.reason;
    EXPECT_NE(r.reason.find(what), std::string::npos) << r.reason;
  }
}

bool has_nonpos(const SafeValue& v) { return (v.facts & SafetyDomain::kNonPos) != 0; }

void expect_accepted(const KernelGraph& a, const KernelGraph& b,
                     VerifyOptions::Shrink shrink = VerifyOptions::Shrink::kAuto) {
  VerifyOptions o;
  o.shrink = shrink;
  const VerifyResult r = verify_equivalent(a, b, o);
  EXPECT_TRUE(r.equivalent) << r.reason;
}

// softmax over the last dim of x[rows, cols], with or without the row max.
KernelGraph softmax(bool stabilized, int64_t rows = 4, int64_t cols = 8) {
  KernelGraph g;
  const int x = g.new_input({rows, cols}, DType::kF32);
  int shifted = x;
  if (stabilized) shifted = g.binary(OpKind::kSub, x, g.reduce(x, -1, ReduceKind::kMax));
  const int e = g.unary(OpKind::kExp, shifted);
  g.mark_output(g.binary(OpKind::kDiv, e, g.reduce(e, -1, ReduceKind::kSum)));
  return g;
}

// The same softmax in one block graph whose blocks own two whole rows each.
KernelGraph block_softmax(bool stabilized) {
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 1);
  int t = bg->new_input({4, 8}, DType::kF32, {0, -1, -1}, -1);
  if (stabilized) t = bg->binary(OpKind::kSub, t, bg->reduce(t, -1, ReduceKind::kMax));
  const int e = bg->unary(OpKind::kExp, t);
  bg->new_output(bg->binary(OpKind::kDiv, e, bg->reduce(e, -1, ReduceKind::kSum)), {0, -1, -1},
                 DType::kF32);
  KernelGraph g;
  g.mark_output(g.customized({g.new_input({4, 8}, DType::kF32)}, bg).at(0));
  return g;
}

TEST(FloatSafety, AnUnstabilizedSoftmaxIsRejectedAtKernelAndBlockLevel) {
  expect_unsafe(softmax(true), softmax(false), "takes exp of 32 values");
  expect_unsafe(softmax(true), block_softmax(false), "not bounded above");
  expect_unsafe(block_softmax(true), block_softmax(false), "not bounded above");
}

TEST(FloatSafety, TheMaxSubtractedSoftmaxIsAcceptedAtBothLevels) {
  expect_accepted(softmax(true), block_softmax(true));
  expect_accepted(softmax(false), block_softmax(false));  // unsafe alike: the same exps
}

TEST(FloatSafety, AMaxOverOtherValuesThanTheRowIsRejected) {
  // exp(x - max over the whole tensor) / row sum: every exp is bounded above, and equal over
  // the reals, but a row far below the global max sums to 0 in floats (0 / 0).
  KernelGraph global;
  const int x = global.new_input({4, 8}, DType::kF32);
  const int m = global.reduce(global.reduce(x, 1, ReduceKind::kMax), 0, ReduceKind::kMax);
  const int e = global.unary(OpKind::kExp, global.binary(OpKind::kSub, x, m));
  global.mark_output(global.binary(OpKind::kDiv, e, global.reduce(e, 1, ReduceKind::kSum)));
  expect_unsafe(softmax(true), global, "divides by 4 values");
}

// softmax(Q K) V per head: Q[2, 8, 4], K[2, 4, 16], V[2, 16, 4].
KernelGraph attention() {
  KernelGraph g;
  const int q = g.new_input({2, 8, 4}, DType::kF32);
  const int k = g.new_input({2, 4, 16}, DType::kF32);
  const int v = g.new_input({2, 16, 4}, DType::kF32);
  const int s = g.matmul(q, k);
  const int e = g.unary(OpKind::kExp, g.binary(OpKind::kSub, s, g.reduce(s, 2, ReduceKind::kMax)));
  g.mark_output(g.matmul(g.binary(OpKind::kDiv, e, g.reduce(e, 2, ReduceKind::kSum)), v));
  return g;
}

// One kernel: blocks per head walk the keys 4 at a time with the online softmax.
KernelGraph online_attention() {
  KernelGraph g;
  const int q = g.new_input({2, 8, 4}, DType::kF32);
  const int k = g.new_input({2, 4, 16}, DType::kF32);
  const int v = g.new_input({2, 16, 4}, DType::kF32);
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 4);
  const int tq = bg->new_input({2, 8, 4}, DType::kF32, {0, -1, -1}, -1);
  const int tk = bg->new_input({2, 4, 16}, DType::kF32, {0, -1, -1}, 2);
  const int tv = bg->new_input({2, 16, 4}, DType::kF32, {0, -1, -1}, 1);
  const int s = bg->matmul(tq, tk);
  bg->new_output(
      bg->binary(OpKind::kDiv, bg->accum_exp_matmul(s, tv), bg->accum(OpKind::kAccumExpSumLast, s)),
      {0, -1, -1}, DType::kF32);
  g.mark_output(g.customized({q, k, v}, bg).at(0));
  return g;
}

// Split-KV: kernel 1's grid splits the keys in 2 slices per head, each walked in 2 steps; the
// partials are stacked along the last dim and a combine kernel walks them. stabilized: the
// online softmax per slice, its row max m_b stored too, M = max_b m_b at the kernel level, and
// the combine rescales by exp(m_b - M). Otherwise the paper's form: plain exp(S) partials.
KernelGraph split_kv_attention(bool stabilized) {
  KernelGraph g;
  const int q = g.new_input({2, 8, 4}, DType::kF32);
  const int k = g.new_input({2, 4, 16}, DType::kF32);
  const int v = g.new_input({2, 16, 4}, DType::kF32);
  auto k1 = std::make_shared<BlockGraph>(Dim3{2, 2, 1}, 2);
  const int tq = k1->new_input({2, 8, 4}, DType::kF32, {0, -1, -1}, -1);
  const int tk = k1->new_input({2, 4, 16}, DType::kF32, {0, 2, -1}, 2);
  const int tv = k1->new_input({2, 16, 4}, DType::kF32, {0, 1, -1}, 1);
  const int s = k1->matmul(tq, tk);
  const Dim3 stack{0, 2, -1};
  if (stabilized) {
    k1->new_output(k1->accum_exp_matmul(s, tv), stack, DType::kF32);
    k1->new_output(k1->accum(OpKind::kAccumExpSumLast, s), stack, DType::kF32);
    k1->new_output(k1->accum(OpKind::kAccumMaxLast, s), stack, DType::kF32);
  } else {
    const int e = k1->unary(OpKind::kExp, s);
    k1->new_output(k1->accum(OpKind::kAccumSum, k1->matmul(e, tv)), stack, DType::kF32);
    k1->new_output(k1->accum(OpKind::kAccumSumLast, e), stack, DType::kF32);
  }
  const std::vector<int> partials = g.customized({q, k, v}, k1);
  auto k2 = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 2);
  const int ev = k2->new_input({2, 8, 8}, DType::kF32, {0, -1, -1}, 2);
  const int sums = k2->new_input({2, 8, 2}, DType::kF32, {0, -1, -1}, 2);
  std::vector<int> kernel2_inputs = {partials[0], partials[1]};
  int num = ev, den = sums;
  if (stabilized) {
    const int top = g.reduce(partials[2], 2, ReduceKind::kMax);
    const int m = k2->new_input({2, 8, 2}, DType::kF32, {0, -1, -1}, 2);
    const int mx = k2->new_input({2, 8, 1}, DType::kF32, {0, -1, -1}, -1);
    const int w = k2->unary(OpKind::kExp, k2->binary(OpKind::kSub, m, mx));
    num = k2->binary(OpKind::kMul, w, ev);
    den = k2->binary(OpKind::kMul, w, sums);
    kernel2_inputs.push_back(partials[2]);
    kernel2_inputs.push_back(top);
  }
  k2->new_output(k2->binary(OpKind::kDiv, k2->accum(OpKind::kAccumSum, num),
                            k2->accum(OpKind::kAccumSum, den)),
                 {0, -1, -1}, DType::kF32);
  g.mark_output(g.customized(kernel2_inputs, k2).at(0));
  return g;
}

TEST(FloatSafety, OnlineSoftmaxAndTheRescalingSplitFormAreAccepted) {
  expect_accepted(attention(), online_attention(), VerifyOptions::Shrink::kNever);
  expect_accepted(attention(), online_attention(), VerifyOptions::Shrink::kAlways);
  expect_accepted(attention(), split_kv_attention(true), VerifyOptions::Shrink::kNever);
  expect_accepted(attention(), split_kv_attention(true), VerifyOptions::Shrink::kAlways);
  expect_accepted(online_attention(), split_kv_attention(true));
}

TEST(FloatSafety, TheSplitFormWithoutMaximaIsRejected) {
  // Equal over the reals: once accepted, and the paper's own μGraph.
  expect_unsafe(attention(), split_kv_attention(false), "not bounded above");
  expect_unsafe(split_kv_attention(true), split_kv_attention(false), "not bounded above");
}

KernelGraph two_inputs(const std::function<int(KernelGraph&, int, int)>& body) {
  KernelGraph g;
  const int x = g.new_input({4, 8}, DType::kF32);
  const int y = g.new_input({4, 8}, DType::kF32);
  g.mark_output(body(g, x, y));
  return g;
}

TEST(FloatSafety, ANewDivisorOrSquareRootIsRejected) {
  // x + 0 * y against x * y / y: NaN where y = 0.
  const KernelGraph x_only = two_inputs([](KernelGraph& g, int x, int y) {
    return g.binary(OpKind::kAdd, x, g.unary(OpKind::kMulScalar, y, 0.0));
  });
  const KernelGraph through_y = two_inputs([](KernelGraph& g, int x, int y) {
    return g.binary(OpKind::kDiv, g.binary(OpKind::kMul, x, y), y);
  });
  expect_unsafe(x_only, through_y, "divides by 32 values");
  // x against x + 0 * sqrt(y): NaN where y < 0.
  const KernelGraph with_root = two_inputs([](KernelGraph& g, int x, int y) {
    return g.binary(OpKind::kAdd, x, g.unary(OpKind::kMulScalar, g.unary(OpKind::kSqrt, y), 0.0));
  });
  expect_unsafe(x_only, with_root, "square root of 32 values");
}

// (x / r) @ w against (x @ w) / r: the same divisor, but where r = 0 the first is NaN or inf
// in other places than the second. Moving it is safe when r is provably positive, as
// RMSNorm's sqrt(mean(x^2) + eps) with eps > 0 and a softmax's sum of exps are.
KernelGraph division_across_a_matmul(bool after, bool rms) {
  KernelGraph g;
  const int x = g.new_input({4, 8}, DType::kF32);
  int r = g.new_input({4, 1}, DType::kF32);
  const int w = g.new_input({8, 6}, DType::kF32);
  if (rms) {
    r = g.unary(OpKind::kSqrt, g.unary(OpKind::kAddScalar, g.unary(OpKind::kSquare, r), 1e-6));
  }
  g.mark_output(after ? g.binary(OpKind::kDiv, g.matmul(x, w), r)
                      : g.matmul(g.binary(OpKind::kDiv, x, r), w));
  return g;
}

TEST(FloatSafety, ADivisionMovesAcrossAMatmulOnlyWhenItsDivisorIsPositive) {
  expect_accepted(division_across_a_matmul(false, true), division_across_a_matmul(true, true));
  expect_unsafe(division_across_a_matmul(false, false), division_across_a_matmul(true, false),
                "which may be 0");
}

// exp(X @ W), as a user may write it: unbounded in the target, so a candidate may take the
// same exps (and no others).
KernelGraph exp_matmul(bool fused) {
  KernelGraph g;
  const int x = g.new_input({4, 8}, DType::kF32);
  const int w = g.new_input({8, 6}, DType::kF32);
  if (!fused) {
    g.mark_output(g.unary(OpKind::kExp, g.matmul(x, w)));
    return g;
  }
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 2);
  const int tx = bg->new_input({4, 8}, DType::kF32, {-1, -1, -1}, 1);
  const int tw = bg->new_input({8, 6}, DType::kF32, {1, -1, -1}, 0);
  bg->new_output(bg->unary(OpKind::kExp, bg->accum(OpKind::kAccumSum, bg->matmul(tx, tw))),
                 {1, -1, -1}, DType::kF32);
  g.mark_output(g.customized({x, w}, bg).at(0));
  return g;
}

TEST(FloatSafety, AnUnboundedExpTheTargetHasIsAllowed) {
  expect_accepted(exp_matmul(false), exp_matmul(true));
  EXPECT_TRUE(has_unbounded_exp(exp_matmul(false)));
  EXPECT_TRUE(has_unbounded_exp(softmax(false)));
  EXPECT_TRUE(has_unbounded_exp(split_kv_attention(false)));
  EXPECT_FALSE(has_unbounded_exp(softmax(true)));
  EXPECT_FALSE(has_unbounded_exp(attention()));
  EXPECT_FALSE(has_unbounded_exp(online_attention()));
  EXPECT_FALSE(has_unbounded_exp(split_kv_attention(true)));
}

TEST(FloatSafety, ALongRowVerifies) {
  expect_accepted(softmax(true, 1, 60000), softmax(true, 1, 60000), VerifyOptions::Shrink::kNever);
}

TEST(FloatSafety, ADeepChainOfMaximaIsQueriedAndFreedWithoutRecursion) {
  // A reduce max over n values builds a chain of n nodes; instances that cannot be shrunk
  // may hold rows of millions of values, whose chain a recursive destructor would free one
  // stack frame per node.
  const FieldParams& f = field_params(0);
  const FFDomain ff(f, 7);
  PartialOps log;
  const SafetyDomain d(ff, &log);
  SplitMix64 rng(3);
  SafeValue first, m = d.lowest();
  for (int i = 0; i < 300000; ++i) {
    SafeValue v;
    v.ff.p = rng.below(f.p);
    v.ff.q = rng.below(f.q);
    if (i == 0) first = v;
    m = d.max(m, v);
  }
  EXPECT_TRUE(has_nonpos(d.sub(first, m)));
  EXPECT_FALSE(has_nonpos(d.sub(m, first)));
  d.exp(d.sub(first, m));
  EXPECT_TRUE(log.exp_args.empty());
  m = SafeValue{};  // frees the chain
}

}  // namespace
}  // namespace mj::verify
