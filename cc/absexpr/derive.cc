#include "cc/absexpr/derive.h"

#include <stdexcept>
#include <string>

#include "cc/ir/elementwise.h"

namespace mj::absexpr {

using ir::BlockGraph;
using ir::Graph;
using ir::KernelGraph;
using ir::Op;
using ir::op_kind_name;
using ir::OpKind;
using ir::ReduceKind;
using ir::Shape;

namespace {

constexpr const char* kWho = "abstract_expressions";

// Elementwise ops as cc/ir/ops.def defines them, on expressions. The activations stay whole
// (uninterpreted symbols, see expr.h) rather than expanded into their formulas.
struct ExprDomain {
  using Value = ExprId;
  ExprPool& pool;
  ExprId constant(double c) const { return pool.constant(c); }
  ExprId add(ExprId a, ExprId b) const { return pool.add(a, b); }
  ExprId sub(ExprId a, ExprId b) const { return pool.sub(a, b); }
  ExprId mul(ExprId a, ExprId b) const { return pool.mul(a, b); }
  ExprId div(ExprId a, ExprId b) const { return pool.div(a, b); }
  ExprId neg(ExprId a) const { return pool.neg(a); }
  ExprId recip(ExprId a) const { return pool.div(pool.constant(Constant::rational(1, 1)), a); }
  ExprId exp(ExprId a) const { return pool.unary(ExprOp::kExp, a); }
  ExprId sqrt(ExprId a) const { return pool.unary(ExprOp::kSqrt, a); }
  ExprId relu(ExprId a) const { return pool.unary(ExprOp::kRelu, a); }
  ExprId erf(ExprId a) const { return pool.unary(ExprOp::kErf, a); }
  // A term in x and the mask, not c: an over-approximation is all pruning needs, and the
  // verifier keeps select apart from any arithmetic (ff_domain.h).
  ExprId select(ExprId mask, ExprId x, double) const { return pool.add(pool.mul(x, mask), mask); }
};
ExprId sigmoid(const ExprDomain& d, ExprId x) { return d.pool.unary(ExprOp::kSigmoid, x); }
ExprId silu(const ExprDomain& d, ExprId x) { return d.pool.unary(ExprOp::kSilu, x); }
ExprId gelu(const ExprDomain& d, ExprId x) { return d.pool.unary(ExprOp::kGelu, x); }

// The rules for one op. Reads the expressions of g's tensors from `exprs` (indexed by tensor
// id), which the caller may extend between calls.
class Deriver {
 public:
  Deriver(const Graph& g, ExprPool& pool, const std::vector<ExprId>& exprs, const DeriveOptions& o)
      : g_(g), pool_(pool), e_(exprs), options_(o) {}

  // `forloop` is F (1 for a kernel graph, which has no accumulators).
  ExprId derive(const Op& op, int64_t forloop) {
    if (ir::is_unary_elementwise(op.kind)) {
      return ir::apply_unary(ExprDomain{pool_}, op.kind, op.scalar, in(op, 0), kWho);
    }
    if (ir::is_binary_elementwise(op.kind)) {
      return ir::apply_binary(ExprDomain{pool_}, op.kind, op.scalar, in(op, 0), in(op, 1), kWho);
    }
    switch (op.kind) {
      case OpKind::kMatmul: return matmul(op.inputs[0], op.inputs[1]);
      case OpKind::kReduce: {
        const int64_t n = shape(op.inputs[0]).at(op.dim);
        switch (op.reduce) {
          case ReduceKind::kSum: return pool_.sum(n, in(op, 0));
          case ReduceKind::kMean: return mean(n, in(op, 0));
          case ReduceKind::kMax: return max_of(n, in(op, 0));
        }
        break;
      }
      case OpKind::kRmsNorm:
        return pool_.div(in(op, 0), rms(shape(op.inputs[0]).back(), in(op, 0), op.scalar));
      case OpKind::kConcat: {
        const int64_t a = shape(op.inputs[0]).at(op.dim), b = shape(op.inputs[1]).at(op.dim);
        return pool_.concat(a, b, in(op, 0), in(op, 1));
      }
      case OpKind::kAccumSum: return pool_.sum(forloop, in(op, 0));
      case OpKind::kAccumSumLast: return pool_.sum(loop_and_last(op, forloop), in(op, 0));
      case OpKind::kAccumMeanLast: return mean(loop_and_last(op, forloop), in(op, 0));
      case OpKind::kAccumRmsLast: return rms(loop_and_last(op, forloop), in(op, 0), op.scalar);
      case OpKind::kAccumMaxLast: return max_of(loop_and_last(op, forloop), in(op, 0));
      case OpKind::kAccumExpSumLast:
        return pool_.sum(loop_and_last(op, forloop), exp_stabilized(op, forloop));
      case OpKind::kAccumExpMatmul:
        return pool_.sum(loop_and_last(op, forloop),
                         pool_.mul(exp_stabilized(op, forloop), in(op, 1)));
      default:  // input, output and customized have no expression of their own
        break;
    }
    throw std::logic_error("abstract_expressions: no rule for op '" +
                           std::string(op_kind_name(op.kind)) + "'");
  }

