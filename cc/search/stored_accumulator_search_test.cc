// A program whose outputs are a product and a value computed from it (a decode step's q
// projection and its RoPE product cos * q): the search stores the accumulator the epilogue
// goes on from, so the product is summed once and scaled after the loop, and that form ranks
// before the one that scales every partial inside the loop (same bytes, more flops, and NaN
// where the scale is infinite and the partials change sign).
#include <gtest/gtest.h>

#include "cc/ir/print.h"
#include "cc/search/search.h"
#include "cc/search/search_test_graphs.h"
#include "cc/verify/verify.h"

namespace mj::search {
namespace {

using ir::BlockGraph;
using ir::DType;
using ir::KernelGraph;
using ir::Op;
using ir::OpKind;
using ir::Phase;
using search_test::count_ops;
using search_test::single_block_graph;

KernelGraph projection_and_scaled() {
  KernelGraph g;
  const int x = g.new_input({8, 64}, DType::kF32);
  const int w = g.new_input({64, 32}, DType::kF32);
  const int c = g.new_input({8, 32}, DType::kF32);
  const int y = g.matmul(x, w);
  g.mark_output(y);
  g.mark_output(g.binary(OpKind::kMul, y, c));
  return g;
}

// One accumulator, the product scaled after the loop, and the accumulator itself stored.
bool scales_after_the_loop(const BlockGraph& bg) {
  if (bg.forloop_range() < 2 || count_ops(bg, OpKind::kAccumSum) != 1) return false;
  int sum = -1;
  bool scaled = false, stored = false;
  for (const Op& op : bg.ops()) {
    if (op.kind == OpKind::kAccumSum) sum = op.outputs[0];
    if (op.kind == OpKind::kMul && bg.tensor(op.outputs[0]).phase == Phase::kEpilogue) {
      scaled = true;
    }
    stored |= op.kind == OpKind::kOutput && op.inputs[0] == sum;
  }
  return scaled && stored;
}

SearchConfig looped_config() {
  SearchConfig c = search_test::small_config();
  c.forloop_ranges_override = {4};
  return c;
}

TEST(StoredAccumulatorSearch, TheScaleFollowsTheStoredSum) {
  const KernelGraph target = projection_and_scaled();
  const SearchResult r = search(target, looped_config());
  EXPECT_EQ(r.reason, "");
  const KernelGraph* found = search_test::first_single_kernel(r, scales_after_the_loop);
  ASSERT_NE(found, nullptr) << "no candidate scales the stored sum after the loop";
  EXPECT_TRUE(verify::verify_equivalent(target, *found).equivalent);
  EXPECT_LT(search_test::float_mismatch(target, *found), 1e-9);
}

TEST(StoredAccumulatorSearch, OfEqualCostTheFewerFlopsRankFirst) {
  const KernelGraph target = projection_and_scaled();
  const SearchResult r = search(target, looped_config());
  // Among the single kernels of the same grid and loop, the first ranked scales once.
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const BlockGraph* bg = single_block_graph(*r.candidates[i]);
    if (!bg || count_ops(*bg, OpKind::kMatmul) != 1) continue;
    for (size_t j = i + 1; j < r.candidates.size(); ++j) {
      const BlockGraph* later = single_block_graph(*r.candidates[j]);
      if (!later || r.costs[j] != r.costs[i] || later->grid() != bg->grid() ||
          later->forloop_range() != bg->forloop_range()) {
        continue;
      }
      EXPECT_LE(count_ops(*bg, OpKind::kAccumSum), count_ops(*later, OpKind::kAccumSum))
          << ir::to_string(*r.candidates[i]) << "\nranked before\n"
          << ir::to_string(*r.candidates[j]);
    }
  }
}

}  // namespace
}  // namespace mj::search
