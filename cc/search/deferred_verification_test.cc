// max_verified: complete candidates are ranked before they are verified, and only the best
// are verified. The result must be what verifying everything would give, cut to the best N:
// every candidate returned is verified, and none better than the last one is missing.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cc/ir/hash.h"
#include "cc/search/search.h"
#include "cc/search/search_test_graphs.h"
#include "cc/verify/verify.h"

namespace mj::search {

using ir::graph_hash;
using ir::KernelGraph;
using verify::verify_equivalent;
using verify::VerifyOptions;

namespace {

SearchConfig config() {
  SearchConfig c = search_test::small_config();
  c.max_block_ops = 4;
  return c;
}

TEST(DeferredVerification, TheBestNAreThoseOfTheFullSearch) {
  const KernelGraph target = search_test::gated_mlp(4, 32, 16);
  const SearchResult all = search(target, config());
  ASSERT_EQ(all.reason, "");
  ASSERT_GT(all.candidates.size(), 5u);
  SearchConfig c = config();
  c.max_verified = 3;
  const SearchResult best = search(target, c);
  ASSERT_EQ(best.reason, "");
  EXPECT_EQ(best.stats.candidates_accepted, 3);
  EXPECT_EQ(best.stats.candidates_verified, 3);  // all of them equivalent here
  EXPECT_EQ(best.stats.candidates_unverified,
            int64_t(all.candidates.size()) - 1 - 3);  // the target is not searched for
  // The 3 verified ones and the target, in the full search's order.
  std::vector<std::string> want;
  const std::string reference = graph_hash(target);
  int kept = 0;
  for (const std::string& h : search_test::hashes_in_order(all)) {
    if (h == reference || kept < 3) want.push_back(h);
    if (h != reference) ++kept;
  }
  EXPECT_EQ(search_test::hashes_in_order(best), want);
}

TEST(DeferredVerification, ReturnedCandidatesAreEquivalentAndTheOrderIgnoresThreads) {
  const KernelGraph target = testing::rmsnorm_linear_reference({8, 64, 32});
  SearchConfig c = config();
  c.max_verified = 4;
  c.threads = 1;
  const SearchResult one = search(target, c);
  c.threads = 2;
  const SearchResult two = search(target, c);
  ASSERT_EQ(one.reason, "");
  EXPECT_EQ(search_test::hashes_in_order(one), search_test::hashes_in_order(two));
  EXPECT_EQ(one.stats.candidates_accepted, 4);
  for (const auto& g : one.candidates) {
    EXPECT_TRUE(verify_equivalent(target, *g, VerifyOptions{}).equivalent);
  }
}

TEST(DeferredVerification, ASpentBudgetStillVerifiesTheBestFound) {
  const KernelGraph target = search_test::gated_mlp(4, 32, 16);
  SearchConfig c = config();
  c.max_block_ops = 6;  // far more than 20 ms can enumerate
  c.time_budget_s = 0.5;
  c.max_verified = 2;
  const SearchResult r = search(target, c);
  std::printf("%s\n", r.stats.to_string().c_str());
  ASSERT_EQ(r.reason, "time budget spent");
  ASSERT_GT(r.stats.candidates_unverified, 0) << "found nothing within the budget";
  EXPECT_EQ(r.stats.candidates_accepted, 2);
  EXPECT_EQ(r.candidates.size(), 3u);  // and the target
}

TEST(DeferredVerification, ANegativeLimitIsRefused) {
  SearchConfig c = config();
  c.max_verified = -1;
  const SearchResult r = search(search_test::gated_mlp(4, 32, 16), c);
  EXPECT_TRUE(r.candidates.empty());
  EXPECT_NE(r.reason.find("search limits"), std::string::npos) << r.reason;
}

}  // namespace
}  // namespace mj::search
