// Every kernel-level op against brute-force loops written here, in float64 and float32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "cc/interp/interp.h"
#include "cc/interp/interp_test_support.h"
#include "cc/ir/graph.h"

namespace mj::interp {

using ir::DType;
using ir::KernelGraph;
using ir::op_kind_name;
using ir::OpKind;
using ir::reduce_kind_name;
using ir::ReduceKind;
using ir::Shape;
using ir::shape_str;

namespace {

using interp_testing::cast_tensors;
using interp_testing::mismatch;
using interp_testing::random_tensor;

using Ref = DenseTensor<double>;

std::vector<int64_t> unflatten(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

int64_t flatten(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

// The element of x that numpy broadcasting puts at index `out_idx` of a higher-rank result.
double broadcast_read(const Ref& x, const std::vector<int64_t>& out_idx) {
  const size_t lead = out_idx.size() - x.shape.size();
  std::vector<int64_t> idx(x.shape.size());
  for (size_t d = 0; d < x.shape.size(); ++d) idx[d] = x.shape[d] == 1 ? 0 : out_idx[lead + d];
  return x.data[flatten(idx, x.shape)];
}

template <class T>
class KernelOps : public ::testing::Test {
 protected:
  // Interprets g on `inputs` in domain T and checks its single output against `want`.
  void expect_output(const KernelGraph& g, const std::vector<Ref>& inputs, const Ref& want) {
    const auto got = interpret(g, cast_tensors<T>(inputs), FloatDomain<T>{});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(mismatch(got[0], want), "");
  }
  std::mt19937 rng{1234};
};
using FloatTypes = ::testing::Types<double, float>;
TYPED_TEST_SUITE(KernelOps, FloatTypes);

struct UnaryCase {
  OpKind kind;
  double scalar;
  double lo, hi;  // input range (positive where the op needs it)
  std::function<double(double)> f;
};

TYPED_TEST(KernelOps, EveryUnaryOp) {
  const double k = std::sqrt(2.0 / M_PI);
  const std::vector<UnaryCase> cases = {
      {OpKind::kExp, 0, -2, 2, [](double x) { return std::exp(x); }},
      {OpKind::kSquare, 0, -2, 2, [](double x) { return x * x; }},
      {OpKind::kSqrt, 0, 0.1, 3, [](double x) { return std::sqrt(x); }},
      {OpKind::kRsqrt, 0, 0.1, 3, [](double x) { return 1.0 / std::sqrt(x); }},
      {OpKind::kSilu, 0, -4, 4, [](double x) { return x / (1.0 + std::exp(-x)); }},
      {OpKind::kGelu, 0, -4, 4,
       [k](double x) { return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))); }},
      {OpKind::kRelu, 0, -2, 2, [](double x) { return x > 0 ? x : 0.0; }},
      {OpKind::kSigmoid, 0, -4, 4, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }},
      {OpKind::kNeg, 0, -2, 2, [](double x) { return -x; }},
      {OpKind::kRecip, 0, 0.1, 3, [](double x) { return 1.0 / x; }},
      {OpKind::kMulScalar, -1.75, -2, 2, [](double x) { return x * -1.75; }},
      {OpKind::kAddScalar, 0.375, -2, 2, [](double x) { return x + 0.375; }},
  };
  for (const UnaryCase& c : cases) {
    SCOPED_TRACE(std::string(op_kind_name(c.kind)));
    KernelGraph g;
    const int x = g.new_input({3, 5}, DType::kF32);
    g.mark_output(g.unary(c.kind, x, c.scalar));
    const Ref in = random_tensor({3, 5}, this->rng, c.lo, c.hi);
    Ref want{in.shape, {}};
    for (double v : in.data) want.data.push_back(c.f(v));
    this->expect_output(g, {in}, want);
  }
}

