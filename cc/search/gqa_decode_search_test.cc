// gqa_decode at the paper's shapes (benchmarks/programs.py) under the benchmark's "attention"
// limits: Q[8, 8, 4, 128], K[8, 8, 128, 4096], V[8, 8, 4096, 128]. The search has to finish inside
// its budget and rank first the single-kernel online-softmax candidate with a grid over both
// batch and heads: the one whose K tiles are walked in long runs (measured fastest here,
// 1.4-1.6x XLA; a (2,1,1) grid walks 4096 rows 8 keys at a time and runs 4x slower than XLA).
// About 30 s on 2 quiet cores.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "cc/ir/print.h"
#include "cc/search/search.h"
#include "cc/search/search_test_graphs.h"

namespace mj::search {

using ir::BlockGraph;
using ir::DType;
using ir::KernelGraph;
using ir::OpKind;
using ir::ReduceKind;
using ir::to_string;

namespace {

using search_test::count_ops;

// softmax(scale·Q@K) @ V with the max stabilizer over rank-4 [batch, kv_heads, ., .] tensors.
KernelGraph gqa_decode(int64_t batch, int64_t heads, int64_t rows, int64_t d, int64_t kv) {
  KernelGraph g;
  const int q = g.new_input({batch, heads, rows, d}, DType::kF32);
  const int k = g.new_input({batch, heads, d, kv}, DType::kF32);
  const int v = g.new_input({batch, heads, kv, d}, DType::kF32);
  const int s = g.unary(OpKind::kMulScalar, g.matmul(q, k), 1.0 / std::sqrt(double(d)));
  const int mx = g.reduce(s, 3, ReduceKind::kMax);
  const int e = g.unary(OpKind::kExp, g.binary(OpKind::kSub, s, mx));
  g.mark_output(g.matmul(g.binary(OpKind::kDiv, e, g.reduce(e, 3, ReduceKind::kSum)), v));
  return g;
}

// benchmarks/superoptimize.py's ATTENTION limits.
SearchConfig attention_config(double budget) {
  SearchConfig c;
  c.preset = "attention";
  c.threads = 2;
  c.time_budget_s = budget;
  c.max_kernel_ops = 2;
  c.max_block_graphs = 2;
  c.max_block_ops = 5;
  c.max_block_outputs = 2;
  c.max_grid_axes = 2;
  c.max_block_inputs = 3;
  c.max_grids = 2;
  c.max_forloop_ranges = 1;
  c.max_verified = 8;
  return c;
}

bool is_online_softmax_kernel(const KernelGraph& g) {
  const BlockGraph* bg = search_test::single_block_graph(g);
  return bg && bg->forloop_range() > 1 && count_ops(*bg, OpKind::kAccumExpMatmul) == 1 &&
         count_ops(*bg, OpKind::kAccumExpSumLast) == 1;
}

TEST(GqaDecodeSearch, FinishesAtThePapersShapesWithTheOnlineSoftmaxKernel) {
  const KernelGraph target = gqa_decode(8, 8, 4, 128, 4096);
  const auto start = std::chrono::steady_clock::now();
  const SearchResult r = search(target, attention_config(120));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("gqa_decode [8,8,4,128] kv 4096: %s; %zu candidates; %.2f s wall\n",
              r.stats.to_string().c_str(), r.candidates.size(), secs);
  std::printf("stop reason: \"%s\"\n", r.reason.c_str());
  EXPECT_EQ(r.reason, "");
  int rank = -1;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    if (is_online_softmax_kernel(*r.candidates[i])) {
      rank = int(i);
      break;
    }
  }
  ASSERT_GE(rank, 0) << "no single-kernel online-softmax candidate";
  std::printf("online-softmax kernel ranked %d of %zu:\n%s\n", rank, r.candidates.size(),
              to_string(*r.candidates[rank]).c_str());
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(search_test::single_block_graph(*r.candidates[rank])->num_blocks(), 64);
}

}  // namespace
}  // namespace mj::search
