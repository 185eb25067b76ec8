#pragma once
// Abstract expressions of every tensor of a μGraph (Mirage §4.3). Indices are forgotten: a
// tile is its kernel tensor's variable, a matmul over k elements is sum(k, a*b), and a for-loop
// accumulator adds one more sum over the iterations:
//   accum_sum(x)            sum(F, x)
//   accum_sum_last(x)       sum(F*last, x)            last = x's tile size in its last dim
//   accum_mean_last(x)      sum(F*last, x) / (F*last)
//   accum_rms_last(x, eps)  sqrt(sum(F*last, x*x) / (F*last) + eps)
//   accum_exp_sum_last(s)   sum(F*last, exp(s))
//   accum_exp_matmul(s, v)  sum(F*k, exp(s) * v)      k = s's tile size in its last dim
// Every max is a softmax stabilizer (docs/ir-semantics.md): x - max(x) is x, so a max is the
// constant 0, exactly as the finite-field fingerprints treat it (and the running max of the
// online-softmax accumulators disappears). rsqrt(x) is 1/sqrt(x), recip(x) is 1/x,
// square(x) is x*x, a - b is a + -b; mul_scalar/add_scalar multiply/add a constant.
// A matmul of two concats along k becomes the sum of the two matmuls, decided here from the
// IR, where the concat dims are known; any other concat stays a concat term.
#include <vector>

#include "cc/absexpr/expr.h"
#include "cc/ir/graph.h"

namespace mj::absexpr {

struct DeriveOptions {
  // false: a max stays an uninterpreted max(n, x), for graphs whose max is a real result.
  bool max_is_stabilizer = true;
};

// One expression per tensor of g, indexed by tensor id; kernel input i is the variable x<i>.
std::vector<ExprId> abstract_expressions(const ir::KernelGraph& g, ExprPool& pool,
                                         const DeriveOptions& options = {});
// The same for a block graph, whose input i is a tile of the kernel tensor whose expression
// is kernel_inputs[i] (a customized op's inputs, in order).
std::vector<ExprId> abstract_expressions(const ir::BlockGraph& g,
                                         const std::vector<ExprId>& kernel_inputs, ExprPool& pool,
                                         const DeriveOptions& options = {});

// The expression of op's output from the expressions of g's tensors so far (indexed by tensor
// id; op's inputs at least, and the producers of matmul operands for the concat rule).
// forloop_range is the block graph's F, 1 at kernel level. For every op except kInput,
// kOutput and kCustomized (whose expressions come from outside the op).
ExprId abstract_expression_of_op(const ir::Graph& g, const ir::Op& op,
                                 const std::vector<ExprId>& tensor_exprs, int forloop_range,
                                 ExprPool& pool, const DeriveOptions& options = {});

// Incremental forms for a search that appends ops: `exprs` holds the expressions of the
// first exprs.size() tensors of g (from an earlier call on a prefix of g) and is extended to
// all of g's tensors.
void extend_abstract_expressions(const ir::KernelGraph& g, ExprPool& pool,
                                 std::vector<ExprId>& exprs, const DeriveOptions& options = {});
void extend_abstract_expressions(const ir::BlockGraph& g, const std::vector<ExprId>& kernel_inputs,
                                 ExprPool& pool, std::vector<ExprId>& exprs,
                                 const DeriveOptions& options = {});

}  // namespace mj::absexpr