TYPED_TEST(KernelOps, EveryBinaryOpBroadcastsAcrossRanks) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {3, 1}},       {{4}, {2, 1, 4}},
      {{1, 3, 1}, {2, 1, 5}}, {{2, 1, 3, 1}, {4, 1, 1}}, {{5}, {1}},
  };
  const std::vector<std::pair<OpKind, std::function<double(double, double)>>> ops = {
      {OpKind::kAdd, [](double a, double b) { return a + b; }},
      {OpKind::kSub, [](double a, double b) { return a - b; }},
      {OpKind::kMul, [](double a, double b) { return a * b; }},
      {OpKind::kDiv, [](double a, double b) { return a / b; }},
  };
  for (const auto& [kind, f] : ops) {
    for (const auto& [sa, sb] : shapes) {
      SCOPED_TRACE(std::string(op_kind_name(kind)) + " " + shape_str(sa) + " " + shape_str(sb));
      KernelGraph g;
      const int a = g.new_input(sa, DType::kF32);
      const int b = g.new_input(sb, DType::kF32);
      g.mark_output(g.binary(kind, a, b));
      const Ref ia = random_tensor(sa, this->rng);
      const Ref ib = random_tensor(sb, this->rng, 0.5, 2.0);  // away from 0 for div
      const Shape& out_shape = g.tensor(g.output_ids()[0]).shape;
      Ref want{out_shape, {}};
      for (int64_t i = 0; i < interp_testing::element_count(out_shape); ++i) {
        const auto idx = unflatten(i, out_shape);
        want.data.push_back(f(broadcast_read(ia, idx), broadcast_read(ib, idx)));
      }
      this->expect_output(g, {ia, ib}, want);
    }
  }
}

TYPED_TEST(KernelOps, MatmulBroadcastsBatchDims) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {4, 2}},    {{2, 3, 4}, {2, 4, 5}}, {{2, 1, 3, 4}, {3, 4, 5}},
      {{3, 4}, {2, 4, 5}}, {{1, 3, 4}, {2, 4, 5}}, {{2, 2, 3, 4}, {2, 1, 4, 1}},
  };
  for (const auto& [sa, sb] : shapes) {
    SCOPED_TRACE(shape_str(sa) + " @ " + shape_str(sb));
    KernelGraph g;
    const int a = g.new_input(sa, DType::kF32);
    const int b = g.new_input(sb, DType::kF32);
    g.mark_output(g.matmul(a, b));
    const Ref ia = random_tensor(sa, this->rng), ib = random_tensor(sb, this->rng);
    const Shape& out_shape = g.tensor(g.output_ids()[0]).shape;
    const int64_t kdim = sa.back();
    Ref want{out_shape, {}};
    for (int64_t i = 0; i < interp_testing::element_count(out_shape); ++i) {
      const auto idx = unflatten(i, out_shape);
      const size_t r = idx.size();
      double sum = 0;
      for (int64_t k = 0; k < kdim; ++k) {
        auto ai = idx, bi = idx;
        ai[r - 1] = k;  // A[..., m, k]
        bi[r - 2] = k;  // B[..., k, n]
        sum += broadcast_read(ia, ai) * broadcast_read(ib, bi);
      }
      want.data.push_back(sum);
    }
    this->expect_output(g, {ia, ib}, want);
  }
}

TYPED_TEST(KernelOps, ReduceSumMeanMaxOnEveryDim) {
  const Shape shape{2, 3, 4};
  for (ReduceKind kind : {ReduceKind::kSum, ReduceKind::kMean, ReduceKind::kMax}) {
    for (int dim = -3; dim < 3; ++dim) {
      SCOPED_TRACE(std::string(reduce_kind_name(kind)) + " dim " + std::to_string(dim));
      KernelGraph g;
      const int x = g.new_input(shape, DType::kF32);
      g.mark_output(g.reduce(x, dim, kind));
      const Ref in = random_tensor(shape, this->rng);
      const int d = dim < 0 ? dim + 3 : dim;
      Shape out_shape = shape;
      out_shape[d] = 1;
      Ref want{out_shape, {}};
      for (int64_t i = 0; i < interp_testing::element_count(out_shape); ++i) {
        auto idx = unflatten(i, out_shape);
        double acc = kind == ReduceKind::kMax ? -INFINITY : 0.0;
        for (int64_t r = 0; r < shape[d]; ++r) {
          idx[d] = r;
          const double v = in.data[flatten(idx, shape)];
          acc = kind == ReduceKind::kMax ? std::max(acc, v) : acc + v;
        }
        want.data.push_back(kind == ReduceKind::kMean ? acc / double(shape[d]) : acc);
      }
      this->expect_output(g, {in}, want);
    }
  }
}

