#pragma once
// Candidate order for profiling: by estimated seconds, fastest first. Equal estimates are
// broken by the canonical graph hash (cc/ir/hash.h), and identical graphs by position, so
// the order is the same on every run and with any thread count upstream.
#include <vector>

#include "cc/cost/target.h"
#include "cc/ir/graph.h"

namespace mj::cost {

// Estimates within this fraction of the best's are a tie: the model's errors on the kernels it
// does rank apart are tens of percent, and memory-bound candidates that stream the same bytes
// come out within a percent of each other by the dozen.
constexpr double kCostTie = 0.02;

// How many leading entries of `costs` (ascending) are within kCostTie of the first; none when
// the first is not finite (a candidate the model cannot price ties with nothing).
size_t tied_with_best(const std::vector<double>& costs);

// Indices into `graphs`, best first. Throws std::invalid_argument for a null graph or an
// unusable target.
std::vector<int> rank_by_cost(const std::vector<const ir::KernelGraph*>& graphs, const Target& t);

}  // namespace mj::cost
