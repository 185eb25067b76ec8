#pragma once
// The ops both levels share, on whole dense tensors (kernel level) or on tiles (block level),
// over any value domain. Values are touched only through the domain's members, so the same
// code serves floats and finite fields.
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cc/interp/dense_shape.h"
#include "cc/interp/dense_tensor.h"
#include "cc/interp/domain.h"
#include "cc/ir/elementwise.h"
#include "cc/ir/error.h"
#include "cc/ir/graph.h"
#include "cc/ir/op_kind.h"

namespace mj::interp {

template <class D>
DenseTensor<typename D::Value> unary_op(const D& d, ir::OpKind kind, double scalar,
                                        const DenseTensor<typename D::Value>& x) {
  DenseTensor<typename D::Value> out{x.shape, {}};
  out.data.reserve(x.data.size());
  for (const auto& v : x.data) out.data.push_back(ir::apply_unary(d, kind, scalar, v));
  return out;
}

template <class D>
DenseTensor<typename D::Value> binary_op(const D& d, ir::OpKind kind, double c,
                                         const DenseTensor<typename D::Value>& a,
                                         const DenseTensor<typename D::Value>& b) {
  const ir::Shape shape = numpy_broadcast(a.shape, b.shape, std::string(ir::op_kind_name(kind)));
  const std::vector<int64_t> ia = broadcast_offsets(shape, a.shape);
  const std::vector<int64_t> ib = broadcast_offsets(shape, b.shape);
  DenseTensor<typename D::Value> out{shape, {}};
  out.data.reserve(ia.size());
  for (size_t i = 0; i < ia.size(); ++i) {
    out.data.push_back(ir::apply_binary(d, kind, c, a.data[ia[i]], b.data[ib[i]]));
  }
  return out;
}

// Batched [..., m, k] @ [..., k, n]; batch dims broadcast like numpy.
template <class D>
DenseTensor<typename D::Value> matmul_op(const D& d, const DenseTensor<typename D::Value>& a,
                                         const DenseTensor<typename D::Value>& b) {
  const int ra = int(a.shape.size()), rb = int(b.shape.size());
  if (ra < 2 || rb < 2 || a.shape[ra - 1] != b.shape[rb - 2]) {
    throw ir::IrError("matmul: shapes " + ir::shape_str(a.shape) + " and " +
                      ir::shape_str(b.shape) +
                      " need rank >= 2 and a's last dim equal to b's second-to-last");
  }
  const int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], n = b.shape[rb - 1];
  const ir::Shape batch_a(a.shape.begin(), a.shape.end() - 2);
  const ir::Shape batch_b(b.shape.begin(), b.shape.end() - 2);
  const ir::Shape batch = numpy_broadcast(batch_a, batch_b, "matmul batch dims");
  const std::vector<int64_t> ba = broadcast_offsets(batch, batch_a);
  const std::vector<int64_t> bb = broadcast_offsets(batch, batch_b);
  ir::Shape shape = batch;
  shape.push_back(m);
  shape.push_back(n);
  auto out = filled_tensor(shape, d.constant(0.0));
  for (size_t bi = 0; bi < ba.size(); ++bi) {
    const auto* pa = &a.data[ba[bi] * m * k];
    const auto* pb = &b.data[bb[bi] * k * n];
    auto* po = &out.data[bi * m * n];
    // i-k-j order keeps rows contiguous; each output still sums over k in ascending order.
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t kk = 0; kk < k; ++kk) {
        const auto aik = pa[i * k + kk];
        for (int64_t j = 0; j < n; ++j) {
          po[i * n + j] = d.add(po[i * n + j], d.mul(aik, pb[kk * n + j]));
        }
      }
    }
  }
  return out;
}

// The divisor of a mean (reduce mean, rms_norm, accum_mean_last, accum_rms_last), the count n
// of the values averaged, as a constant. A domain may define `int64_t logical_count(const Op&,
// int64_t n) const` to replace n: the verifier's shrunk instances (cc/verify/shrink.h) average
// fewer values but divide by the full-size count, so that every constant that depends on a
// size keeps its full-size value and stays consistent with the graphs' own scalars.
template <class D, class = void>
struct HasLogicalCount : std::false_type {};
template <class D>
struct HasLogicalCount<D, std::void_t<decltype(std::declval<const D&>().logical_count(
                              std::declval<const ir::Op&>(), int64_t(0)))>> : std::true_type {};

template <class D>
typename D::Value count_constant(const D& d, const ir::Op& op, int64_t n) {
  if constexpr (HasLogicalCount<D>::value) {
    return d.constant(double(d.logical_count(op, n)));
  } else {
    return d.constant(double(n));
  }
}

