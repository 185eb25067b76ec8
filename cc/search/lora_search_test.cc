// Under the "lora" preset the search finds the paper's LoRA μGraph unaided:
// concat(X, X·A) @ concat(W, B) in one kernel.
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
using ir::to_string;
using verify::verify_equivalent;
using verify::VerifyOptions;

namespace {

using search_test::count_ops;
using search_test::single_block_graph;

// One matmul contracts two concats: [X | X·A] @ [W ; B].
bool matmul_of_two_concats(const BlockGraph& bg) {
  for (const Op& op : bg.ops()) {
    if (op.kind != OpKind::kMatmul) continue;
    const Op& a = bg.ops()[bg.tensor(op.inputs[0]).producer];
    const Op& b = bg.ops()[bg.tensor(op.inputs[1]).producer];
    if (a.kind == OpKind::kConcat && b.kind == OpKind::kConcat) return true;
  }
  return false;
}

TEST(LoraSearch, FindsTheConcatMatmulKernelUnaided) {
  const KernelGraph target = search_test::lora(8, 64, 32, 8);
  SearchConfig c = search_test::small_config();
  c.preset = "lora";
  c.max_block_ops = 4;  // X·A, two concats, the matmul
  const SearchResult r = search(target, c);
  std::printf("lora [8,64]x[64,32] rank 8: %s; %zu candidates\n", r.stats.to_string().c_str(),
              r.candidates.size());
  EXPECT_EQ(r.reason, "");
  const KernelGraph* fused = nullptr;
  for (const auto& cand : r.candidates) {
    const BlockGraph* bg = single_block_graph(*cand);
    if (bg && count_ops(*bg, OpKind::kConcat) == 2 && matmul_of_two_concats(*bg)) {
      fused = cand.get();
      break;
    }
  }
  ASSERT_NE(fused, nullptr);
  std::printf("%s\n", to_string(*fused).c_str());
  EXPECT_LT(search_test::float_mismatch(target, *fused), 1e-9);
  VerifyOptions opts;
  opts.seed = 5;
  EXPECT_TRUE(verify_equivalent(target, *fused, opts).equivalent);
}

// The paper's shapes (X[16,256], W[256,4096], rank 16) with the grid sizes derived from the
// shapes and the CPU target, no override: the fewest-block grids leave W's column tile too
// large for the block's on-chip budget without a loop over d_in, and the concat kernel
// cannot loop (X·A has no d_in to cut), so the derivation must also offer the fewest-block
// grid whose tiles fit without a loop.
TEST(LoraSearch, FindsTheConcatMatmulKernelAtThePapersShapes) {
  const KernelGraph target = search_test::lora(16, 256, 4096, 16);
  SearchConfig c = search_test::small_config();
  c.preset = "lora";
  c.max_block_ops = 4;
  c.time_budget_s = 40;
  const SearchResult r = search(target, c);
  std::printf("lora [16,256]x[256,4096] rank 16: %s; %zu candidates\n", r.stats.to_string().c_str(),
              r.candidates.size());
  EXPECT_EQ(r.reason, "");
  const KernelGraph* fused = nullptr;
  for (const auto& cand : r.candidates) {
    const BlockGraph* bg = single_block_graph(*cand);
    if (bg && count_ops(*bg, OpKind::kConcat) == 2 && matmul_of_two_concats(*bg)) {
      fused = cand.get();
      break;
    }
  }
  ASSERT_NE(fused, nullptr);
  std::printf("%s\n", to_string(*fused).c_str());
}

TEST(LoraSearch, TheMlpPresetProposesNoConcat) {
  const KernelGraph target = search_test::lora(8, 64, 32, 8);
  SearchConfig c = search_test::small_config();
  c.max_block_ops = 4;
  const SearchResult r = search(target, c);
  for (const auto& cand : r.candidates) {
    for (const Op& op : cand->ops()) {
      if (op.kind == OpKind::kCustomized) {
        EXPECT_EQ(count_ops(*op.block_graph, OpKind::kConcat), 0);
      }
    }
  }
}

}  // namespace
}  // namespace mj::search
