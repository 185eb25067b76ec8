#pragma once
// Which block ops can be part of an equivalent graph, beyond what the IR builders accept and
// what the abstract expressions say: rules about phases and about the indices the grid and
// the for-loop split (index_classes.h, partitions.h). Each rule rejects only ops whose every
// use would compute something no equivalent program computes.
#include <optional>

#include "cc/ir/graph.h"
#include "cc/search/index_classes.h"
#include "cc/search/partitions.h"

namespace mj::search {

// The phase the op's result would get, or nullopt when it mixes the body and the epilogue
// (or accumulates something that is not in the body).
std::optional<ir::Phase> result_phase(const ir::BlockGraph& g, const ir::Op& op);

// Whether an accumulator sums over the loop only what the loop index has left: summing
// tiles of different positions of the loop index elementwise (accum_sum of a tile that still
// has a dim of that index) combines unrelated elements, which no equivalent program does.
// The *_last accumulators (and accum_exp_matmul, which contracts s's last dim) also reduce
// the last dim, so the loop index may be there. `x` is the (first) input's classes.
bool accumulates_loop_index_only(const ir::Op& op, const DimClasses& x, int loop_class);

// Whether op reduces a dim of an index the grid splits: each block would hold a partial
// result that only another kernel can combine, so it is allowed only where partial results
// are (preset_splits_reductions).
bool reduces_split_index(const ir::Op& op, const DimClasses& x, const BlockLayout& layout);

// Whether op is an online-softmax accumulator over an index the grid splits. Each block's
// partial would then be scaled by exp(-its own running max), which the plain sums of a
// combine kernel cannot undo; the finite-field check takes every max as 0 and would accept
// it, so the rule is the only guard before the float check. Split-KV partials use a plain
// exp instead, as in the paper.
bool rescales_by_block_max(const ir::Op& op, const DimClasses& x, const BlockLayout& layout);

}  // namespace mj::search
