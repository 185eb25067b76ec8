// nTrans, rms_norm(X + alpha * (rms_norm(H) - X)), becomes one kernel: blocks take whole
// rows (the second rms needs the first one's result for every element of the row, so no
// for-loop can split the row), and the chain of five ops runs on the tiles.
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

TEST(NTransSearch, FindsTheSingleKernelOverWholeRows) {
  const KernelGraph target = search_test::ntrans(8, 256);
  const SearchResult r = search(target, search_test::small_config());
  std::printf("ntrans [8,256]: %s; %zu candidates\n", r.stats.to_string().c_str(),
              r.candidates.size());
  EXPECT_EQ(r.reason, "");
  const KernelGraph* fused = nullptr;
  for (const auto& cand : r.candidates) {
    const BlockGraph* bg = single_block_graph(*cand);
    if (bg && count_ops(*bg, OpKind::kRmsNorm) == 2) fused = cand.get();
  }
  ASSERT_NE(fused, nullptr);
  std::printf("%s\n", to_string(*fused).c_str());
  const BlockGraph& bg = *single_block_graph(*fused);
  EXPECT_EQ(bg.forloop_range(), 1);
  for (int i = 0; i < bg.num_inputs(); ++i)
    EXPECT_EQ(bg.tensor(bg.input_ids()[i]).shape.back(), 256);
  EXPECT_LT(search_test::float_mismatch(target, *fused), 1e-9);
}

}  // namespace
}  // namespace mj::search
