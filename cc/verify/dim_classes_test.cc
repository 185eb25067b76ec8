// The per-class shrink rule: new unit U = L * min(G / L, max_tile), ratios kept.
#include "cc/verify/dim_classes.h"

#include <gtest/gtest.h>

namespace mj::verify {
namespace {

TEST(DimClasses, SplitDimKeepsItsSplitCountAndTilesOfMaxTile) {
  DimClasses dc;
  const int k = dc.add_slot(4096);
  dc.require_multiple(k, 32);
  EXPECT_EQ(dc.shrunk_sizes(2).at(k), 64);
  EXPECT_EQ(dc.shrunk_sizes(3).at(k), 96);
  EXPECT_EQ(dc.shrunk_sizes(1000).at(k), 4096);  // never grows
}

TEST(DimClasses, UnsplitDimsShrinkToMaxTileButNotToOne) {
  DimClasses dc;
  const int a = dc.add_slot(3), b = dc.add_slot(7), one = dc.add_slot(1);
  const auto two = dc.shrunk_sizes(2);
  EXPECT_EQ(two.at(a), 2);
  EXPECT_EQ(two.at(b), 2);
  EXPECT_EQ(two.at(one), 1);
  const auto tile1 = dc.shrunk_sizes(1);  // still 2: a size-1 dim would start to broadcast
  EXPECT_EQ(tile1.at(a), 2);
  EXPECT_EQ(tile1.at(one), 1);
}

TEST(DimClasses, TiedDimsKeepTheirRatio) {
  // W's columns (6144, split 96 ways by the grid) and their tile (64).
  DimClasses dc;
  const int kernel = dc.add_slot(6144), tile = dc.add_slot(64);
  dc.unite(kernel, tile);
  dc.require_multiple(kernel, 96);
  const auto s = dc.shrunk_sizes(2);
  EXPECT_EQ(s.at(kernel), 192);
  EXPECT_EQ(s.at(tile), 2);
}

TEST(DimClasses, SplitsOfDifferentCountsInOneClass) {
  DimClasses dc;
  const int a = dc.add_slot(96), b = dc.add_slot(96);
  dc.unite(a, b);
  dc.require_multiple(a, 4);
  dc.require_multiple(b, 6);
  const auto s = dc.shrunk_sizes(2);
  EXPECT_EQ(s.at(a), 24);  // lcm(4, 6) * 2
  EXPECT_EQ(s.at(b), 24);
}

TEST(DimClasses, ConcatSumSurvivesScaling) {
  DimClasses dc;
  const int x = dc.add_slot(256), xa = dc.add_slot(16), out = dc.add_slot(272);
  dc.unite(x, out);
  dc.unite(xa, out);
  const auto s = dc.shrunk_sizes(2);
  EXPECT_EQ(s.at(x) + s.at(xa), s.at(out));
  EXPECT_EQ(s.at(xa), 2);
  EXPECT_EQ(s.at(x), 32);
}

TEST(DimClasses, ASizeOneMemberFreezesItsClass) {
  // a kernel dim of 4 split 4 ways: its tile has size 1 and must stay 1
  DimClasses dc;
  const int kernel = dc.add_slot(4), tile = dc.add_slot(1);
  dc.unite(kernel, tile);
  dc.require_multiple(kernel, 4);
  const auto s = dc.shrunk_sizes(2);
  EXPECT_EQ(s.at(kernel), 4);
  EXPECT_EQ(s.at(tile), 1);
}

TEST(DimClasses, ASplitThatDoesNotDivideIsAnError) {
  DimClasses dc;
  const int a = dc.add_slot(10);
  dc.require_multiple(a, 4);
  EXPECT_THROW(dc.shrunk_sizes(2), std::logic_error);
  EXPECT_THROW(dc.add_slot(0), std::invalid_argument);
}

}  // namespace
}  // namespace mj::verify
