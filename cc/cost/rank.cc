#include "cc/cost/rank.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <tuple>

#include "cc/cost/estimate.h"
#include "cc/ir/hash.h"

namespace mj::cost {

using ir::graph_hash;
using ir::KernelGraph;

std::vector<int> rank_by_cost(const std::vector<const KernelGraph*>& graphs, const Target& t) {
  check_target(t);
  std::vector<double> seconds(graphs.size());
  std::vector<std::string> hashes(graphs.size());
  for (size_t i = 0; i < graphs.size(); ++i) {
    if (!graphs[i]) {
      throw std::invalid_argument("rank_by_cost: graph " + std::to_string(i) + " is null");
    }
    seconds[i] = estimate(*graphs[i], t).seconds;
    hashes[i] = graph_hash(*graphs[i]);
  }
  std::vector<int> order(graphs.size());
  std::iota(order.begin(), order.end(), 0);
  // A total order (seconds are never NaN: every divisor is checked positive), so plain sort
  // is as deterministic as a stable one.
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return std::tie(seconds[a], hashes[a], a) < std::tie(seconds[b], hashes[b], b);
  });
  return order;
}

size_t tied_with_best(const std::vector<double>& costs) {
  if (costs.empty() || !std::isfinite(costs.front())) return 0;
  const double bar = costs.front() * (1 + kCostTie);
  size_t tied = 0;
  while (tied < costs.size() && costs[tied] <= bar) ++tied;
  return tied;
}

}  // namespace mj::cost
