// rank_by_cost: fastest first, and the same order every time; tied_with_best: the leading
// costs within kCostTie of the first.
#include "cc/cost/rank.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "cc/cost/estimate.h"
#include "cc/ir/hash.h"
#include "cc/testing/rmsnorm_linear.h"

namespace mj::cost {

using ir::DType;
using ir::graph_hash;
using ir::KernelGraph;
using ir::OpKind;
using testing::column_split;
using testing::fused_rmsnorm_linear;
using testing::rmsnorm_linear_reference;

namespace {

KernelGraph unary_graph(OpKind kind) {
  KernelGraph g;
  g.mark_output(g.unary(kind, g.new_input({64, 64}, DType::kF32)));
  return g;
}

TEST(RankByCost, OrdersBySecondsBestFirst) {
  const KernelGraph ref = rmsnorm_linear_reference();
  const KernelGraph g96 = fused_rmsnorm_linear(column_split(96, 32)),
                    g1 = fused_rmsnorm_linear(column_split(1, 32));
  const KernelGraph w_twice = fused_rmsnorm_linear(column_split(96, 32, 2));
  const std::vector<const KernelGraph*> graphs{&ref, &g1, &w_twice, &g96};
  const Target t = Target::cpu_host();
  const std::vector<int> order = rank_by_cost(graphs, t);
  ASSERT_EQ(order.size(), graphs.size());
  for (size_t i = 1; i < order.size(); ++i) {
    EXPECT_LE(estimate(*graphs[order[i - 1]], t).seconds, estimate(*graphs[order[i]], t).seconds);
  }
  EXPECT_EQ(order.front(), 3);
  // Reading W twice (and twice its runs) is slower than reading it once on the same grid;
  // the unfused reference, whose 8-row library matmul streams W at a third of DRAM's rate,
  // is slower still.
  const auto position = [&](int graph) { return std::find(order.begin(), order.end(), graph); };
  EXPECT_LT(position(3), position(2));
  EXPECT_EQ(order.back(), 0);
}

TEST(RankByCost, EqualCostsAreOrderedByCanonicalHashWhateverTheInputOrder) {
  const KernelGraph e = unary_graph(OpKind::kExp), n = unary_graph(OpKind::kNeg);
  const Target t = Target::cpu_host();
  ASSERT_DOUBLE_EQ(estimate(e, t).seconds, estimate(n, t).seconds);
  ASSERT_NE(graph_hash(e), graph_hash(n));
  const bool e_first = graph_hash(e) < graph_hash(n);
  EXPECT_EQ(rank_by_cost({&e, &n}, t), (std::vector<int>{e_first ? 0 : 1, e_first ? 1 : 0}));
  EXPECT_EQ(rank_by_cost({&n, &e}, t), (std::vector<int>{e_first ? 1 : 0, e_first ? 0 : 1}));
}

TEST(RankByCost, IdenticalGraphsKeepTheirPositions) {
  const KernelGraph a = unary_graph(OpKind::kExp), b = unary_graph(OpKind::kExp);
  const KernelGraph slow = fused_rmsnorm_linear(column_split(1, 32));
  EXPECT_EQ(rank_by_cost({&slow, &a, &b}, Target::cpu_host()), (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(rank_by_cost({&b, &slow, &a}, Target::cpu_host()), (std::vector<int>{0, 2, 1}));
}

TEST(RankByCost, RepeatedCallsAgree) {
  const KernelGraph ref = rmsnorm_linear_reference(),
                    wide = fused_rmsnorm_linear(column_split(6, 32));
  const KernelGraph g96 = fused_rmsnorm_linear(column_split(96, 32)),
                    g48 = fused_rmsnorm_linear(column_split(48, 32));
  const std::vector<const KernelGraph*> graphs{&wide, &g48, &ref, &g96};
  for (const Target& t : {Target::cpu_host(), Target::a100()}) {
    const std::vector<int> first = rank_by_cost(graphs, t);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(rank_by_cost(graphs, t), first) << t.name;
  }
}

TEST(RankByCost, EmptyAndNullInputs) {
  EXPECT_TRUE(rank_by_cost({}, Target::cpu_host()).empty());
  const KernelGraph e = unary_graph(OpKind::kExp);
  EXPECT_THROW(rank_by_cost({&e, nullptr}, Target::cpu_host()), std::invalid_argument);
}

}  // namespace
}  // namespace mj::cost

namespace mj::cost {
namespace {

TEST(TiedWithBest, CountsTheLeadingCostsWithinTheTie) {
  EXPECT_EQ(tied_with_best({1.0, 1.0 + kCostTie / 2, 1.0 + kCostTie, 1.0 + 2 * kCostTie}), 3u);
  EXPECT_EQ(tied_with_best({1.0, 2.0, 1.0}), 1u);  // the first outside the tie ends it
  EXPECT_EQ(tied_with_best({}), 0u);
}

TEST(TiedWithBest, AnUnpricedBestTiesWithNothing) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(tied_with_best({inf, inf}), 0u);
  EXPECT_EQ(tied_with_best({std::nan(""), 1.0}), 0u);
}

}  // namespace
}  // namespace mj::cost
