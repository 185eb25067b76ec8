// The search rediscovers the paper's RMSNorm + Linear μGraph unaided: one customized op whose
// for-loop accumulates the rms alongside the matmul and divides after the loop.
#include <gtest/gtest.h>

#include <cstdio>

#include "cc/ir/print.h"
#include "cc/search/search.h"
#include "cc/search/search_test_graphs.h"
#include "cc/verify/verify.h"

namespace mj::search {

using ir::BlockGraph;
using ir::KernelGraph;
using ir::Op;
using ir::OpKind;
using ir::Phase;
using ir::to_string;
using verify::verify_equivalent;
using verify::VerifyOptions;

namespace {

using search_test::count_ops;
using search_test::single_block_graph;

// The paper's structure: the matmul and the rms share one for-loop; the division by the
// rms happens in the epilogue, after both accumulations.
bool divides_after_shared_loop(const BlockGraph& bg) {
  if (bg.forloop_range() < 2 || count_ops(bg, OpKind::kMatmul) != 1) return false;
  bool rms = false, sum = false, div_in_epilogue = false;
  for (const Op& op : bg.ops()) {
    rms |= op.kind == OpKind::kAccumRmsLast || op.kind == OpKind::kAccumMeanLast;
    sum |= op.kind == OpKind::kAccumSum;
    if ((op.kind == OpKind::kDiv || op.kind == OpKind::kMul) &&
        bg.tensor(op.outputs[0]).phase == Phase::kEpilogue) {
      div_in_epilogue = true;
    }
  }
  return rms && sum && div_in_epilogue;
}

TEST(RmsNormLinearSearch, FindsTheFusedSingleKernelUnaided) {
  const KernelGraph target = testing::rmsnorm_linear_reference({8, 256, 64});
  const SearchResult r = search(target, search_test::small_config());
  std::printf("rmsnorm_linear [8,256]x[256,64]: %s; %zu candidates\n", r.stats.to_string().c_str(),
              r.candidates.size());
  EXPECT_EQ(r.reason, "");
  EXPECT_GT(r.stats.states_pruned, 0);
  EXPECT_GE(r.stats.candidates_accepted, 1);
  const KernelGraph* fused = search_test::first_single_kernel(r, divides_after_shared_loop);
  ASSERT_NE(fused, nullptr) << "no single-kernel candidate with a shared loop";
  std::printf("%s\n", to_string(*fused).c_str());
  // Independent evidence: a fresh verifier seed, and float64 agreement.
  VerifyOptions opts;
  opts.seed = 12345;
  EXPECT_TRUE(verify_equivalent(target, *fused, opts).equivalent);
  EXPECT_LT(search_test::float_mismatch(target, *fused), 1e-9);
}

TEST(RmsNormLinearSearch, EveryCandidateIsEquivalentAndTheTargetIsAmongThem) {
  const KernelGraph target = testing::rmsnorm_linear_reference({8, 64, 32});
  const SearchResult r = search(target, search_test::small_config());
  ASSERT_FALSE(r.candidates.empty());
  ASSERT_EQ(r.costs.size(), r.candidates.size());
  bool has_target = false;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    has_target |= single_block_graph(*r.candidates[i]) == nullptr &&
                  count_ops(*r.candidates[i], OpKind::kRmsNorm) == 1;
    EXPECT_LT(search_test::float_mismatch(target, *r.candidates[i]), 1e-9) << i;
    if (i > 0) {
      EXPECT_LE(r.costs[i - 1], r.costs[i]);
    }
  }
  EXPECT_TRUE(has_target);
}

// At the paper's shapes the cost model must prefer the fused kernel to the three library
// kernels (it reads W once either way, but X and the intermediates only once fused).
TEST(RmsNormLinearSearch, TheFusedKernelRanksFirstAtThePapersShapes) {
  const KernelGraph target = testing::rmsnorm_linear_reference({8, 4096, 6144});
  const SearchResult r = search(target, search_test::small_config());
  std::printf("rmsnorm_linear [8,4096]x[4096,6144]: %s\n", r.stats.to_string().c_str());
  ASSERT_FALSE(r.candidates.empty());
  const BlockGraph* best = single_block_graph(*r.candidates.front());
  ASSERT_NE(best, nullptr) << to_string(*r.candidates.front());
  EXPECT_TRUE(divides_after_shared_loop(*best)) << to_string(*r.candidates.front());
}

}  // namespace
}  // namespace mj::search
