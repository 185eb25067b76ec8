#include "cc/search/candidates.h"

#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cc/ir/hash.h"
#include "cc/verify/verify.h"

namespace mj::search {

using ir::graph_hash;
using ir::KernelGraph;
using ir::OpKind;
using verify::verify_equivalent;
using verify::VerifyOptions;
using verify::VerifyResult;

namespace {

bool is_kernel_input(const KernelGraph& g, int t) {
  return g.ops()[g.tensor(t).producer].kind == OpKind::kInput;
}

void verify_and_keep(KernelGraph candidate, SearchShared& shared) {
  std::string hash = graph_hash(candidate);
  if (!shared.results.claim(hash)) return;
  if (shared.config.max_verified > 0) {
    shared.results.hold(std::make_shared<const KernelGraph>(std::move(candidate)), std::move(hash));
    return;
  }
  verify_candidate(std::make_shared<const KernelGraph>(std::move(candidate)), std::move(hash),
                   shared);
}

}  // namespace

bool verify_candidate(std::shared_ptr<const KernelGraph> candidate, std::string hash,
                      SearchShared& shared) {
  const auto start = std::chrono::steady_clock::now();
  VerifyOptions opts;
  opts.seed = shared.config.seed;
  const VerifyResult r = verify_equivalent(shared.target, *candidate, opts);
  shared.verify_ns.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count(),
      std::memory_order_relaxed);
  shared.verified.fetch_add(1, std::memory_order_relaxed);
  if (!r.equivalent) return false;
  shared.accepted.fetch_add(1, std::memory_order_relaxed);
  const double cost =
      shared.cost ? shared.cost(*candidate) : std::numeric_limits<double>::infinity();
  shared.results.accept(std::move(candidate), std::move(hash), cost);
  return true;
}

namespace {

// Tries every assignment of the dangling tensors to the target's outputs.
void assign_outputs(const KernelState& s, const std::vector<int>& dangling, std::vector<int>& order,
                    std::vector<bool>& used, SearchShared& shared, Worker& worker) {
  const size_t i = order.size();
  if (i == dangling.size()) {
    KernelGraph candidate = s.graph;
    for (int t : order) candidate.mark_output(t);
    verify_and_keep(std::move(candidate), shared);
    return;
  }
  const int target_out = shared.target.output_ids()[i];
  for (size_t k = 0; k < dangling.size(); ++k) {
    const int t = dangling[k];
    if (used[k] || s.graph.tensor(t).shape != shared.target.tensor(target_out).shape) continue;
    if (!worker.pruner.matches_output(s.facts[t].expr, int(i))) continue;
    used[k] = true;
    order.push_back(t);
    assign_outputs(s, dangling, order, used, shared, worker);
    order.pop_back();
    used[k] = false;
  }
}

}  // namespace

void check_candidate(const KernelState& s, SearchShared& shared, Worker& worker) {
  std::vector<int> dangling;
  for (int t = 0; t < int(s.graph.tensors().size()); ++t) {
    if (s.facts[t].consumers == 0 && !is_kernel_input(s.graph, t)) dangling.push_back(t);
  }
  if (dangling.empty() || dangling.size() != shared.target.output_ids().size()) return;
  std::vector<int> order;
  std::vector<bool> used(dangling.size(), false);
  assign_outputs(s, dangling, order, used, shared, worker);
}

}  // namespace mj::search
