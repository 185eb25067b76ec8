#pragma once
// Targets and inspection helpers shared by the search tests (RMSNorm + Linear is
// cc/testing/rmsnorm_linear.h, shared with the other modules' tests).
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cc/interp/float_interp.h"
#include "cc/ir/graph.h"
#include "cc/ir/hash.h"
#include "cc/search/search.h"
#include "cc/testing/rmsnorm_linear.h"

namespace mj::search_test {

inline ir::KernelGraph gated_mlp(int64_t m, int64_t k, int64_t n) {
  ir::KernelGraph g;
  const int x = g.new_input({m, k}, ir::DType::kF32);
  const int w1 = g.new_input({k, n}, ir::DType::kF32);
  const int w3 = g.new_input({k, n}, ir::DType::kF32);
  g.mark_output(
      g.binary(ir::OpKind::kMul, g.unary(ir::OpKind::kSilu, g.matmul(x, w1)), g.matmul(x, w3)));
  return g;
}

inline ir::KernelGraph exp_matmul(int64_t m, int64_t k, int64_t n) {
  ir::KernelGraph g;
  const int x = g.new_input({m, k}, ir::DType::kF32);
  const int w = g.new_input({k, n}, ir::DType::kF32);
  g.mark_output(g.unary(ir::OpKind::kExp, g.matmul(x, w)));
  return g;
}

// LoRA: X @ W + (X @ A) @ B with rank r.
inline ir::KernelGraph lora(int64_t m, int64_t k, int64_t n, int64_t r) {
  ir::KernelGraph g;
  const int x = g.new_input({m, k}, ir::DType::kF32);
  const int w = g.new_input({k, n}, ir::DType::kF32);
  const int a = g.new_input({k, r}, ir::DType::kF32);
  const int b = g.new_input({r, n}, ir::DType::kF32);
  g.mark_output(g.binary(ir::OpKind::kAdd, g.matmul(x, w), g.matmul(g.matmul(x, a), b)));
  return g;
}

// nTrans (the nGPT block update): rms_norm(X + alpha * (rms_norm(H) - X)).
inline ir::KernelGraph ntrans(int64_t m, int64_t n) {
  ir::KernelGraph g;
  const int h = g.new_input({m, n}, ir::DType::kF32);
  const int x = g.new_input({m, n}, ir::DType::kF32);
  const int alpha = g.new_input({m, n}, ir::DType::kF32);
  const int d = g.binary(ir::OpKind::kSub, g.rms_norm(h, 1e-6), x);
  g.mark_output(
      g.rms_norm(g.binary(ir::OpKind::kAdd, x, g.binary(ir::OpKind::kMul, alpha, d)), 1e-6));
  return g;
}

// One attention head: softmax(Q @ K) @ V with K given as [d, kv], the softmax spelled
// max -> sub -> exp -> sum -> div as the frontend normalizes it.
// With heads > 0, every tensor gets a leading heads dim (batched matmuls, as in GQA after
// the frontend folds the query groups into rows).
// With scale != 1 the scores are scale·(Q @ K), as jax.nn.softmax(Q @ K / sqrt(d)) gives them.
inline ir::KernelGraph attention(int64_t q, int64_t d, int64_t kv, int64_t heads = 0,
                                 double scale = 1.0) {
  auto shape = [&](int64_t a, int64_t b) {
    return heads > 0 ? ir::Shape{heads, a, b} : ir::Shape{a, b};
  };
  const int last = heads > 0 ? 2 : 1;
  ir::KernelGraph g;
  const int qt = g.new_input(shape(q, d), ir::DType::kF32);
  const int kt = g.new_input(shape(d, kv), ir::DType::kF32);
  const int vt = g.new_input(shape(kv, d), ir::DType::kF32);
  int s = g.matmul(qt, kt);
  if (scale != 1.0) s = g.unary(ir::OpKind::kMulScalar, s, scale);
  const int mx = g.reduce(s, last, ir::ReduceKind::kMax);
  const int e = g.unary(ir::OpKind::kExp, g.binary(ir::OpKind::kSub, s, mx));
  g.mark_output(
      g.matmul(g.binary(ir::OpKind::kDiv, e, g.reduce(e, last, ir::ReduceKind::kSum)), vt));
  return g;
}

// Small limits for tests on 2 shared cores; every limit is one a user could choose.
inline search::SearchConfig small_config() {
  search::SearchConfig c;
  c.threads = 2;
  c.time_budget_s = 50;
  c.max_kernel_ops = 1;
  c.max_block_ops = 5;
  return c;
}

// The block graph of g when g is one customized op on its inputs, else nullptr.
// The candidates' canonical hashes, best first: what two searches must agree on.
inline std::vector<std::string> hashes_in_order(const search::SearchResult& r) {
  std::vector<std::string> h;
  for (const auto& c : r.candidates) h.push_back(ir::graph_hash(*c));
  return h;
}

inline const ir::BlockGraph* single_block_graph(const ir::KernelGraph& g) {
  const ir::BlockGraph* found = nullptr;
  for (const ir::Op& op : g.ops()) {
    if (op.kind == ir::OpKind::kInput || op.kind == ir::OpKind::kOutput) continue;
    if (op.kind != ir::OpKind::kCustomized || found) return nullptr;
    found = op.block_graph.get();
  }
  return found;
}

// The best-ranked candidate of r that is one customized op whose block graph has `shape`;
// nullptr when none is.
template <class Predicate>
const ir::KernelGraph* first_single_kernel(const search::SearchResult& r, Predicate shape) {
  for (const auto& c : r.candidates) {
    const ir::BlockGraph* bg = single_block_graph(*c);
    if (bg && shape(*bg)) return c.get();
  }
  return nullptr;
}

inline int count_ops(const ir::Graph& g, ir::OpKind kind) {
  int n = 0;
  for (const ir::Op& op : g.ops()) n += op.kind == kind;
  return n;
}

// Max |a - b| / (1 + |a|) over the outputs of both graphs in float64 on the same random
// inputs: independent evidence next to the verifier's finite-field proof.
inline double float_mismatch(const ir::KernelGraph& a, const ir::KernelGraph& b,
                             uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<interp::DenseTensor<double>> in;
  for (int id : a.input_ids()) {
    interp::DenseTensor<double> t;
    t.shape = a.tensor(id).shape;
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    for (int64_t i = 0; i < n; ++i) t.data.push_back(u(rng));
    in.push_back(std::move(t));
  }
  const auto oa = interp::interpret_f64(a, in), ob = interp::interpret_f64(b, in);
  double worst = 0;
  for (size_t i = 0; i < oa.size(); ++i) {
    for (size_t j = 0; j < oa[i].data.size(); ++j) {
      worst =
          std::max(worst, std::abs(oa[i].data[j] - ob[i].data[j]) / (1 + std::abs(oa[i].data[j])));
    }
  }
  return worst;
}

}  // namespace mj::search_test
