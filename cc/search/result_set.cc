#include "cc/search/result_set.h"

#include <algorithm>
#include <tuple>

namespace mj {

bool ResultSet::claim(const std::string& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_.insert(hash).second;
}

void ResultSet::accept(std::shared_ptr<const KernelGraph> graph, std::string hash) {
  std::lock_guard<std::mutex> lock(mu_);
  accepted_.push_back(RankedCandidate{std::move(graph), std::move(hash), 0.0});
}

size_t ResultSet::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_.size();
}

std::vector<RankedCandidate> ResultSet::ranked(
    const std::function<double(const KernelGraph&)>& cost) const {
  std::vector<RankedCandidate> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = accepted_;
  }
  for (RankedCandidate& c : out) c.cost = cost(*c.graph);
  std::sort(out.begin(), out.end(), [](const RankedCandidate& a, const RankedCandidate& b) {
    return std::tie(a.cost, a.hash) < std::tie(b.cost, b.hash);
  });
  return out;
}

}  // namespace mj
