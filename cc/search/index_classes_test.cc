#include "cc/search/index_classes.h"

#include <gtest/gtest.h>

#include "cc/search/search_test_graphs.h"

namespace mj::search {

using ir::Op;
using ir::OpKind;

namespace {

TEST(IndexClasses, RmsNormLinearTiesKAcrossXScaleAndW) {
  const TargetClasses c = target_classes(testing::rmsnorm_linear_reference({8, 256, 64}));
  ASSERT_EQ(c.inputs.size(), 3u);
  const int m = c.inputs[0][0], k = c.inputs[0][1], n = c.inputs[2][1];
  EXPECT_EQ(c.inputs[1][0], k);  // the scale broadcasts along X's last dim
  EXPECT_EQ(c.inputs[2][0], k);  // matmul's contraction
  EXPECT_NE(m, k);
  EXPECT_NE(n, k);
  EXPECT_NE(m, n);
  EXPECT_EQ(c.outputs.at(0), (DimClasses{m, n}));
  EXPECT_EQ(c.table.size(k), 256);
}

TEST(IndexClasses, GatedMlpTiesBothWeightsNDims) {
  const TargetClasses c = target_classes(search_test::gated_mlp(8, 32, 16));
  EXPECT_EQ(c.inputs[1], c.inputs[2]);  // the product ties the two matmuls' n
}

TEST(IndexClasses, ElementwiseOnUnrelatedIndicesIsRejected) {
  ClassTable t;
  const int a = t.fresh(8), b = t.fresh(8);
  Op mul;
  mul.kind = OpKind::kMul;
  EXPECT_FALSE(propagate_classes(mul, {{a}, {b}}, {8}, nullptr));
  EXPECT_EQ(propagate_classes(mul, {{a}, {kUnitClass}}, {8}, nullptr), (DimClasses{a}));
  Op mm;
  mm.kind = OpKind::kMatmul;
  EXPECT_FALSE(propagate_classes(mm, {{a, b}, {a, b}}, {8, 8}, nullptr));  // k: b vs a
  EXPECT_EQ(propagate_classes(mm, {{a, b}, {b, a}}, {8, 8}, nullptr), (DimClasses{a, a}));
}

TEST(IndexClasses, AccumulatorsOverTheLastDimMakeItAUnitAndConcatInterns) {
  ClassTable t;
  const int a = t.fresh(8), b = t.fresh(4), r = t.fresh(2);
  Op acc;
  acc.kind = OpKind::kAccumRmsLast;
  EXPECT_EQ(propagate_classes(acc, {{a, b}}, {8, 1}, nullptr), (DimClasses{a, kUnitClass}));
  Op cat;
  cat.kind = OpKind::kConcat;
  cat.dim = 1;
  const auto x = propagate_classes(cat, {{a, b}, {a, r}}, {8, 6}, &t);
  const auto y = propagate_classes(cat, {{a, b}, {a, r}}, {8, 6}, &t);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(*x, *y);  // the same concat gets the same class in every branch
  EXPECT_EQ(t.size((*x)[1]), 6);
}

TEST(IndexClasses, StacksOfOneSplitShareTheirChunkIndex) {
  ClassTable t;
  const int q = t.fresh(16), d = t.fresh(8), kv = t.fresh(64);
  const int ev = t.stacked_of(d, kv, 4), sums = t.stacked_of(kUnitClass, kv, 4);
  EXPECT_EQ(t.size(ev), 32);
  EXPECT_EQ(t.size(sums), 4);
  ASSERT_NE(t.stacking(ev), nullptr);
  ASSERT_NE(t.stacking(sums), nullptr);
  EXPECT_EQ(t.stacking(ev)->tile, d);
  EXPECT_EQ(t.stacking(sums)->tile, kUnitClass);
  EXPECT_EQ(t.stacking(ev)->chunks, t.stacking(sums)->chunks);  // walked together
  EXPECT_EQ(t.size(t.stacking(ev)->chunks), 4);
  EXPECT_NE(t.stacking(t.stacked_of(d, kv, 2))->chunks, t.stacking(ev)->chunks);
  EXPECT_EQ(t.stacking(q), nullptr);
}

TEST(IndexClasses, OnlySumsOutsideTheExpCanBeCombinedFromPartials) {
  // softmax(Q @ K) @ V: the keys are summed outside every nonlinear op (E·V and the row
  // sums); the head dim of Q @ K only inside exp.
  const TargetClasses c = target_classes(search_test::attention(16, 8, 64));
  const int d_qk = c.inputs[0][1], kv = c.inputs[1][1];
  EXPECT_EQ(c.combinable, (std::vector<int>{kv}));
  EXPECT_EQ(c.max_reduced, (std::vector<int>{kv}));
  EXPECT_NE(d_qk, kv);
}

}  // namespace
}  // namespace mj::search
