// The interpreter touches values only through the domain: it runs on a value type with no
// operators and no default constructor (as a finite field's may be), and with max defined
// as 0 (the finite field's softmax stabilizer) a max-stabilized softmax still cancels.
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
using ir::ReduceKind;

namespace {

using interp_testing::random_tensor;

// A double that can only be built explicitly and has no operators.
struct Boxed {
  explicit Boxed(double x) : v(x) {}
  double v;
};

// The float64 domain over Boxed. With zero_max, max(a, b) = 0 and lowest() = 0.
struct BoxedDomain {
  using Value = Boxed;
  bool zero_max = false;
  Value constant(double c) const { return Boxed(c); }
  Value add(Value a, Value b) const { return Boxed(a.v + b.v); }
  Value sub(Value a, Value b) const { return Boxed(a.v - b.v); }
  Value mul(Value a, Value b) const { return Boxed(a.v * b.v); }
  Value div(Value a, Value b) const { return Boxed(a.v / b.v); }
  Value neg(Value a) const { return Boxed(-a.v); }
  Value recip(Value a) const { return Boxed(1.0 / a.v); }
  Value exp(Value a) const { return Boxed(std::exp(a.v)); }
  Value sqrt(Value a) const { return Boxed(std::sqrt(a.v)); }
  Value relu(Value a) const { return Boxed(a.v > 0 ? a.v : 0.0); }
  Value erf(Value a) const { return Boxed(std::erf(a.v)); }
  Value select(Value mask, Value x, double c) const { return mask.v != 0 ? x : Boxed(c); }
  Value max(Value a, Value b) const { return Boxed(zero_max ? 0.0 : (a.v > b.v ? a.v : b.v)); }
  Value lowest() const { return Boxed(zero_max ? 0.0 : -INFINITY); }
};

// erfc whole, as FloatDomain computes it.
Boxed erfc(const BoxedDomain&, const Boxed& x) { return Boxed(std::erfc(x.v)); }

std::vector<DenseTensor<Boxed>> boxed(const std::vector<DenseTensor<double>>& xs) {
  std::vector<DenseTensor<Boxed>> out;
  for (const auto& x : xs) {
    DenseTensor<Boxed> t{x.shape, {}};
    for (double v : x.data) t.data.push_back(Boxed(v));
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<double> unboxed(const DenseTensor<Boxed>& x) {
  std::vector<double> out;
  for (const Boxed& b : x.data) out.push_back(b.v);
  return out;
}

// One graph with every op kind and every accumulator (as much as one graph can hold).
KernelGraph every_op_graph() {
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 2);
  const int s = bg->new_input({4, 8}, DType::kF32, {0, -1, -1}, 1);   // [2, 4]
  const int v = bg->new_input({8, 3}, DType::kF32, {-1, -1, -1}, 0);  // [4, 3]
  const int g = bg->new_input({1, 3}, DType::kF32, {-1, -1, -1}, -1);
  const int sig = bg->unary(OpKind::kSigmoid, s);
  const int body = bg->binary(OpKind::kMul, bg->matmul(sig, v), g);
  std::vector<int> accs = {
      bg->accum(OpKind::kAccumSum, body),   bg->accum(OpKind::kAccumSumLast, s),
      bg->accum(OpKind::kAccumMeanLast, s), bg->accum(OpKind::kAccumRmsLast, s, 0.5),
      bg->accum(OpKind::kAccumMaxLast, s),  bg->accum(OpKind::kAccumExpSumLast, s),
      bg->accum_exp_matmul(s, v),
  };
  int epi = accs[0];
  for (size_t i = 1; i < accs.size(); ++i) epi = bg->binary(OpKind::kAdd, epi, accs[i]);
  bg->new_output(bg->concat(epi, bg->reduce(bg->unary(OpKind::kGelu, epi), 1, ReduceKind::kMax), 1),
                 {0, -1, -1}, DType::kF32);

  KernelGraph k;
  const int ks = k.new_input({4, 8}, DType::kF32);
  const int kv = k.new_input({8, 3}, DType::kF32);
  const int kg = k.new_input({1, 3}, DType::kF32);
  int y = k.customized({ks, kv, kg}, bg).at(0);  // [4, 4]
  y = k.unary(OpKind::kAddScalar, k.unary(OpKind::kRelu, k.unary(OpKind::kSilu, y)), 1.0);
  y = k.unary(OpKind::kMulScalar, k.unary(OpKind::kRecip, k.unary(OpKind::kSquare, y)), 0.5);
  for (OpKind u :
       {OpKind::kErf, OpKind::kErfc, OpKind::kNeg, OpKind::kExp, OpKind::kSqrt, OpKind::kRsqrt}) {
    y = k.unary(u, y);
  }
  int normalized = k.binary(OpKind::kDiv, y, k.rms_norm(y, 1e-3));
  normalized = k.binary(OpKind::kSelect, normalized, k.unary(OpKind::kRelu, y), -3.0);
  y = k.binary(OpKind::kSub, normalized, k.reduce(y, 0, ReduceKind::kMean));
  k.mark_output(k.reduce(y, 1, ReduceKind::kSum));
  return k;
}

TEST(ValueDomain, OperatorFreeValuesGiveTheFloat64Results) {
  const KernelGraph g = every_op_graph();
  std::mt19937 rng(11);
  const std::vector<DenseTensor<double>> in = {
      random_tensor({4, 8}, rng), random_tensor({8, 3}, rng), random_tensor({1, 3}, rng)};
  const auto want = interpret(g, in, FloatDomain<double>{});
  const auto got = interpret(g, boxed(in), BoxedDomain{});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].shape, want[0].shape);
  EXPECT_EQ(unboxed(got[0]), want[0].data);
}

// softmax(x) with the max subtracted, and without: equal under max = 0, as in the field.
TEST(ValueDomain, ZeroMaxStabilizerCancels) {
  KernelGraph stabilized;
  {
    const int x = stabilized.new_input({3, 5}, DType::kF32);
    const int m = stabilized.reduce(x, 1, ReduceKind::kMax);
    const int e = stabilized.unary(OpKind::kExp, stabilized.binary(OpKind::kSub, x, m));
    stabilized.mark_output(
        stabilized.binary(OpKind::kDiv, e, stabilized.reduce(e, 1, ReduceKind::kSum)));
  }
  KernelGraph plain;
  {
    const int x = plain.new_input({3, 5}, DType::kF32);
    const int e = plain.unary(OpKind::kExp, x);
    plain.mark_output(plain.binary(OpKind::kDiv, e, plain.reduce(e, 1, ReduceKind::kSum)));
  }
  std::mt19937 rng(12);
  const auto in = boxed({random_tensor({3, 5}, rng)});
  BoxedDomain zero_max;
  zero_max.zero_max = true;
  EXPECT_EQ(unboxed(interpret(stabilized, in, zero_max).at(0)),
            unboxed(interpret(plain, in, zero_max).at(0)));
  // And the stabilizer really was 0: the row max of a non-constant row is not.
  KernelGraph row_max;
  row_max.mark_output(row_max.reduce(row_max.new_input({3, 5}, DType::kF32), 1, ReduceKind::kMax));
  for (double m : unboxed(interpret(row_max, in, zero_max).at(0))) EXPECT_EQ(m, 0.0);
}

}  // namespace
}  // namespace mj::interp
