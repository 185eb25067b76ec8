// The search never returns, ranks or verifies an unstabilized softmax (docs/ir-semantics.md,
// "Numerical safety"): on a softmax and on an attention program every candidate takes exp
// only of x - max(x) (or inside the online-softmax accumulators), the fused forms are still
// found, and with deferred verification no held candidate is one the verifier then rejects
// as less safe.
#include <gtest/gtest.h>

#include <cstdio>

#include "cc/ir/print.h"
#include "cc/search/search.h"
#include "cc/search/search_test_graphs.h"
#include "cc/verify/float_safety.h"

namespace mj::search {

using ir::BlockGraph;
using ir::DType;
using ir::KernelGraph;
using ir::OpKind;
using ir::ReduceKind;
using ir::to_string;
using verify::has_unbounded_exp;

namespace {

using search_test::count_ops;
using search_test::single_block_graph;

KernelGraph softmax(int64_t rows, int64_t cols) {
  KernelGraph g;
  const int x = g.new_input({rows, cols}, DType::kF32);
  const int e = g.unary(OpKind::kExp, g.binary(OpKind::kSub, x, g.reduce(x, 1, ReduceKind::kMax)));
  g.mark_output(g.binary(OpKind::kDiv, e, g.reduce(e, 1, ReduceKind::kSum)));
  return g;
}

void expect_every_candidate_stabilized(const SearchResult& r) {
  for (const auto& c : r.candidates) {
    EXPECT_FALSE(has_unbounded_exp(*c)) << "an unstabilized candidate:\n" << to_string(*c);
  }
}

TEST(SafetySearch, ASoftmaxFusesOnlyWithItsMax) {
  const KernelGraph target = softmax(8, 64);
  ASSERT_FALSE(has_unbounded_exp(target));
  SearchConfig c = search_test::small_config();
  c.max_block_ops = 5;  // max, sub, exp, sum, div
  const SearchResult r = search(target, c);
  std::printf("%s; %zu candidates\n", r.stats.to_string().c_str(), r.candidates.size());
  ASSERT_EQ(r.reason, "");
  expect_every_candidate_stabilized(r);
  int fused = 0;
  for (const auto& cand : r.candidates) {
    const BlockGraph* bg = single_block_graph(*cand);
    fused += bg && count_ops(*bg, OpKind::kExp) == 1 && count_ops(*bg, OpKind::kSub) == 1;
  }
  EXPECT_GT(fused, 0) << "the one-kernel max-subtracted softmax is not among the candidates";
}

TEST(SafetySearch, HeldCandidatesAreNeverUnstabilized) {
  // With deferred verification every complete candidate is ranked before it is verified: an
  // unstabilized form (cheaper: no max) would be ranked first and then rejected.
  const KernelGraph target = softmax(8, 64);
  SearchConfig c = search_test::small_config();
  c.max_block_ops = 5;
  c.max_verified = 4;
  const SearchResult r = search(target, c);
  ASSERT_EQ(r.reason, "");
  std::printf("%s\n", r.stats.to_string().c_str());
  EXPECT_GT(r.stats.candidates_accepted, 0);
  EXPECT_EQ(r.stats.candidates_verified, r.stats.candidates_accepted);
  expect_every_candidate_stabilized(r);
}

TEST(SafetySearch, AttentionFindsTheOnlineSoftmaxAndNoPlainExp) {
  const KernelGraph target = search_test::attention(16, 8, 32);
  SearchConfig c = search_test::small_config();
  c.preset = "attention";
  c.max_block_ops = 4;
  c.max_grids = 1;
  const SearchResult r = search(target, c);
  std::printf("%s; %zu candidates\n", r.stats.to_string().c_str(), r.candidates.size());
  ASSERT_EQ(r.reason, "");
  expect_every_candidate_stabilized(r);
  bool online = false;
  for (const auto& cand : r.candidates) {
    const BlockGraph* bg = single_block_graph(*cand);
    online |= bg && count_ops(*bg, OpKind::kAccumExpMatmul) == 1;
  }
  EXPECT_TRUE(online);
}

TEST(SafetySearch, APlainExpTargetStillFusesItsExp) {
  // exp(X @ W) has no max to keep: the exp of the matmul may move into the kernel.
  const KernelGraph target = search_test::exp_matmul(8, 64, 32);
  ASSERT_TRUE(has_unbounded_exp(target));
  SearchConfig c = search_test::small_config();
  c.max_block_ops = 3;
  const SearchResult r = search(target, c);
  ASSERT_EQ(r.reason, "");
  int fused = 0;
  for (const auto& cand : r.candidates) {
    const BlockGraph* bg = single_block_graph(*cand);
    fused += bg && count_ops(*bg, OpKind::kExp) == 1;
  }
  EXPECT_GT(fused, 0);
}

}  // namespace
}  // namespace mj::search
