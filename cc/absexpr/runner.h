#pragma once
// Equality saturation: apply every rewrite to every match, rebuild, repeat until nothing
// changes or a limit is hit. Associativity, commutativity and distributivity can grow an
// e-graph exponentially, so the limits are part of the contract: the result is always a
// clean (rebuilt) e-graph, complete or not, and the report says which. Each iteration
// re-matches only near classes that changed since the previous one (semi-naive matching).
#include <cstddef>
#include <string>
#include <vector>

#include "cc/absexpr/egraph.h"
#include "cc/absexpr/rewrite.h"

namespace mj::absexpr {

struct SaturationLimits {
  size_t max_nodes = 50000;  // stop once the e-graph holds more nodes than this
  double max_seconds = 2.0;  // wall-clock budget, checked between rules and every few matches
  int max_iterations = 64;
  // egg's backoff scheduling: a rule with more matches than this in one iteration is skipped
  // and banned for ban_iterations (both doubling on each ban), so that the associativity and
  // commutativity rules cannot starve the rest. 0 disables it.
  size_t rule_match_limit = 2000;
  int ban_iterations = 2;
};

enum class StopReason { kSaturated, kNodeLimit, kTimeLimit, kIterationLimit };
const char* stop_reason_name(StopReason r);

struct SaturationReport {
  StopReason stop = StopReason::kSaturated;
  int iterations = 0;
  size_t nodes = 0;
  size_t classes = 0;
  double seconds = 0.0;
  std::vector<size_t> applied;  // per rule: matches that changed the graph

  bool saturated() const { return stop == StopReason::kSaturated; }
  std::string to_string() const;  // one line: stop reason, iterations, sizes, time
};

SaturationReport saturate(EGraph& g, const std::vector<Rewrite>& rules,
                          const SaturationLimits& limits = {});

}  // namespace mj::absexpr
