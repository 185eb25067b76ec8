#pragma once
// Candidate order for profiling: by estimated seconds, fastest first. Equal estimates are
// broken by the canonical graph hash (cc/ir/hash.h), and identical graphs by position, so
// the order is the same on every run and with any thread count upstream.
#include <vector>

#include "cc/cost/target.h"
#include "cc/ir/graph.h"

namespace mj::cost {

// Indices into `graphs`, best first. Throws std::invalid_argument for a null graph or an
// unusable target.
std::vector<int> rank_by_cost(const std::vector<const ir::KernelGraph*>& graphs, const Target& t);

}  // namespace mj::cost
