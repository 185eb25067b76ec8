// Under the "attention" preset the search finds a FlashAttention-like single kernel unaided:
// the for-loop walks the keys, and the online-softmax accumulators collect exp(S)·V and the
// row sums of exp(S), divided after the loop.
#include <gtest/gtest.h>

#include <cstdio>

#include "cc/ir/print.h"
#include "cc/search/search.h"
#include "cc/search/search_test_graphs.h"

namespace mj::search {

using ir::BlockGraph;
using ir::KernelGraph;
using ir::OpKind;
using ir::to_string;

namespace {

using search_test::count_ops;
using search_test::single_block_graph;

// The search's result and, inside it, the online-softmax kernel (null when missing). The
// graphs are shared_ptr-owned, so the pointer survives moving the result.
struct Found {
  SearchResult result;
  const KernelGraph* fused = nullptr;
};

Found find_online_softmax_kernel(const KernelGraph& target) {
  SearchConfig c = search_test::small_config();
  c.preset = "attention";
  c.max_block_ops = 4;  // Q·K, two online-softmax accumulators, the division
  c.max_grids = 1;
  Found found{search(target, c), nullptr};
  const SearchResult& r = found.result;
  std::printf("%s; %zu candidates\n", r.stats.to_string().c_str(), r.candidates.size());
  EXPECT_EQ(r.reason, "");
  for (const auto& cand : r.candidates) {
    const BlockGraph* bg = single_block_graph(*cand);
    if (bg && bg->forloop_range() > 1 && count_ops(*bg, OpKind::kAccumExpMatmul) == 1 &&
        count_ops(*bg, OpKind::kAccumExpSumLast) == 1) {
      found.fused = cand.get();
      break;
    }
  }
  return found;
}

TEST(AttentionSearch, FindsTheOnlineSoftmaxKernelUnaided) {
  const KernelGraph target = search_test::attention(16, 8, 32);
  const Found found = find_online_softmax_kernel(target);
  const KernelGraph* fused = found.fused;
  ASSERT_NE(fused, nullptr);
  std::printf("%s\n", to_string(*fused).c_str());
  // The interpreter's online-softmax accumulators use the true running max, so the fused
  // kernel matches the stabilized target in floating point too.
  EXPECT_LT(search_test::float_mismatch(target, *fused), 1e-9);
}

TEST(AttentionSearch, FindsItWithBatchedHeadsToo) {
  const KernelGraph target = search_test::attention(16, 8, 64, /*heads=*/2);
  const Found found = find_online_softmax_kernel(target);
  const KernelGraph* fused = found.fused;
  ASSERT_NE(fused, nullptr);
  std::printf("%s\n", to_string(*fused).c_str());
  EXPECT_LT(search_test::float_mismatch(target, *fused), 1e-9);
}

}  // namespace
}  // namespace mj::search