 private:
  const Shape& shape(int t) const { return g_.tensor(t).shape; }
  ExprId in(const Op& op, int i) const { return e_.at(op.inputs.at(i)); }
  ExprId constant(double v) { return pool_.constant(v); }
  ExprId count(int64_t n) { return pool_.constant(Constant::rational(n, 1)); }

  ExprId max_of(int64_t n, ExprId x) {
    return options_.max_is_stabilizer ? count(0) : pool_.max(n, x);
  }
  ExprId mean(int64_t n, ExprId x) { return pool_.div(pool_.sum(n, x), count(n)); }
  ExprId rms(int64_t n, ExprId x, double eps) {
    return pool_.unary(ExprOp::kSqrt, pool_.add(mean(n, pool_.mul(x, x)), constant(eps)));
  }

  // a @ b, splitting matmuls of concats along k into a sum of matmuls.
  ExprId matmul(int a, int b) {
    const Op* ca = concat_producer(a, int(shape(a).size()) - 1);
    const Op* cb = concat_producer(b, int(shape(b).size()) - 2);
    if (ca && cb) {
      const int64_t ka = shape(ca->inputs[0]).back();
      const int64_t kb = shape(cb->inputs[0])[shape(cb->inputs[0]).size() - 2];
      if (ka == kb) {
        return pool_.add(matmul(ca->inputs[0], cb->inputs[0]),
                         matmul(ca->inputs[1], cb->inputs[1]));
      }
    }
    return pool_.sum(shape(a).back(), pool_.mul(e_.at(a), e_.at(b)));
  }
  const Op* concat_producer(int t, int dim) const {
    const Op& op = g_.ops().at(g_.tensor(t).producer);
    return op.kind == OpKind::kConcat && op.dim == dim ? &op : nullptr;
  }

  // How many elements a *_last accumulator reduces: every iteration's tile of the last dim
  // (for accum_exp_matmul, s's last dim is the k of the product).
  int64_t loop_and_last(const Op& op, int64_t forloop) const {
    return forloop * shape(op.inputs[0]).back();
  }
  // exp(s - M(s)) of the online-softmax accumulators, M the max over the same elements.
  ExprId exp_stabilized(const Op& op, int64_t forloop) {
    const ExprId s = in(op, 0);
    return pool_.unary(ExprOp::kExp, pool_.sub(s, max_of(loop_and_last(op, forloop), s)));
  }

