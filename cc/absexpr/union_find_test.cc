#include "cc/absexpr/union_find.h"

#include <gtest/gtest.h>

namespace mj::absexpr {
namespace {

TEST(UnionFind, FreshSetsAreTheirOwnRepresentatives) {
  UnionFind uf;
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(uf.make_set(), i);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(uf.find(i), i);
  EXPECT_EQ(uf.size(), 4u);
}

TEST(UnionFind, UniteJoinsWholeSetsUnderTheGivenRoot) {
  UnionFind uf;
  for (int i = 0; i < 6; ++i) uf.make_set();
  EXPECT_EQ(uf.unite(0, 1), 0u);
  EXPECT_EQ(uf.unite(2, 3), 2u);
  EXPECT_EQ(uf.unite(2, 0), 2u);  // a chain 1 -> 0 -> 2
  for (uint32_t i : {0u, 1u, 2u, 3u}) EXPECT_EQ(uf.find(i), 2u);
  EXPECT_EQ(uf.find(4), 4u);
  EXPECT_EQ(uf.find(5), 5u);
  uf.compress();
  for (uint32_t i : {0u, 1u, 2u, 3u}) EXPECT_EQ(uf.find(i), 2u);
  EXPECT_EQ(uf.find(5), 5u);
}

TEST(UnionFind, UniteRejectsNonRepresentatives) {
  UnionFind uf;
  for (int i = 0; i < 3; ++i) uf.make_set();
  uf.unite(0, 1);
  EXPECT_THROW(uf.unite(1, 2), std::logic_error);
  EXPECT_THROW(uf.unite(2, 1), std::logic_error);
}

}  // namespace
}  // namespace mj::absexpr
