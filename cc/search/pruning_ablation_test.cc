// Abstract-expression pruning (cc/search/pruner.h) is what keeps the search small: the same search
// without it explores far more states and verifies far more candidates, and finds the same
// μGraphs (pruning only removes graphs that cannot be equivalent).
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>

#include "cc/ir/hash.h"
#include "cc/search/search.h"
#include "cc/search/search_test_graphs.h"

namespace mj::search {

using ir::graph_hash;
using ir::KernelGraph;

namespace {

std::set<std::string> hashes(const SearchResult& r) {
  std::set<std::string> s;
  for (const auto& c : r.candidates) s.insert(graph_hash(*c));
  return s;
}

TEST(PruningAblation, WithoutPruningTheSameSearchExploresManyMoreStates) {
  // exp(X @ W): the fused form needs a matmul, an accumulator and exp (3 block ops), small
  // enough for the unpruned search to finish. Small dims keep its verification cheap: at
  // 8x64x32 it took 91 s of CPU and ran out of its wall budget on a loaded machine.
  const KernelGraph target = search_test::exp_matmul(8, 16, 16);
  SearchConfig c = search_test::small_config();
  c.max_block_ops = 3;
  c.max_grids = 1;
  const SearchResult pruned = search(target, c);
  c.pruning = false;
  const SearchResult full = search(target, c);
  std::printf("pruning on:  %s\npruning off: %s\n", pruned.stats.to_string().c_str(),
              full.stats.to_string().c_str());
  ASSERT_EQ(pruned.reason, "");
  ASSERT_EQ(full.reason, "");
  EXPECT_GT(full.stats.states_explored, 100 * pruned.stats.states_explored);
  EXPECT_GT(full.stats.candidates_verified, 10 * pruned.stats.candidates_verified);
  EXPECT_EQ(full.stats.states_pruned, 0);
  EXPECT_GE(pruned.stats.candidates_accepted, 1);
  EXPECT_EQ(hashes(pruned), hashes(full));
}

}  // namespace
}  // namespace mj::search
