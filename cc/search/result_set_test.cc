// ResultSet's order: by estimated cost, then flops, then hash; among the candidates tied with
// the best (cost::kCostTie), those reading least a piece of each row per step first.
#include "cc/search/result_set.h"

#include <gtest/gtest.h>

#include <map>

#include "cc/testing/row_gemv.h"

namespace mj::search {
namespace {

using ir::KernelGraph;
using testing::row_gemv;

TEST(ResultSet, CandidatesTiedWithTheBestComeLeastCutFirst) {
  const auto cut2 = row_gemv(2), cut4 = row_gemv(4), whole = row_gemv(1), slow = row_gemv(1);
  // the model's costs: the cut forms ahead, the whole-row form within the tie, and a whole-row
  // form past it
  const std::map<const KernelGraph*, double> costs = {
      {cut2.get(), 1.0}, {cut4.get(), 1.005}, {whole.get(), 1.015}, {slow.get(), 1.03}};
  ResultSet set;
  set.accept(slow, "d");
  set.accept(cut4, "b");
  set.accept(whole, "c");
  set.accept(cut2, "a");
  const auto ranked = set.ranked([&](const KernelGraph& g) { return costs.at(&g); });
  ASSERT_EQ(ranked.size(), 4u);
  EXPECT_EQ(ranked[0].hash, "c");  // the tied whole-row form first
  EXPECT_EQ(ranked[1].hash, "a");  // then the tied cut ones, in the model's order
  EXPECT_EQ(ranked[2].hash, "b");
  EXPECT_EQ(ranked[3].hash, "d");  // 3% behind the best: not a tie, stays where it ranks
}

TEST(ResultSet, WithoutATieTheModelsOrderStands) {
  const auto cut = row_gemv(4), whole = row_gemv(1);
  ResultSet set;
  set.accept(whole, "b");
  set.accept(cut, "a");
  const auto ranked =
      set.ranked([&](const KernelGraph& g) { return &g == cut.get() ? 1.0 : 1.05; });
  ASSERT_EQ(ranked.size(), 2u);
  EXPECT_EQ(ranked[0].hash, "a");
  EXPECT_EQ(ranked[1].hash, "b");
}

}  // namespace
}  // namespace mj::search
