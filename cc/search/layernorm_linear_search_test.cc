// The search finds LayerNorm + Linear as one kernel whose for-loop walks k: X read whole
// before the loop for its mean, and tile by tile in the loop, centered by that mean; the
// matmul and the mean square of the centered tiles accumulate together, and the division
// comes after the loop (cc/testing/layernorm_linear.h). Without a block input read whole
// beside its tiles (BlockInputSpec::whole) no such kernel exists within these limits.
#include <gtest/gtest.h>

#include <cstdio>

#include "cc/ir/print.h"
#include "cc/search/search.h"
#include "cc/search/search_test_graphs.h"
#include "cc/testing/layernorm_linear.h"
#include "cc/verify/verify.h"

namespace mj::search {

using ir::BlockGraph;
using ir::KernelGraph;
using ir::Op;
using ir::OpKind;
using ir::Phase;
using ir::to_string;

namespace {

using search_test::count_ops;
using search_test::single_block_graph;

// One loop shared by the matmul and the variance; the mean known before it, the division
// after it.
bool normalizes_around_shared_loop(const BlockGraph& bg) {
  if (bg.forloop_range() < 2 || count_ops(bg, OpKind::kMatmul) != 1) return false;
  bool mean_before = false, rms = false, sum = false, div_after = false;
  for (const Op& op : bg.ops()) {
    const Phase phase = op.outputs.empty() ? Phase::kInvariant : bg.tensor(op.outputs[0]).phase;
    mean_before |= op.kind == OpKind::kReduce && phase == Phase::kInvariant;
    rms |= op.kind == OpKind::kAccumRmsLast;
    sum |= op.kind == OpKind::kAccumSum;
    div_after |= op.kind == OpKind::kDiv && phase == Phase::kEpilogue;
  }
  return mean_before && rms && sum && div_after;
}

// The limits of the fused form (one kernel op, six block ops, X twice and W), narrowed so
// that the search runs to its end in seconds on two shared cores.
SearchConfig layernorm_config() {
  SearchConfig c = search_test::small_config();
  c.max_block_ops = 6;
  c.max_block_inputs = 3;
  c.max_grids = 1;
  c.max_forloop_ranges = 1;
  return c;
}

TEST(LayerNormLinearSearch, FindsTheSingleKernelWithTheNormalizationAroundTheLoop) {
  const KernelGraph target = testing::layernorm_linear_reference({4, 512, 32});
  const SearchResult r = search(target, layernorm_config());
  std::printf("layernorm_linear [4,512]x[512,32]: %s; %zu candidates\n",
              r.stats.to_string().c_str(), r.candidates.size());
  EXPECT_EQ(r.reason, "");
  const KernelGraph* fused = search_test::first_single_kernel(r, normalizes_around_shared_loop);
  ASSERT_NE(fused, nullptr) << "no single-kernel candidate normalizing around its loop";
  std::printf("%s\n", to_string(*fused).c_str());
  verify::VerifyOptions opts;
  opts.seed = 12345;
  EXPECT_TRUE(verify::verify_equivalent(target, *fused, opts).equivalent);
  EXPECT_LT(search_test::float_mismatch(target, *fused), 1e-9);
}

}  // namespace
}  // namespace mj::search
