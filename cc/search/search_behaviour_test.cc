// The search's contract beyond finding graphs: bad input gives a reason and no crash, the
// time budget and the caller's stop are honoured with what was found so far, progress is
// reported, and the result order does not depend on the thread count.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "cc/ir/hash.h"
#include "cc/search/search.h"
#include "cc/search/search_test_graphs.h"

namespace mj::search {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::graph_hash;
using ir::KernelGraph;
using ir::OpKind;

namespace {

TEST(SearchBehaviour, ATargetWithACustomizedOpIsRefusedWithAReason) {
  KernelGraph target;
  const int x = target.new_input({4, 8}, DType::kF32);
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 1);
  const int t = bg->new_input({4, 8}, DType::kF32, {0, -1, -1}, -1);
  bg->new_output(bg->unary(OpKind::kExp, t), {0, -1, -1}, DType::kF32);
  target.mark_output(target.customized({x}, bg)[0]);
  const SearchResult r = search(target, search_test::small_config());
  EXPECT_TRUE(r.candidates.empty());
  EXPECT_NE(r.reason.find("customized"), std::string::npos) << r.reason;
}

TEST(SearchBehaviour, ATargetWithoutOutputsIsRefusedWithAReason) {
  KernelGraph target;
  target.new_input({4, 8}, DType::kF32);
  const SearchResult r = search(target, search_test::small_config());
  EXPECT_TRUE(r.candidates.empty());
  EXPECT_NE(r.reason.find("no outputs"), std::string::npos) << r.reason;
}

TEST(SearchBehaviour, ABadConfigIsRefusedWithAReason) {
  const KernelGraph target = search_test::exp_matmul(4, 8, 4);
  SearchConfig c = search_test::small_config();
  c.preset = "conv";
  EXPECT_NE(search(target, c).reason.find("unknown preset"), std::string::npos);
  c = search_test::small_config();
  c.max_block_inputs = 100;
  EXPECT_NE(search(target, c).reason.find("max_block_inputs"), std::string::npos);
  c = search_test::small_config();
  c.target.dram_bandwidth = 0;
  const SearchResult r = search(target, c);
  EXPECT_TRUE(r.candidates.empty());
  EXPECT_NE(r.reason.find("bad target"), std::string::npos) << r.reason;
}

TEST(SearchBehaviour, PrimeSizedDimsGiveOnlyEquivalentCandidatesAndTheTarget) {
  // Every size prime: each index splits only into all of its elements, the loop only into
  // k = 11 steps of one. Nothing hangs, and whatever comes back is right.
  const KernelGraph target = search_test::exp_matmul(7, 11, 13);
  SearchConfig c = search_test::small_config();
  c.max_block_ops = 3;
  const SearchResult r = search(target, c);
  EXPECT_EQ(r.reason, "");
  bool has_target = false;
  for (const auto& cand : r.candidates) {
    has_target |= graph_hash(*cand) == graph_hash(target);
    EXPECT_LT(search_test::float_mismatch(target, *cand), 1e-9);
  }
  EXPECT_TRUE(has_target);
}

TEST(SearchBehaviour, ASpentTimeBudgetReturnsWhatWasFoundWithTheReason) {
  const KernelGraph target = testing::rmsnorm_linear_reference({8, 256, 64});
  SearchConfig c = search_test::small_config();
  c.max_kernel_ops = 3;
  c.max_block_ops = 8;  // far too large to finish in the budget
  c.time_budget_s = 1.0;
  const auto start = std::chrono::steady_clock::now();
  const SearchResult r = search(target, c);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.reason, "time budget spent");
  EXPECT_LT(seconds, 10.0);            // the budget, plus saturation cut to a quarter and ranking
  ASSERT_FALSE(r.candidates.empty());  // at least the target itself
}

TEST(SearchBehaviour, TheProgressCallbackIsCalledAndCanStopTheSearch) {
  const KernelGraph target = testing::rmsnorm_linear_reference({8, 256, 64});
  SearchConfig c = search_test::small_config();
  c.max_kernel_ops = 3;
  c.max_block_ops = 8;
  std::atomic<int> calls{0};
  const SearchResult r = search(target, c, [&](const SearchProgress& p) {
    EXPECT_LE(p.tasks_done, p.tasks_total);
    return ++calls < 3;
  });
  EXPECT_GE(calls.load(), 3);
  EXPECT_EQ(r.reason, "stopped");
  EXPECT_FALSE(r.candidates.empty());
}

TEST(SearchBehaviour, TheResultOrderIsTheSameWithOneThreadOrTwo) {
  const KernelGraph target = search_test::gated_mlp(4, 32, 16);
  SearchConfig c = search_test::small_config();
  c.max_block_ops = 4;
  c.threads = 1;
  const SearchResult one = search(target, c);
  c.threads = 2;
  const SearchResult two = search(target, c);
  ASSERT_EQ(one.reason, "");
  ASSERT_EQ(two.reason, "");
  EXPECT_GT(one.candidates.size(), 1u);
  EXPECT_EQ(search_test::hashes_in_order(one), search_test::hashes_in_order(two));
  EXPECT_EQ(one.costs, two.costs);
  EXPECT_EQ(one.stats.states_explored, two.stats.states_explored);
}

}  // namespace
}  // namespace mj::search
