#include "cc/search/result_set.h"

#include <algorithm>
#include <tuple>

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

void sort_by_cost(std::vector<RankedCandidate>& out,
                  const std::function<double(const KernelGraph&)>& cost) {
  for (RankedCandidate& c : out) c.cost = cost(*c.graph);
  std::sort(out.begin(), out.end(), [](const RankedCandidate& a, const RankedCandidate& b) {
    return std::tie(a.cost, a.hash) < std::tie(b.cost, b.hash);
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