  const Graph& g_;
  ExprPool& pool_;
  const std::vector<ExprId>& e_;
  const DeriveOptions& options_;
};

// Derives every op of g whose outputs are not yet in `exprs`. `input_expr(op)` gives a
// kInput's expression, `customized(op)` the outputs of a customized op.
template <class InputExpr, class Customized>
void extend(const Graph& g, ExprPool& pool, std::vector<ExprId>& exprs,
            const DeriveOptions& options, InputExpr input_expr, Customized customized,
            int64_t forloop) {
  Deriver d(g, pool, exprs, options);
  for (const Op& op : g.ops()) {
    if (op.outputs.empty() || size_t(op.outputs[0]) < exprs.size()) continue;
    if (size_t(op.outputs[0]) != exprs.size()) {
      throw std::logic_error("abstract_expressions: tensors are not in op order");
    }
    if (op.kind == OpKind::kInput) {
      exprs.push_back(input_expr(op));
    } else if (op.kind == OpKind::kCustomized) {
      for (ExprId out : customized(op)) exprs.push_back(out);
    } else {
      exprs.push_back(d.derive(op, forloop));
    }
  }
  if (exprs.size() != g.tensors().size()) {
    throw std::logic_error("abstract_expressions: a tensor without a producing op");
  }
}

}  // namespace

ExprId abstract_expression_of_op(const Graph& g, const Op& op,
                                 const std::vector<ExprId>& tensor_exprs, int forloop_range,
                                 ExprPool& pool, const DeriveOptions& options) {
  if (op.kind == OpKind::kInput || op.kind == OpKind::kOutput || op.kind == OpKind::kCustomized) {
    throw std::invalid_argument("abstract_expression_of_op: '" +
                                std::string(op_kind_name(op.kind)) +
                                "' has no expression of its own");
  }
  for (int t : op.inputs) {
    if (t < 0 || size_t(t) >= tensor_exprs.size()) {
      throw std::invalid_argument("abstract_expression_of_op: no expression for input t" +
                                  std::to_string(t));
    }
  }
  Deriver d(g, pool, tensor_exprs, options);
  return d.derive(op, forloop_range);
}

void extend_abstract_expressions(const BlockGraph& g, const std::vector<ExprId>& kernel_inputs,
                                 ExprPool& pool, std::vector<ExprId>& exprs,
                                 const DeriveOptions& options) {
  if (int(kernel_inputs.size()) < g.num_inputs()) {
    throw std::invalid_argument("abstract_expressions: the block graph has " +
                                std::to_string(g.num_inputs()) + " inputs but " +
                                std::to_string(kernel_inputs.size()) + " expressions were given");
  }
  extend(
      g, pool, exprs, options, [&](const Op& op) { return kernel_inputs.at(op.io_index); },
      [](const Op&) -> std::vector<ExprId> {
        throw std::logic_error("abstract_expressions: customized op inside a block graph");
      },
      g.forloop_range());
}

void extend_abstract_expressions(const KernelGraph& g, ExprPool& pool, std::vector<ExprId>& exprs,
                                 const DeriveOptions& options) {
  extend(
      g, pool, exprs, options, [&](const Op& op) { return pool.var(op.io_index); },
      [&](const Op& op) {
        std::vector<ExprId> inputs;
        for (int t : op.inputs) inputs.push_back(exprs.at(t));
        const BlockGraph& bg = *op.block_graph;
        const std::vector<ExprId> inner = abstract_expressions(bg, inputs, pool, options);
        std::vector<ExprId> outs;
        for (int t : bg.output_ids()) outs.push_back(inner.at(t));
        return outs;
      },
      1);
}

std::vector<ExprId> abstract_expressions(const KernelGraph& g, ExprPool& pool,
                                         const DeriveOptions& options) {
  std::vector<ExprId> exprs;
  extend_abstract_expressions(g, pool, exprs, options);
  return exprs;
}

std::vector<ExprId> abstract_expressions(const BlockGraph& g,
                                         const std::vector<ExprId>& kernel_inputs, ExprPool& pool,
                                         const DeriveOptions& options) {
  std::vector<ExprId> exprs;
  extend_abstract_expressions(g, kernel_inputs, pool, exprs, options);
  return exprs;
}

}  // namespace mj::absexpr
