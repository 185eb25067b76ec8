#pragma once
// Where a max may be read. Every max is a softmax stabilizer (docs/ir-semantics.md): the
// abstract expressions and the finite-field fingerprints take it as the constant 0, so
// pruning cannot tell a useful max from any other use of it, and every constant built on a
// max (its negation, a scalar added to it, ...) would pass as a subexpression and multiply
// the search. A max is useful only the way the target uses one, x - max(x): subtracted from
// the tensor it was taken of, which leaves x's expression unchanged and keeps exp(x - max x)
// in range. Where the max was computed in another graph (a kernel tensor read by a block,
// a block's stored max) "the tensor it was taken of" is not visible; there it may still only
// be subtracted.
#include <vector>

#include "cc/ir/graph.h"
#include "cc/search/search_state.h"

namespace mj {

// Whether op computes a max (its result is a stabilizer).
bool is_max_op(const Op& op);

// Whether op, if a reduce max, takes it over an index the target takes a max over: x -
// max(x) over another index does not cancel in the softmax's normalization, and the float
// check would reject it only after verification. `x` is op's input classes.
bool max_over_stabilized_index(const Op& op, const DimClasses& x,
                               const std::vector<int>& target_max_classes);

// Whether op reads every stabilizer (TensorFacts::stabilizer) as the subtrahend of
// sub(x, max(x)).
bool reads_stabilizers_only_to_subtract(const Graph& g, const Op& op,
                                        const std::vector<TensorFacts>& facts);

// Whether op is sub(x, m) with m a stabilizer: its abstract expression is x's, its value is
// not (recomputation.h).
bool subtracts_stabilizer(const Op& op, const std::vector<TensorFacts>& facts);

}  // namespace mj
