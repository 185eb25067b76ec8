#pragma once
// A tensor equal to one the graph already has recomputes it: the same abstract expression
// modulo the axioms (Pruner::same_value) and the same index classes mean the same value at
// every index. Any program using the copy could use the original, so the search does not
// build the copy (the graph without it is enumerated too). One op is the exception:
// x - max(x) has x's expression because the max is a stabilizer taken as 0
// (stabilizers.h), yet its value differs; callers do not ask about it.
// Only meaningful with pruning on (otherwise there are no expressions).
#include <vector>

#include "cc/search/pruner.h"
#include "cc/search/search_state.h"

namespace mj::search {

// Whether the rule applies: under the "attention" preset, whose multi-kernel space needs it
// (it halves the split-KV search); the other presets keep the spaces their tests and
// benchmarks were measured with.
bool dedupes_values(const SearchConfig& config);

// Whether a new tensor with this expression and these classes equals one of `facts`.
bool recomputes_existing(const std::vector<TensorFacts>& facts, absexpr::ExprId expr,
                         const DimClasses& classes, Pruner& pruner);

}  // namespace mj::search
