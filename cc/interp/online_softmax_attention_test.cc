// Single-kernel attention with online softmax over a split KV length:
//   out = accum_exp_matmul(s, v) / accum_exp_sum_last(s),  s = Q K^T / sqrt(d)
// must equal softmax(Q K^T / sqrt(d)) V computed directly, and the same attention written
// as a kernel graph with a max-stabilized softmax.
#include <gtest/gtest.h>

#include <algorithm>
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

using interp_testing::cast_tensors;
using interp_testing::mismatch;
using interp_testing::random_tensor;

// Q[heads, queries, dim], K^T[heads, dim, keys], V[heads, keys, dim].
constexpr int64_t kHeads = 2, kQueries = 4, kDim = 8, kKeys = 16;
constexpr int kSteps = 4;
const double kScale = 1.0 / std::sqrt(double(kDim));

KernelGraph fused_attention() {
  // x: one head per block; y: half the queries per block; the loop walks keys 4 at a time.
  auto bg = std::make_shared<BlockGraph>(Dim3{int(kHeads), 2, 1}, kSteps);
  const int q = bg->new_input({kHeads, kQueries, kDim}, DType::kF32, {0, 1, -1}, -1);
  const int kt = bg->new_input({kHeads, kDim, kKeys}, DType::kF32, {0, -1, -1}, 2);
  const int v = bg->new_input({kHeads, kKeys, kDim}, DType::kF32, {0, -1, -1}, 1);
  const int s = bg->unary(OpKind::kMulScalar, bg->matmul(q, kt), kScale);
  const int o = bg->accum_exp_matmul(s, v);
  const int l = bg->accum(OpKind::kAccumExpSumLast, s);
  bg->new_output(bg->binary(OpKind::kDiv, o, l), {0, 1, -1}, DType::kF32);

  KernelGraph g;
  const int kq = g.new_input({kHeads, kQueries, kDim}, DType::kF32);
  const int kk = g.new_input({kHeads, kDim, kKeys}, DType::kF32);
  const int kv = g.new_input({kHeads, kKeys, kDim}, DType::kF32);
  g.mark_output(g.customized({kq, kk, kv}, bg).at(0));
  return g;
}

KernelGraph unfused_attention() {
  KernelGraph g;
  const int q = g.new_input({kHeads, kQueries, kDim}, DType::kF32);
  const int kt = g.new_input({kHeads, kDim, kKeys}, DType::kF32);
  const int v = g.new_input({kHeads, kKeys, kDim}, DType::kF32);
  const int s = g.unary(OpKind::kMulScalar, g.matmul(q, kt), kScale);
  const int e = g.unary(OpKind::kExp, g.binary(OpKind::kSub, s, g.reduce(s, -1, ReduceKind::kMax)));
  const int p = g.binary(OpKind::kDiv, e, g.reduce(e, -1, ReduceKind::kSum));
  g.mark_output(g.matmul(p, v));
  return g;
}

DenseTensor<double> brute_force(const DenseTensor<double>& q, const DenseTensor<double>& kt,
                                const DenseTensor<double>& v) {
  DenseTensor<double> out{{kHeads, kQueries, kDim}, {}};
  for (int64_t h = 0; h < kHeads; ++h) {
    for (int64_t i = 0; i < kQueries; ++i) {
      std::vector<double> logits(kKeys);
      for (int64_t j = 0; j < kKeys; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < kDim; ++c) {
          dot += q.data[(h * kQueries + i) * kDim + c] * kt.data[(h * kDim + c) * kKeys + j];
        }
        logits[j] = dot * kScale;
      }
      const double m = *std::max_element(logits.begin(), logits.end());
      double total = 0;
      for (double& z : logits) total += (z = std::exp(z - m));
      for (int64_t c = 0; c < kDim; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < kKeys; ++j) {
          acc += logits[j] / total * v.data[(h * kKeys + j) * kDim + c];
        }
        out.data.push_back(acc);
      }
    }
  }
  return out;
}

template <class T>
class OnlineSoftmaxAttention : public ::testing::Test {};
using FloatTypes = ::testing::Types<double, float>;
TYPED_TEST_SUITE(OnlineSoftmaxAttention, FloatTypes);

TYPED_TEST(OnlineSoftmaxAttention, EqualsSoftmaxQKTV) {
  std::mt19937 rng(2025);
  // Logits of a few units, so the softmax is far from uniform.
  const std::vector<DenseTensor<double>> inputs = {
      random_tensor({kHeads, kQueries, kDim}, rng, -2, 2),
      random_tensor({kHeads, kDim, kKeys}, rng, -2, 2), random_tensor({kHeads, kKeys, kDim}, rng)};
  const FloatDomain<TypeParam> d;
  const auto want = brute_force(inputs[0], inputs[1], inputs[2]);
  const auto fused = interpret(fused_attention(), cast_tensors<TypeParam>(inputs), d);
  const auto unfused = interpret(unfused_attention(), cast_tensors<TypeParam>(inputs), d);
  EXPECT_EQ(mismatch(fused.at(0), want), "");
  EXPECT_EQ(mismatch(unfused.at(0), want), "");
}

}  // namespace
}  // namespace mj::interp
