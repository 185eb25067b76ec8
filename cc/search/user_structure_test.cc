#include "cc/search/user_structure.h"

#include <gtest/gtest.h>

#include <set>

namespace mj::search {

using ir::Dim3;
using ir::DType;

namespace {

// relu(A @ B) at [2, 8, 32] @ [2, 32, 16]: batch, M and N reach the output, K does not.
struct BatchedMatmul {
  ClassTable table;
  int batch = table.fresh(2), m = table.fresh(8), k = table.fresh(32), n = table.fresh(16);
  std::vector<BlockInputSpec> inputs = {{{2, 8, 32}, DType::kF32, {batch, m, k}},
                                        {{2, 32, 16}, DType::kF32, {batch, k, n}}};
  std::vector<int> outputs = {batch, m, n};

  std::vector<BlockLayout> layouts(const SearchConfig& config) const {
    return block_layouts(inputs, outputs, table, config, false);
  }
};

TEST(UserStructure, GivenGridsReplaceTheDerivedOnesAndTheCap) {
  const BatchedMatmul p;
  SearchConfig config;  // cpu: two grid axes at most, at most 32 waves of its cores
  for (const BlockLayout& l : p.layouts(config)) EXPECT_NE(l.grid, (Dim3{2, 8, 16}));
  config.grids = {{2, 8, 16}, {1, 16, 1}};
  std::set<Dim3> grids;
  for (const BlockLayout& l : p.layouts(config)) {
    grids.insert(l.grid);
    if (l.grid == Dim3{2, 8, 16}) {
      EXPECT_EQ(l.axis_class, (std::array<int, 3>{p.batch, p.m, p.n}));
      EXPECT_EQ(l.imaps, (std::vector<Dim3>{{0, 1, -1}, {0, -1, 2}}));
    } else {
      EXPECT_EQ(l.axis_class, (std::array<int, 3>{kNoClass, p.n, kNoClass}));
    }
  }
  EXPECT_EQ(grids, (std::set<Dim3>{{2, 8, 16}, {1, 16, 1}}));
}

TEST(UserStructure, AGridNoIndexTakesGivesNoLayoutNotOneBlock) {
  const BatchedMatmul p;
  SearchConfig config;
  config.grids = {{3, 1, 1}};
  EXPECT_TRUE(p.layouts(config).empty());
}

TEST(UserStructure, OnlyTheGivenImapsAndFmapsAreUsed) {
  const BatchedMatmul p;
  SearchConfig config;
  config.imaps = {{1, -1, -1}, {-1, -1, -1}};
  config.fmaps = {2, 1};
  const auto layouts = p.layouts(config);
  ASSERT_FALSE(layouts.empty());
  for (const BlockLayout& l : layouts) {
    EXPECT_EQ(l.imaps, (std::vector<Dim3>{{1, -1, -1}, {-1, -1, -1}}));
    EXPECT_EQ(l.fmaps, (std::vector<int>{2, 1}));
    EXPECT_EQ(l.loop_class, p.k);
  }
}

TEST(UserStructure, OnlyTheGivenOmapsAreKept) {
  SearchConfig config;
  const std::vector<Dim3> omaps = {{0, 1, -1}, {0, 2, -1}};
  EXPECT_EQ(user_allowed_omaps(config, omaps), omaps);
  config.omaps = {{0, 2, -1}};
  EXPECT_EQ(user_allowed_omaps(config, omaps), (std::vector<Dim3>{{0, 2, -1}}));
}

TEST(UserStructure, BadFieldsAreNamed) {
  SearchConfig config;
  EXPECT_EQ(bad_user_structure(config), "");
  config.grids = {{2, 0, 1}};
  EXPECT_EQ(bad_user_structure(config), "grids[0] has a size below 1");
  config.grids = {};
  config.imaps = {{-1, -1, -1}, {1, 1, -1}};
  EXPECT_EQ(bad_user_structure(config), "imaps[1] splits dim 1 on two grid axes");
  config.imaps = {};
  config.omaps = {{-2, -1, -1}};
  EXPECT_EQ(bad_user_structure(config), "omaps[0] has dim -2 (-1 or a dim)");
  config.omaps = {};
  config.fmaps = {0, -5};
  EXPECT_EQ(bad_user_structure(config), "fmaps[1] is below -1");
}

}  // namespace
}  // namespace mj::search
