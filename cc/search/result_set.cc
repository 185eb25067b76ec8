#include "cc/search/result_set.h"

#include <algorithm>
#include <tuple>

#include "cc/cost/kernel_graph_work.h"

namespace mj::search {

using ir::KernelGraph;

bool ResultSet::claim(const std::string& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_.insert(hash).second;
}

void ResultSet::accept(std::shared_ptr<const KernelGraph> graph, std::string hash) {
  std::lock_guard<std::mutex> lock(mu_);
  accepted_.push_back(RankedCandidate{std::move(graph), std::move(hash), 0.0});
}

void ResultSet::hold(std::shared_ptr<const KernelGraph> graph, std::string hash) {
  std::lock_guard<std::mutex> lock(mu_);
  held_.push_back(RankedCandidate{std::move(graph), std::move(hash), 0.0});
}

size_t ResultSet::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_.size();
}

namespace {

double total_flops(const KernelGraph& g) {
  double flops = 0;
  for (const cost::KernelWork& w : cost::kernel_graph_work(g)) flops += w.flops;
  return flops;
}

// Equal costs (a memory-bound kernel hides its arithmetic) go to the fewer flops: the same
// product scaled once after the loop rather than each partial inside it, which is also the
// order the program computes it in.
void sort_by_cost(std::vector<RankedCandidate>& out,
                  const std::function<double(const KernelGraph&)>& cost) {
  std::vector<double> flops(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].cost = cost(*out[i].graph);
    flops[i] = total_flops(*out[i].graph);
  }
  std::vector<size_t> order(out.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(out[a].cost, flops[a], out[a].hash) <
           std::tie(out[b].cost, flops[b], out[b].hash);
  });
  std::vector<RankedCandidate> sorted;
  sorted.reserve(out.size());
  for (size_t i : order) sorted.push_back(std::move(out[i]));
  out = std::move(sorted);
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