template <class D>
DenseTensor<typename D::Value> reduce_op(const D& d, const DenseTensor<typename D::Value>& x,
                                         const ir::Op& op) {
  const int dim = op.dim;
  const ir::ReduceKind kind = op.reduce;
  const int rank = int(x.shape.size());
  if (dim < 0 || dim >= rank) {
    throw ir::IrError("reduce: dim " + std::to_string(dim) + " is out of range for shape " +
                      ir::shape_str(x.shape));
  }
  const int64_t outer = dims_product(x.shape, 0, dim), len = x.shape[dim];
  const int64_t inner = dims_product(x.shape, dim + 1, rank);
  ir::Shape shape = x.shape;
  shape[dim] = 1;
  const auto init = kind == ir::ReduceKind::kMax ? d.lowest() : d.constant(0.0);
  auto out = filled_tensor(shape, init);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t r = 0; r < len; ++r) {
      for (int64_t in = 0; in < inner; ++in) {
        auto& acc = out.data[o * inner + in];
        const auto v = x.data[(o * len + r) * inner + in];
        acc = kind == ir::ReduceKind::kMax ? d.max(acc, v) : d.add(acc, v);
      }
    }
  }
  if (kind == ir::ReduceKind::kMean) {
    // Divide (not multiply by 1/len) so a finite field stays exact.
    const auto n = count_constant(d, op, len);
    for (auto& v : out.data) v = d.div(v, n);
  }
  return out;
}

// x / sqrt(mean(x^2, last dim) + eps)
template <class D>
DenseTensor<typename D::Value> rms_norm_op(const D& d, const DenseTensor<typename D::Value>& x,
                                           const ir::Op& op) {
  const int64_t len = x.shape.back();
  const int64_t rows = dims_product(x.shape, 0, int(x.shape.size()) - 1);
  DenseTensor<typename D::Value> out{x.shape, x.data};
  const auto n = count_constant(d, op, len);
  const auto e = d.constant(op.scalar);
  for (int64_t r = 0; r < rows; ++r) {
    auto sum_sq = d.constant(0.0);
    for (int64_t j = 0; j < len; ++j) {
      const auto v = x.data[r * len + j];
      sum_sq = d.add(sum_sq, d.mul(v, v));
    }
    const auto rms = d.sqrt(d.add(d.div(sum_sq, n), e));
    for (int64_t j = 0; j < len; ++j) out.data[r * len + j] = d.div(x.data[r * len + j], rms);
  }
  return out;
}

template <class V>
DenseTensor<V> concat_op(const DenseTensor<V>& a, const DenseTensor<V>& b, int dim) {
  const int rank = int(a.shape.size());
  bool ok = rank == int(b.shape.size()) && dim >= 0 && dim < rank;
  for (int i = 0; ok && i < rank; ++i) ok = i == dim || a.shape[i] == b.shape[i];
  if (!ok) {
    throw ir::IrError("concat: shapes " + ir::shape_str(a.shape) + " and " +
                      ir::shape_str(b.shape) + " must agree on every dim but " +
                      std::to_string(dim));
  }
  const int64_t outer = dims_product(a.shape, 0, dim);
  const int64_t run_a = dims_product(a.shape, dim, rank), run_b = dims_product(b.shape, dim, rank);
  ir::Shape shape = a.shape;
  shape[dim] += b.shape[dim];
  DenseTensor<V> out{shape, {}};
  out.data.reserve(size_t(outer * (run_a + run_b)));
  for (int64_t o = 0; o < outer; ++o) {
    out.data.insert(out.data.end(), a.data.begin() + o * run_a, a.data.begin() + (o + 1) * run_a);
    out.data.insert(out.data.end(), b.data.begin() + o * run_b, b.data.begin() + (o + 1) * run_b);
  }
  return out;
}

// Evaluates an op that both levels share (elementwise, matmul, reduce, rms_norm, concat).
template <class D>
DenseTensor<typename D::Value> eval_shared_op(
    const D& d, const ir::Op& op, const std::vector<const DenseTensor<typename D::Value>*>& args) {
  if (ir::is_unary_elementwise(op.kind)) return unary_op(d, op.kind, op.scalar, *args.at(0));
  if (ir::is_binary_elementwise(op.kind))
    return binary_op(d, op.kind, op.scalar, *args.at(0), *args.at(1));
  switch (op.kind) {
    case ir::OpKind::kMatmul: return matmul_op(d, *args.at(0), *args.at(1));
    case ir::OpKind::kReduce: return reduce_op(d, *args.at(0), op);
    case ir::OpKind::kRmsNorm: return rms_norm_op(d, *args.at(0), op);
    case ir::OpKind::kConcat: return concat_op(*args.at(0), *args.at(1), op.dim);
    default:
      throw ir::IrError("interpret: " + std::string(ir::op_kind_name(op.kind)) +
                        " is not an op on whole tensors");
  }
}

}  // namespace mj::interp