TYPED_TEST(KernelOps, RmsNormOverLastDim) {
  for (const Shape& shape : {Shape{8}, Shape{3, 8}, Shape{2, 2, 5}}) {
    SCOPED_TRACE(shape_str(shape));
    KernelGraph g;
    const int x = g.new_input(shape, DType::kF32);
    g.mark_output(g.rms_norm(x, 1e-3));
    const Ref in = random_tensor(shape, this->rng);
    const int64_t n = shape.back();
    Ref want = in;
    for (size_t row = 0; row < in.data.size() / n; ++row) {
      double sq = 0;
      for (int64_t j = 0; j < n; ++j) sq += in.data[row * n + j] * in.data[row * n + j];
      const double rms = std::sqrt(sq / double(n) + 1e-3);
      for (int64_t j = 0; j < n; ++j) want.data[row * n + j] = in.data[row * n + j] / rms;
    }
    this->expect_output(g, {in}, want);
  }
}

TYPED_TEST(KernelOps, ConcatOnEveryDim) {
  const Shape sa{2, 3, 4};
  for (int dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    Shape sb = sa;
    sb[dim] = 2;
    KernelGraph g;
    const int a = g.new_input(sa, DType::kF32);
    const int b = g.new_input(sb, DType::kF32);
    g.mark_output(g.concat(a, b, dim));
    const Ref ia = random_tensor(sa, this->rng), ib = random_tensor(sb, this->rng);
    Shape out_shape = sa;
    out_shape[dim] += sb[dim];
    Ref want{out_shape, {}};
    for (int64_t i = 0; i < interp_testing::element_count(out_shape); ++i) {
      auto idx = unflatten(i, out_shape);
      if (idx[dim] < sa[dim]) {
        want.data.push_back(ia.data[flatten(idx, sa)]);
      } else {
        idx[dim] -= sa[dim];
        want.data.push_back(ib.data[flatten(idx, sb)]);
      }
    }
    this->expect_output(g, {ia, ib}, want);
  }
}

// Outputs come back in mark order, an input can be an output, and ops chain.
TYPED_TEST(KernelOps, ChainedOpsAndOutputOrder) {
  KernelGraph g;
  const int x = g.new_input({2, 3}, DType::kF32);
  const int w = g.new_input({3, 2}, DType::kF32);
  const int y = g.unary(OpKind::kExp, g.matmul(x, w));
  const int s = g.reduce(y, 1, ReduceKind::kSum);
  g.mark_output(s);
  g.mark_output(x);
  g.mark_output(y);
  const Ref ix = random_tensor({2, 3}, this->rng), iw = random_tensor({3, 2}, this->rng);
  Ref want_y{{2, 2}, {}}, want_s{{2, 1}, {}};
  for (int i = 0; i < 2; ++i) {
    double row = 0;
    for (int j = 0; j < 2; ++j) {
      double dot = 0;
      for (int k = 0; k < 3; ++k) dot += ix.data[i * 3 + k] * iw.data[k * 2 + j];
      want_y.data.push_back(std::exp(dot));
      row += std::exp(dot);
    }
    want_s.data.push_back(row);
  }
  const auto got = interpret(g, cast_tensors<TypeParam>({ix, iw}), FloatDomain<TypeParam>{});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(mismatch(got[0], want_s), "");
  EXPECT_EQ(mismatch(got[1], ix), "");
  EXPECT_EQ(mismatch(got[2], want_y), "");
}

}  // namespace
}  // namespace mj::interp
