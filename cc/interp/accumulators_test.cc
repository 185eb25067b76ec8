// Every for-loop accumulator against its direct formula over the whole loop dim. X[3, 8] is
// split over rows by the grid (one row per block) and over columns by a 4-step loop, so each
// block's accumulators see one full row, two columns per iteration.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <type_traits>

#include "cc/interp/interp.h"
#include "cc/interp/interp_test_support.h"
#include "cc/ir/graph.h"

namespace mj::interp {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::op_kind_name;
using ir::OpKind;
using ir::Shape;

namespace {

using interp_testing::cast_tensors;
using interp_testing::mismatch;
using interp_testing::random_tensor;

using Ref = DenseTensor<double>;
constexpr int kRows = 3, kCols = 8, kSteps = 4;
constexpr Dim3 kRowsOnX{0, -1, -1};

template <class T>
class Accumulators : public ::testing::Test {
 protected:
  // Runs accumulator `kind` over X (tile [1, 2]) and checks the [3, 1] result row by row
  // against `row_formula` applied to the whole row.
  void expect_last_dim_accum(OpKind kind, double scalar,
                             const std::function<double(const std::vector<double>&)>& row_formula) {
    SCOPED_TRACE(std::string(op_kind_name(kind)));
    BlockGraph bg({kRows, 1, 1}, kSteps);
    const int x = bg.new_input({kRows, kCols}, DType::kF32, kRowsOnX, 1);
    const int acc = bg.accum(kind, x, scalar);
    EXPECT_EQ(bg.tensor(acc).shape, (Shape{1, 1}));
    bg.new_output(acc, kRowsOnX, DType::kF32);
    const Ref in = random_tensor({kRows, kCols}, rng, -3.0, 3.0);
    Ref want{{kRows, 1}, {}};
    for (int r = 0; r < kRows; ++r) {
      want.data.push_back(row_formula(
          std::vector<double>(in.data.begin() + r * kCols, in.data.begin() + (r + 1) * kCols)));
    }
    const auto got = interpret_block_graph(bg, cast_tensors<T>({in}), FloatDomain<T>{});
    EXPECT_EQ(mismatch(got.at(0), want), "");
  }
  std::mt19937 rng{7};
};
using FloatTypes = ::testing::Types<double, float>;
TYPED_TEST_SUITE(Accumulators, FloatTypes);

double sum_of(const std::vector<double>& row, const std::function<double(double)>& f) {
  double s = 0;
  for (double v : row) s += f(v);
  return s;
}

TYPED_TEST(Accumulators, SumLast) {
  this->expect_last_dim_accum(OpKind::kAccumSumLast, 0, [](const std::vector<double>& row) {
    return sum_of(row, [](double v) { return v; });
  });
}

TYPED_TEST(Accumulators, MeanLastDividesByLoopTimesTile) {
  this->expect_last_dim_accum(OpKind::kAccumMeanLast, 0, [](const std::vector<double>& row) {
    return sum_of(row, [](double v) { return v; }) / double(kCols);
  });
}

TYPED_TEST(Accumulators, RmsLast) {
  this->expect_last_dim_accum(OpKind::kAccumRmsLast, 0.25, [](const std::vector<double>& row) {
    return std::sqrt(sum_of(row, [](double v) { return v * v; }) / double(kCols) + 0.25);
  });
}

TYPED_TEST(Accumulators, MaxLastIsTheMaxOverAllIterations) {
  this->expect_last_dim_accum(OpKind::kAccumMaxLast, 0, [](const std::vector<double>& row) {
    return *std::max_element(row.begin(), row.end());
  });
}

TYPED_TEST(Accumulators, ExpSumLastSubtractsTheGlobalMax) {
  this->expect_last_dim_accum(OpKind::kAccumExpSumLast, 0, [](const std::vector<double>& row) {
    const double m = *std::max_element(row.begin(), row.end());
    return sum_of(row, [m](double v) { return std::exp(v - m); });
  });
}

TYPED_TEST(Accumulators, SumOverIterationsKeepsTheTileShape) {
  BlockGraph bg({kRows, 1, 1}, kSteps);
  const int x = bg.new_input({kRows, kCols}, DType::kF32, kRowsOnX, 1);
  bg.new_output(bg.accum(OpKind::kAccumSum, x), kRowsOnX, DType::kF32);
  const Ref in = random_tensor({kRows, kCols}, this->rng);
  Ref want{{kRows, 2}, {}};
  for (int r = 0; r < kRows; ++r) {
    for (int j = 0; j < 2; ++j) {
      double s = 0;
      for (int i = 0; i < kSteps; ++i) s += in.data[r * kCols + 2 * i + j];
      want.data.push_back(s);
    }
  }
  const auto got =
      interpret_block_graph(bg, cast_tensors<TypeParam>({in}), FloatDomain<TypeParam>{});
  EXPECT_EQ(mismatch(got.at(0), want), "");
}

// An accumulator fed a loop-invariant tensor sees it once per iteration.
TYPED_TEST(Accumulators, SumOfInvariantInputCountsIterations) {
  BlockGraph bg({1, 1, 1}, kSteps);
  const int c = bg.new_input({2, 3}, DType::kF32, {-1, -1, -1}, -1);
  bg.new_output(bg.accum(OpKind::kAccumSum, c), {-1, -1, -1}, DType::kF32);
  const Ref in = random_tensor({2, 3}, this->rng);
  Ref want = in;
  for (double& v : want.data) v *= kSteps;
  const auto got =
      interpret_block_graph(bg, cast_tensors<TypeParam>({in}), FloatDomain<TypeParam>{});
  EXPECT_EQ(mismatch(got.at(0), want), "");
}

// accum_exp_matmul(s, v) = sum_k exp(S[r, k] - max_k S[r, k]) V[k, :] over the whole row.
// Logits shifted past the point where exp overflows (e^1000 in float64, e^100 in float32)
// show the max is subtracted; the shift keeps them exact in float, so s - M is exact too.
TYPED_TEST(Accumulators, ExpMatmulUsesTheGlobalMax) {
  const double overflow_shift = std::is_same_v<TypeParam, double> ? 1000.0 : 100.0;
  for (double shift : {0.0, overflow_shift}) {
    SCOPED_TRACE("shift " + std::to_string(shift));
    BlockGraph bg({kRows, 1, 1}, kSteps);
    const int s = bg.new_input({kRows, kCols}, DType::kF32, kRowsOnX, 1);  // [1, 2]
    const int v = bg.new_input({kCols, 5}, DType::kF32, {-1, -1, -1}, 0);  // [2, 5]
    bg.new_output(bg.accum_exp_matmul(s, v), kRowsOnX, DType::kF32);
    Ref is = random_tensor({kRows, kCols}, this->rng);
    for (double& e : is.data) e = double(float(e + shift));
    const Ref iv = random_tensor({kCols, 5}, this->rng);
    Ref want{{kRows, 5}, {}};
    for (int r = 0; r < kRows; ++r) {
      const double m =
          *std::max_element(is.data.begin() + r * kCols, is.data.begin() + (r + 1) * kCols);
      for (int c = 0; c < 5; ++c) {
        double acc = 0;
        for (int k = 0; k < kCols; ++k) {
          acc += std::exp(is.data[r * kCols + k] - m) * iv.data[k * 5 + c];
        }
        want.data.push_back(acc);
      }
    }
    const auto got =
        interpret_block_graph(bg, cast_tensors<TypeParam>({is, iv}), FloatDomain<TypeParam>{});
    EXPECT_EQ(mismatch(got.at(0), want), "");
  }
}

}  // namespace
}  // namespace mj::interp
