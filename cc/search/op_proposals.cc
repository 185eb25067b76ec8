#include "cc/search/op_proposals.h"

#include <algorithm>

#include "cc/ir/append_op.h"
#include "cc/ir/shape_rules.h"

namespace mj::search {

using ir::Graph;
using ir::is_unary_elementwise;
using ir::kMaxRank;
using ir::Op;
using ir::OpKind;
using ir::ReduceKind;
using ir::Shape;

namespace {

// Resets the reused op to a fresh proposal.
Op& make(Op& op, OpKind kind, std::initializer_list<int> inputs) {
  op.kind = kind;
  op.inputs = inputs;
  op.scalar = 0.0;
  op.dim = -1;
  op.reduce = ReduceKind::kSum;
  return op;
}

// The unary ops without a constant, in op table order (cc/ir/ops.def).
const std::vector<OpKind>& plain_unary_ops() {
  static const std::vector<OpKind> kinds = [] {
    std::vector<OpKind> out;
    for (int k = 0; k < ir::kNumOpKinds; ++k) {
      if (is_unary_elementwise(OpKind(k)) && !ir::has_scalar(OpKind(k))) out.push_back(OpKind(k));
    }
    return out;
  }();
  return kinds;
}
constexpr OpKind kOrdered[] = {OpKind::kSub, OpKind::kDiv, OpKind::kMatmul};

// Whether t came out of a concat along `dim` (or along any dim when dim < 0).
bool is_concat(const Graph& g, int t, int dim = -1) {
  const int p = g.tensor(t).producer;
  if (p < 0 || g.ops()[p].kind != OpKind::kConcat) return false;
  return dim < 0 || g.ops()[p].dim == dim;
}

// A concat has no abstract expression of its own to look up (subexpression.h); the only op
// whose expression it takes part in is a matmul contracting along the concat dim
// (cc/absexpr/derive.h). Every other use would be pruned, so it is not proposed at all.
bool uses_concats_as_contractions(const Graph& g, const Op& op) {
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const int t = op.inputs[i];
    if (!is_concat(g, t)) continue;
    if (op.kind != OpKind::kMatmul) return false;
    const int rank = int(g.tensor(t).shape.size());
    if (!is_concat(g, t, i == 0 ? rank - 1 : rank - 2)) return false;
  }
  return true;
}

bool is_input(const Graph& g, int t) {
  const int p = g.tensor(t).producer;
  return p >= 0 && g.ops()[p].kind == OpKind::kInput;
}

}  // namespace

void for_each_proposal(const Graph& g, const ProposalOptions& o,
                       const std::function<void(const Op&)>& f_all) {
  const bool any_concat = o.concat;
  auto f = [&](const Op& op) {
    if (any_concat && !uses_concats_as_contractions(g, op)) return;
    f_all(op);
  };
  Op op;
  const int n = int(g.tensors().size());
  const bool block = o.level == Level::kBlock;
  for (int t = 0; t < n; ++t) {
    const bool t_new = t >= o.min_newest_input;
    const int rank = int(g.tensor(t).shape.size());
    for (int u = 0; u < n; ++u) {
      if (!t_new && u < o.min_newest_input) continue;
      // mul(t, t) is square(t); add(t, t) stays (there is no doubling op).
      if (u > t) f(make(op, OpKind::kMul, {t, u}));
      if (u >= t) f(make(op, OpKind::kAdd, {t, u}));
      for (OpKind k : kOrdered) f(make(op, k, {t, u}));
      if (block && o.forloop_range > 1 && o.online_softmax) {
        f(make(op, OpKind::kAccumExpMatmul, {t, u}));
      }
      // A select's mask is a program input (a boolean mask made outside the region): only
      // inputs are proposed as masks.
      if (u != t && is_input(g, u)) {
        for (double c : o.select_fills) {
          make(op, OpKind::kSelect, {t, u}).scalar = c;
          f(op);
        }
      }
      if (o.concat && u != t && int(g.tensor(u).shape.size()) == rank) {
        // Along a matmul's contraction dims only: the left operand's last, the right's
        // second to last (see uses_concats_as_contractions).
        for (int d = std::max(0, rank - 2); d < rank; ++d) {
          make(op, OpKind::kConcat, {t, u}).dim = d;
          f(op);
        }
      }
    }
    if (!t_new) continue;
    for (OpKind k : plain_unary_ops()) f(make(op, k, {t}));
    for (double c : o.scalars) {
      for (OpKind k : {OpKind::kMulScalar, OpKind::kAddScalar, OpKind::kRmsNorm}) {
        make(op, k, {t}).scalar = c;
        f(op);
      }
    }
    for (int d = 0; d < rank; ++d) {
      if (g.tensor(t).shape[d] == 1) continue;
      for (ReduceKind r : {ReduceKind::kSum, ReduceKind::kMean, ReduceKind::kMax}) {
        if (r == ReduceKind::kMax && !o.max) continue;
        make(op, OpKind::kReduce, {t}).dim = d;
        op.reduce = r;
        f(op);
      }
    }
    if (block && o.forloop_range > 1) {
      for (OpKind k : {OpKind::kAccumSum, OpKind::kAccumSumLast, OpKind::kAccumMeanLast}) {
        f(make(op, k, {t}));
      }
      // No accum_max_last: its result is in the epilogue, so it can never be subtracted from
      // the body tensor it was taken of, the only use of a max (stabilizers.h).
      for (double c : o.scalars) {
        make(op, OpKind::kAccumRmsLast, {t}).scalar = c;
        f(op);
      }
      if (o.online_softmax) f(make(op, OpKind::kAccumExpSumLast, {t}));
    }
  }
}

namespace {

// numpy broadcasting, right-aligned; nullopt when two dims differ and neither is 1.
std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r, 1);
  for (size_t i = 1; i <= r; ++i) {
    const int64_t x = i <= a.size() ? a[a.size() - i] : 1;
    const int64_t y = i <= b.size() ? b[b.size() - i] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[r - i] = std::max(x, y);
  }
  return out;
}

}  // namespace

std::optional<Shape> proposal_shape(const Graph& g, const Op& op) {
  const Shape& a = g.tensor(op.inputs[0]).shape;
  if (op.inputs.size() == 1) {
    Shape s = a;
    const ir::OpClass cls = ir::op_info(op.kind).cls;
    if (cls == ir::OpClass::kReduce) s[op.dim] = 1;
    if (cls == ir::OpClass::kAccumLast) s.back() = 1;
    return s;
  }
  const Shape& b = g.tensor(op.inputs[1]).shape;
  switch (op.kind) {
    case OpKind::kMatmul:
    case OpKind::kAccumExpMatmul: {
      if (a.size() < 2 || b.size() < 2 || a[a.size() - 1] != b[b.size() - 2]) return std::nullopt;
      auto batch = broadcast(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
      if (!batch || batch->size() + 2 > size_t(kMaxRank)) return std::nullopt;
      if (a.size() == 2 && b.size() == 2) batch->clear();
      batch->push_back(a[a.size() - 2]);
      batch->push_back(b[b.size() - 1]);
      return batch;
    }
    case OpKind::kConcat: {
      if (a.size() != b.size()) return std::nullopt;
      Shape s = a;
      for (size_t d = 0; d < a.size(); ++d) {
        if (int(d) != op.dim && a[d] != b[d]) return std::nullopt;
      }
      s[op.dim] += b[op.dim];
      return s;
    }
    default: return broadcast(a, b);
  }
}

int append_op(Graph& g, const Op& op) { return ir::append_op(g, op, op.inputs); }

}  // namespace mj::search
