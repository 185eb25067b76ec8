#pragma once
// Running a block graph's for-loop `factor` steps at a time: the same graph over
// forloop_range / factor iterations, each of whose loop-moving tiles is `factor` of the
// original's side by side. A code generator uses it where its products need more rows of k
// per call than a candidate's step gives (a 4-row step reads and writes its accumulator twice
// as often as an 8-row one for the same work), so the candidates that differ only in how
// finely the loop cuts k generate the same kernel, as the cost model already prices them.
//
// It computes what the graph computes when every value the loop carries is a sum over the
// iterations that does not care how they are grouped: in the body, tiles that move with the
// loop and elementwise ops on them (values that are the concatenation of the steps' values
// along one dim), products whose contraction is that dim on both operands (partial sums),
// which only accum_sum reads, and the row reductions accum_sum_last, accum_mean_last and
// accum_rms_last of values concatenated along their last dim (their counts are forloop_range
// times the tile's dim, which the coarsening keeps). Anything else in the body (softmax
// accumulators, reductions, a product along another dim, an invariant operand that does not
// broadcast along the steps' dim, a step broadcast against a longer step) and the graph is
// left as it is, as it is where the builders refuse the rebuilt graph. Sums regrouped round
// differently in float, as a different k step does.
#include <optional>

#include "cc/ir/graph.h"

namespace mj::ir {

// Whether coarsen_loop(bg, factor) is defined for some factor > 1: the body's values are all
// of the kinds above.
bool loop_coarsens(const BlockGraph& bg);

// bg with its loop run `factor` steps at a time; nullopt when factor does not divide
// forloop_range, factor < 2, or !loop_coarsens(bg).
std::optional<BlockGraph> coarsen_loop(const BlockGraph& bg, int factor);

}  // namespace mj::ir
