#pragma once
// The for-loop accumulators of a block graph (docs/ir-semantics.md): fed once per loop
// iteration with the body value(s), read once in the epilogue.
//
// The online-softmax accumulators keep every iteration's tiles and evaluate after the loop
// with M(s), the max over all iterations, so the result is the exact mathematical value;
// generated code gets the same with a running max and rescaling. A row whose scores are all
// -inf (fully masked) sums to 0 (softmax_term), a NaN score makes its row NaN.
#include <string>
#include <vector>

#include "cc/interp/dense_shape.h"
#include "cc/interp/dense_tensor.h"
#include "cc/interp/tensor_ops.h"
#include "cc/ir/error.h"
#include "cc/ir/graph.h"
#include "cc/ir/op_kind.h"

namespace mj::interp {

template <class D>
class ForLoopAccumulator {
 public:
  using V = typename D::Value;
  using Tile = DenseTensor<V>;

  ForLoopAccumulator(const D& d, const ir::Op& op) : d_(d), op_(op) {
    if (!ir::is_accumulator(op.kind)) {
      throw ir::IrError("interpret: " + std::string(ir::op_kind_name(op.kind)) +
                        " is not a for-loop accumulator");
    }
  }

  // x is this iteration's input; v is the second input of accum_exp_matmul, else null.
  void add_iteration(const Tile& x, const Tile* v) {
    ++iterations_;
    switch (op_.kind) {
      case ir::OpKind::kAccumSum: add_elementwise(x); break;
      case ir::OpKind::kAccumSumLast:
      case ir::OpKind::kAccumMeanLast: add_over_last_dim(x, false); break;
      case ir::OpKind::kAccumRmsLast: add_over_last_dim(x, true); break;
      case ir::OpKind::kAccumExpMatmul:
        v_iters_.push_back(*v);
        s_iters_.push_back(x);
        break;
      default: s_iters_.push_back(x); break;  // kAccumMaxLast, kAccumExpSumLast
    }
  }

  Tile result() const {
    if (iterations_ == 0) {
      throw ir::IrError("interpret: " + std::string(ir::op_kind_name(op_.kind)) +
                        " read before any loop iteration fed it");
    }
    switch (op_.kind) {
      case ir::OpKind::kAccumSum:
      case ir::OpKind::kAccumSumLast: return running_;
      case ir::OpKind::kAccumMeanLast: return divided_by_count(running_);
      case ir::OpKind::kAccumRmsLast: {
        Tile out = divided_by_count(running_);
        const V eps = d_.constant(op_.scalar);
        for (auto& e : out.data) e = d_.sqrt(d_.add(e, eps));
        return out;
      }
      case ir::OpKind::kAccumMaxLast: return max_over_iterations();
      case ir::OpKind::kAccumExpSumLast: return exp_sum();
      case ir::OpKind::kAccumExpMatmul: return exp_matmul();
      default: throw ir::IrError("interpret: unhandled accumulator");
    }
  }

 private:
  static ir::Shape last_dim_one(ir::Shape s) {
    s.back() = 1;
    return s;
  }

  void add_elementwise(const Tile& x) {
    if (iterations_ == 1) {
      running_ = x;
      return;
    }
    for (size_t i = 0; i < x.data.size(); ++i) {
      running_.data[i] = d_.add(running_.data[i], x.data[i]);
    }
  }

  void add_over_last_dim(const Tile& x, bool squares) {
    if (iterations_ == 1) {
      running_ = filled_tensor(last_dim_one(x.shape), d_.constant(0.0));
      last_len_ = x.shape.back();
    }
    for (size_t r = 0; r < running_.data.size(); ++r) {
      V acc = running_.data[r];
      for (int64_t j = 0; j < last_len_; ++j) {
        const V e = x.data[r * last_len_ + j];
        acc = d_.add(acc, squares ? d_.mul(e, e) : e);
      }
      running_.data[r] = acc;
    }
  }

  // Mean over iterations and the last dim: a division, so a finite field stays exact.
  Tile divided_by_count(const Tile& sum) const {
    Tile out = sum;
    const V n = count_constant(d_, op_, int64_t(iterations_) * last_len_);
    for (auto& e : out.data) e = d_.div(e, n);
    return out;
  }

  // M(s): the max of s over its last dim and over every iteration.
  Tile max_over_iterations() const {
    const ir::Shape& shape = s_iters_.front().shape;
    const int64_t len = shape.back();
    Tile m = filled_tensor(last_dim_one(shape), d_.lowest());
    for (const Tile& s : s_iters_) {
      for (size_t r = 0; r < m.data.size(); ++r) {
        for (int64_t j = 0; j < len; ++j) m.data[r] = d_.max(m.data[r], s.data[r * len + j]);
      }
    }
    return m;
  }

  // exp(s - M(s)) per element; m holds one M per row of s (softmax_term: a row without a
  // finite score holds no mass).
  Tile shifted_exp(const Tile& s, const Tile& m) const {
    Tile out{s.shape, {}};
    out.data.reserve(s.data.size());
    const int64_t len = s.shape.back();
    for (size_t i = 0; i < s.data.size(); ++i) {
      out.data.push_back(softmax_term(d_, s.data[i], m.data[i / size_t(len)]));
    }
    return out;
  }

  Tile exp_sum() const {
    const Tile m = max_over_iterations();
    Tile sum = filled_tensor(m.shape, d_.constant(0.0));
    for (const Tile& s : s_iters_) {
      const Tile e = shifted_exp(s, m);
      const int64_t len = e.shape.back();
      for (size_t r = 0; r < sum.data.size(); ++r) {
        for (int64_t j = 0; j < len; ++j) sum.data[r] = d_.add(sum.data[r], e.data[r * len + j]);
      }
    }
    return sum;
  }

  Tile exp_matmul() const {
    const Tile m = max_over_iterations();
    Tile sum;
    for (size_t i = 0; i < s_iters_.size(); ++i) {
      Tile term = matmul_op(d_, shifted_exp(s_iters_[i], m), v_iters_[i]);
      sum = i == 0 ? std::move(term) : binary_op(d_, ir::OpKind::kAdd, 0.0, sum, term);
    }
    return sum;
  }

  const D& d_;
  const ir::Op& op_;
  int iterations_ = 0;
  int64_t last_len_ = 1;
  Tile running_;                         // sum kinds: the running sum
  std::vector<Tile> s_iters_, v_iters_;  // online-softmax kinds: every iteration's inputs
};

}  // namespace mj::interp
