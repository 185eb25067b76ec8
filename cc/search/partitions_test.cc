#include "cc/search/partitions.h"

#include <gtest/gtest.h>

#include <set>

#include "cc/search/search_test_graphs.h"

namespace mj::search {

using cost::Target;
using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::KernelGraph;
using ir::Shape;

namespace {

std::vector<BlockInputSpec> rmsnorm_linear_inputs(const TargetClasses& c) {
  const KernelGraph g = testing::rmsnorm_linear_reference({8, 256, 64});
  std::vector<BlockInputSpec> specs;
  for (size_t i = 0; i < 3; ++i) {
    specs.push_back({g.tensor(g.input_ids()[i]).shape, DType::kF32, c.inputs[i]});
  }
  return specs;
}

std::vector<int> output_classes(const TargetClasses& c) {
  std::vector<int> v;
  for (int x : c.outputs[0]) v.push_back(x);
  return v;
}

TEST(Partitions, EveryLayoutSplitsEachIndexConsistentlyAndDivides) {
  const TargetClasses c = target_classes(testing::rmsnorm_linear_reference({8, 256, 64}));
  const auto inputs = rmsnorm_linear_inputs(c);
  const SearchConfig config;
  const auto layouts = block_layouts(inputs, output_classes(c), c.table, config, false);
  ASSERT_FALSE(layouts.empty());
  const int k = c.inputs[0][1];
  bool loops_over_k = false;
  for (const BlockLayout& l : layouts) {
    // Grids split only output indices (the "mlp" preset); the loop only the reduced one.
    for (int a = 0; a < 3; ++a) {
      if (l.grid[a] > 1) {
        EXPECT_NE(l.axis_class[a], k);
      }
    }
    if (l.forloop_range > 1) {
      EXPECT_EQ(l.loop_class, k);
      loops_over_k = true;
      // X, the scale and W all walk k together.
      EXPECT_EQ(l.fmaps, (std::vector<int>{1, 0, 0}));
    }
    BlockGraph bg(l.grid, l.forloop_range);
    for (size_t i = 0; i < inputs.size(); ++i) {
      EXPECT_NO_THROW(bg.new_input(inputs[i].shape, DType::kF32, l.imaps[i], l.fmaps[i]));
    }
  }
  EXPECT_TRUE(loops_over_k);
}

TEST(Partitions, GridsFillTheTargetsParallelUnits) {
  const TargetClasses c = target_classes(testing::rmsnorm_linear_reference({8, 4096, 6144}));
  std::vector<BlockInputSpec> inputs;
  const KernelGraph g = testing::rmsnorm_linear_reference({8, 4096, 6144});
  for (size_t i = 0; i < 3; ++i) {
    inputs.push_back({g.tensor(g.input_ids()[i]).shape, DType::kF32, c.inputs[i]});
  }
  SearchConfig config;
  config.target = Target::h100();
  const int units = config.target.parallel_units();
  std::set<int64_t> totals;
  for (const BlockLayout& l : block_layouts(inputs, output_classes(c), c.table, config, false)) {
    totals.insert(int64_t(l.grid[0]) * l.grid[1] * l.grid[2]);
  }
  ASSERT_FALSE(totals.empty());
  for (int64_t t : totals) {
    EXPECT_GE(t, units) << "a grid of " << t << " blocks leaves SMs idle";
    EXPECT_LE(t, 8 * units);
  }
}

TEST(Partitions, OnACpuTheLastGridSlotGoesToTheMostBlocks) {
  // Two indices a grid may split, X's 8 rows and W's 64 columns: 2, 4, ... blocks all fill
  // 2 cores evenly.
  const TargetClasses c = target_classes(testing::rmsnorm_linear_reference({8, 256, 64}));
  SearchConfig config;
  config.max_grid_axes = 1;
  config.max_grids = 2;
  std::set<int64_t> totals;
  for (const BlockLayout& l :
       block_layouts(rmsnorm_linear_inputs(c), output_classes(c), c.table, config, false)) {
    totals.insert(int64_t(l.grid[0]) * l.grid[1] * l.grid[2]);
  }
  // Per index the fewest (2 blocks, the fewest replicated tiles) and the most: 8 and 64.
  EXPECT_EQ(totals, (std::set<int64_t>{2, 8, 64}));
  config.max_grids = 1;  // one slot: the fewest blocks only
  totals.clear();
  for (const BlockLayout& l :
       block_layouts(rmsnorm_linear_inputs(c), output_classes(c), c.table, config, false)) {
    totals.insert(int64_t(l.grid[0]) * l.grid[1] * l.grid[2]);
  }
  EXPECT_EQ(totals, (std::set<int64_t>{2}));
}

TEST(Partitions, TheSplitReadingTheFewestBytesComesFirst) {
  // A decode step's 8 rows times a [4096, 6144] weight: split by rows, every block reads all
  // of W; split by W's columns, every block reads all of X, 128 KB. The search is depth-first
  // within a budget, so the first layouts are the ones it surely gets to.
  const TargetClasses c = target_classes(testing::rmsnorm_linear_reference({8, 4096, 6144}));
  const KernelGraph g = testing::rmsnorm_linear_reference({8, 4096, 6144});
  std::vector<BlockInputSpec> inputs;
  for (size_t i = 0; i < 3; ++i) {
    inputs.push_back({g.tensor(g.input_ids()[i]).shape, DType::kF32, c.inputs[i]});
  }
  SearchConfig config;
  config.max_grid_axes = 1;
  const int rows = c.inputs[0][0], columns = c.inputs[2][1];
  const auto layouts = block_layouts(inputs, output_classes(c), c.table, config, false);
  ASSERT_FALSE(layouts.empty());
  EXPECT_EQ(layouts.front().axis_class[0], columns);
  bool rows_later = false;
  for (const BlockLayout& l : layouts) rows_later |= l.axis_class[0] == rows;
  EXPECT_TRUE(rows_later) << "the row splits are enumerated too, after the column splits";
}

TEST(Partitions, OverridesReplaceTheDerivedSizes) {
  const TargetClasses c = target_classes(testing::rmsnorm_linear_reference({8, 256, 64}));
  SearchConfig config;
  config.grid_sizes_override = {4};
  config.forloop_ranges_override = {8};
  for (const BlockLayout& l :
       block_layouts(rmsnorm_linear_inputs(c), output_classes(c), c.table, config, false)) {
    for (int a = 0; a < 3; ++a) EXPECT_TRUE(l.grid[a] == 1 || l.grid[a] == 4);
    EXPECT_TRUE(l.forloop_range == 1 || l.forloop_range == 8);
  }
}

TEST(Partitions, OmapsStoreAlongTheSplitIndexOrNowhere) {
  BlockLayout l;
  l.grid = {4, 1, 1};
  l.axis_class = {7, kNoClass, kNoClass};
  EXPECT_EQ(output_omaps(l, {3, 7}, false), (std::vector<Dim3>{{1, -1, -1}}));
  EXPECT_TRUE(output_omaps(l, {3, kUnitClass}, false).empty());  // would need a reduction
  // Partials, side by side along the last dim.
  EXPECT_EQ(output_omaps(l, {3, kUnitClass}, true), (std::vector<Dim3>{{1, -1, -1}}));
}

TEST(Partitions, PartialsAreWalkedOneChunkPerIteration) {
  // Partial E·V sums [16, 4·8] and partial row sums [16, 4] of a 4-way key split.
  ClassTable t;
  const int q = t.fresh(16), d = t.fresh(8), kv = t.fresh(64);
  const int ev = t.stacked_of(d, kv, 4), sums = t.stacked_of(kUnitClass, kv, 4);
  const std::vector<BlockInputSpec> inputs = {{{16, 32}, DType::kF32, {q, ev}},
                                              {{16, 4}, DType::kF32, {q, sums}}};
  SearchConfig config;
  const auto layouts = block_layouts(inputs, {q, d}, t, config, false);
  ASSERT_FALSE(layouts.empty());
  for (const BlockLayout& l : layouts) {
    EXPECT_EQ(l.loop_class, t.stacking(ev)->chunks);
    EXPECT_EQ(l.forloop_range, 4);
    EXPECT_EQ(l.fmaps, (std::vector<int>{1, 1}));
    BlockGraph bg(l.grid, l.forloop_range);
    EXPECT_EQ(bg.tensor(bg.new_input(inputs[0].shape, DType::kF32, l.imaps[0], l.fmaps[0])).shape,
              (Shape{16 / l.grid[0], 8}));
  }
}

}  // namespace
}  // namespace mj::search
