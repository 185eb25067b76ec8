// The search rediscovers the paper's gated MLP μGraph unaided: both matmuls in one block
// graph sharing the X tiles, with silu and the product in the epilogue.
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

// Both matmuls read the same X input tile, and the gate is applied after accumulating.
bool both_matmuls_share_x(const BlockGraph& bg) {
  if (count_ops(bg, OpKind::kMatmul) != 2) return false;
  int x_tile = -1;
  for (const Op& op : bg.ops()) {
    if (op.kind != OpKind::kMatmul) continue;
    if (x_tile == -1) x_tile = op.inputs[0];
    if (op.inputs[0] != x_tile || bg.ops()[bg.tensor(x_tile).producer].io_index != 0) return false;
  }
  const Phase out_phase = bg.tensor(bg.output_ids()[0]).phase;
  return bg.forloop_range() == 1 || out_phase == Phase::kEpilogue;
}

const KernelGraph* find_fused(const SearchResult& r) {
  for (const auto& c : r.candidates) {
    const BlockGraph* bg = single_block_graph(*c);
    if (bg && bg->forloop_range() > 1 && both_matmuls_share_x(*bg)) return c.get();
  }
  return nullptr;
}

SearchConfig gated_mlp_config() {
  SearchConfig c = search_test::small_config();
  c.max_block_ops = 6;  // two matmuls, two accumulators, silu, mul
  return c;
}

TEST(GatedMlpSearch, FindsBothMatmulsInOneBlockGraphUnaided) {
  const KernelGraph target = search_test::gated_mlp(8, 128, 32);
  const SearchResult r = search(target, gated_mlp_config());
  std::printf("gated_mlp [8,128]x[128,32]: %s; %zu candidates\n", r.stats.to_string().c_str(),
              r.candidates.size());
  EXPECT_EQ(r.reason, "");
  const KernelGraph* fused = find_fused(r);
  ASSERT_NE(fused, nullptr);
  std::printf("%s\n", to_string(*fused).c_str());
  VerifyOptions opts;
  opts.seed = 99;
  EXPECT_TRUE(verify_equivalent(target, *fused, opts).equivalent);
  EXPECT_LT(search_test::float_mismatch(target, *fused), 1e-9);
}

TEST(GatedMlpSearch, TheFusedKernelRanksFirstAtThePapersShapes) {
  const KernelGraph target = search_test::gated_mlp(8, 4096, 4096);
  const SearchResult r = search(target, gated_mlp_config());
  std::printf("gated_mlp [8,4096]x[4096,4096]: %s\n", r.stats.to_string().c_str());
  ASSERT_FALSE(r.candidates.empty());
  const BlockGraph* best = single_block_graph(*r.candidates.front());
  ASSERT_NE(best, nullptr) << to_string(*r.candidates.front());
  EXPECT_TRUE(both_matmuls_share_x(*best)) << to_string(*r.candidates.front());
  EXPECT_GT(best->forloop_range(), 1);
}

}  // namespace
}  // namespace mj::search
