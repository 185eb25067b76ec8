#include "cc/search/result_set.h"

#include <algorithm>
#include <tuple>

#include "cc/cost/kernel_graph_work.h"
#include "cc/cost/rank.h"

namespace mj::search {

using ir::KernelGraph;

bool ResultSet::claim(const std::string& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_.insert(hash).second;
}

void ResultSet::accept(std::shared_ptr<const KernelGraph> graph, std::string hash, double cost) {
  std::lock_guard<std::mutex> lock(mu_);
  accepted_.push_back(RankedCandidate{std::move(graph), std::move(hash)});
  best_cost_ = std::min(best_cost_, cost);
}

double ResultSet::best_cost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return best_cost_;
}

void ResultSet::hold(std::shared_ptr<const KernelGraph> graph, std::string hash) {
  std::lock_guard<std::mutex> lock(mu_);
  held_.push_back(RankedCandidate{std::move(graph), std::move(hash)});
}

size_t ResultSet::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_.size();
}

namespace {

// Equal costs (a memory-bound kernel hides its arithmetic) go to the fewer flops: the same
// product scaled once after the loop rather than each partial inside it, which is also the
// order the program computes it in. Then the candidates tied with the best (cost::kCostTie)
// are ordered by how much they read a piece of each row per loop step, least first
// (KernelWork::cut_row_bytes): max_verified verifies the best few of the held candidates
// only, and the model ties a GEMV's whole-row form with a dozen that cut the rows.
void sort_by_cost(std::vector<RankedCandidate>& out,
                  const std::function<double(const KernelGraph&)>& cost) {
  std::vector<double> costs;
  for (RankedCandidate& c : out) {
    c.cost = cost(*c.graph);
    c.flops = 0;
    c.cut_row_bytes = 0;
    for (const cost::KernelWork& w : cost::kernel_graph_work(*c.graph)) {
      c.flops += w.flops;
      c.cut_row_bytes += w.cut_row_bytes;
    }
  }
  std::sort(out.begin(), out.end(), [](const RankedCandidate& a, const RankedCandidate& b) {
    return std::tie(a.cost, a.flops, a.hash) < std::tie(b.cost, b.flops, b.hash);
  });
  for (const RankedCandidate& c : out) costs.push_back(c.cost);
  const auto tied = std::ptrdiff_t(cost::tied_with_best(costs));
  std::stable_sort(out.begin(), out.begin() + tied,
                   [](const RankedCandidate& a, const RankedCandidate& b) {
                     return a.cut_row_bytes < b.cut_row_bytes;
                   });
}

}  // namespace

std::vector<RankedCandidate> ResultSet::ranked(
    const std::function<double(const KernelGraph&)>& cost) const {
  std::vector<RankedCandidate> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = accepted_;
  }
  sort_by_cost(out, cost);
  return out;
}

std::vector<RankedCandidate> ResultSet::take_held(
    const std::function<double(const KernelGraph&)>& cost) {
  std::vector<RankedCandidate> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.swap(held_);
  }
  sort_by_cost(out, cost);
  return out;
}

}  // namespace mj::search
