#pragma once
// Verified candidates of one search, deduplicated by canonical hash (cc/ir/hash.h) so each
// distinct μGraph is verified and ranked once however many branches build it. Safe to use
// from every search thread.
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "cc/ir/graph.h"

namespace mj::search {

struct RankedCandidate {
  std::shared_ptr<const ir::KernelGraph> graph;
  std::string hash;
  double cost = 0;
  double flops = 0;          // breaks ties of cost (result_set.cc)
  double cut_row_bytes = 0;  // orders the candidates tied with the best (result_set.cc)
};

class ResultSet {
 public:
  // True the first time a hash is seen: the caller then verifies it.
  bool claim(const std::string& hash);
  // `cost`: its estimated cost, when known, for best_cost().
  void accept(std::shared_ptr<const ir::KernelGraph> graph, std::string hash,
              double cost = std::numeric_limits<double>::infinity());
  // The least estimated cost of a candidate accepted so far (infinity before any): what a
  // running search has already found.
  double best_cost() const;
  // A claimed candidate kept for verification after the enumeration (max_verified).
  void hold(std::shared_ptr<const ir::KernelGraph> graph, std::string hash);
  size_t size() const;
  // The accepted graphs, costed and sorted by (cost, flops, hash), those tied with the best
  // (cost::kCostTie) least-cut first (cost::cut_row_bytes): the same order whatever the
  // thread count or the order they were found in.
  std::vector<RankedCandidate> ranked(
      const std::function<double(const ir::KernelGraph&)>& cost) const;
  // The held candidates, ordered like ranked(); the set forgets them.
  std::vector<RankedCandidate> take_held(const std::function<double(const ir::KernelGraph&)>& cost);

 private:
  mutable std::mutex mu_;
  std::unordered_set<std::string> seen_;
  std::vector<RankedCandidate> accepted_;
  std::vector<RankedCandidate> held_;
  double best_cost_ = std::numeric_limits<double>::infinity();
};

}  // namespace mj::search
