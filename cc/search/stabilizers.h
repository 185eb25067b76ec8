#pragma once
// Where a max may be read, and what exp may be taken of. Every max is a softmax stabilizer
// (docs/ir-semantics.md): the abstract expressions take it as the constant 0, so pruning
// cannot tell a useful max from any other use of it: every constant built on a max (its
// negation, a scalar added to it, ...) passes as a subexpression. A max is useful only the
// way the target uses one, x - max(x): subtracted from (a tile of) the value it was taken of,
// which keeps exp(x - max x) in range. A max stored by one graph and read by another keeps
// what it was taken of, so the rule holds across kernels too. Conversely, when the target
// exponentiates only such values, so does every candidate (exp_is_stabilized): the verifier
// would reject any other (cc/verify/float_safety.h), the search does not even build it.
#include <vector>

#include "cc/ir/graph.h"
#include "cc/search/pruner.h"
#include "cc/search/search_state.h"

namespace mj::search {

// Whether op computes a max (its result is a stabilizer).
bool is_max_op(const ir::Op& op);

// Whether op, if a reduce max, takes it over an index the target takes a max over: x -
// max(x) over another index does not cancel in the softmax's normalization, and the float
// check would reject it only after verification. `x` is op's input classes.
bool max_over_stabilized_index(const ir::Op& op, const DimClasses& x,
                               const std::vector<int>& target_max_classes);

// Whether op reads every stabilizer (TensorFacts::stabilizer) as the subtrahend of
// sub(x, max(x)): x has the value the max was taken of (Pruner::same_value) and the max's
// classes, but for the unit it reduced.
bool reads_stabilizers_only_to_subtract(const ir::Op& op, const std::vector<TensorFacts>& facts,
                                        Pruner& pruner);

// The facts of a new tensor made by op with this expression and these classes: a max is a
// stabilizer of its input's value; x - max(x) (and a positive multiple of it) is bounded above.
TensorFacts new_tensor_facts(const ir::Op& op, absexpr::ExprId expr, const DimClasses& classes,
                             const std::vector<TensorFacts>& facts);

// Whether op may be appended as far as exp is concerned: an exp of a tensor not bounded above
// (not x - max(x)) only when the target has such an exp itself. The verifier rejects such a
// candidate anyway (cc/verify/float_safety.h); the search does not build it at all, so an
// unstabilized softmax is never ranked, never takes a verification slot and never returns.
bool exp_is_stabilized(const ir::Op& op, const std::vector<TensorFacts>& facts,
                       bool target_has_unbounded_exp);

// Whether op is sub(x, m) with m a stabilizer: its abstract expression is x's, its value is
// not (recomputation.h).
bool subtracts_stabilizer(const ir::Op& op, const std::vector<TensorFacts>& facts);

}  // namespace mj::search
