// Tile loads that cross more pages per iteration than the TLB maps, and the contiguous runs
// loop-walked tiles are cut into: counted by block_graph_work, priced by the CPU roofline,
// ignored on a GPU.
#include <gtest/gtest.h>

#include <memory>

#include "cc/cost/block_graph_work.h"
#include "cc/cost/roofline.h"
#include "cc/cost/target.h"

namespace mj::cost {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::OpKind;

namespace {

// Decode attention's K[8,8,128,4096] walked along its last dim: each block takes `rows`
// batch·head rows of 128 and `kv` columns per iteration, the rest of the grid covering
// the tensor. Only K is an input, read by a sum over the walked dim.
std::shared_ptr<BlockGraph> k_walk(Dim3 grid, int forloop) {
  auto bg = std::make_shared<BlockGraph>(grid, forloop);
  const Dim3 map{0, grid[1] > 1 ? 1 : -1, -1};
  const int k = bg->new_input({8, 8, 128, 4096}, DType::kF32, map, 3);
  bg->new_output(bg->accum(OpKind::kAccumSumLast, k), map, DType::kF32);
  return bg;
}

TEST(TileRuns, ManyStridedRunsPerIterationAreCounted) {
  // grid (2, 1): a [4, 8, 128, 8] tile: 4096 runs of 32 bytes, each 16 KiB from the next.
  const KernelWork wide = block_graph_work(*k_walk({2, 1, 1}, 512));
  ASSERT_EQ(wide.paged_loads.size(), 1u);
  EXPECT_DOUBLE_EQ(wide.paged_loads[0].first, 4096);
  EXPECT_DOUBLE_EQ(wide.paged_loads[0].second, 512.0 * 2);
  // grid (8, 8): a [1, 1, 128, 8] tile: 128 pages.
  const KernelWork narrow = block_graph_work(*k_walk({8, 8, 1}, 512));
  ASSERT_EQ(narrow.paged_loads.size(), 1u);
  EXPECT_DOUBLE_EQ(narrow.paged_loads[0].first, 128);
}

TEST(TileRuns, SameBytesCostMoreWhenThePagesOutgrowTheTlb) {
  const KernelWork wide = block_graph_work(*k_walk({2, 1, 1}, 512));
  const KernelWork narrow = block_graph_work(*k_walk({8, 8, 1}, 512));
  ASSERT_DOUBLE_EQ(wide.bytes_read, narrow.bytes_read);
  const Target cpu = Target::cpu_host();
  const double extra = kernel_time(wide, cpu).memory_s - kernel_time(narrow, cpu).memory_s;
  const double runs_each = (4096.0 * 512 * 2 - 128.0 * 512 * 64) * cpu.run_overhead_s / cpu.cores;
  EXPECT_DOUBLE_EQ(extra, 4096.0 * 512 * 2 * cpu.page_walk_s / cpu.cores + runs_each);
  // A GPU's tiles go through shared memory in coalesced rows; no such term there.
  const Target gpu = Target::h100();
  EXPECT_DOUBLE_EQ(kernel_time(wide, gpu).memory_s, kernel_time(narrow, gpu).memory_s);
}

TEST(TileRuns, ShorterRunsOfTheSameBytesCostMore) {
  // grid (8, 1): K tiles of [1, 8, 128, kv]: 1024 runs of kv floats per iteration.
  const KernelWork short_runs = block_graph_work(*k_walk({8, 1, 1}, 128));  // 128-byte runs
  const KernelWork long_runs = block_graph_work(*k_walk({8, 1, 1}, 32));    // 512-byte runs
  // in lines' worth: a 128-byte run is half a line-run, a 512-byte one an eighth
  EXPECT_DOUBLE_EQ(short_runs.runs_loaded, 1024.0 * 128 * 8 / 2);
  EXPECT_DOUBLE_EQ(long_runs.runs_loaded, 1024.0 * 32 * 8 / 8);
  const Target cpu = Target::cpu_host();
  EXPECT_GT(kernel_time(short_runs, cpu).seconds, kernel_time(long_runs, cpu).seconds);
  // Neither crosses more pages than the TLB holds.
  EXPECT_DOUBLE_EQ(kernel_time(short_runs, cpu).memory_s - kernel_time(long_runs, cpu).memory_s,
                   1024.0 * (128 / 2 - 32 / 8) * 8 * cpu.run_overhead_s / cpu.cores);
}

TEST(TileRuns, ARunOfALineOrLessCountsWhole) {
  // grid (8, 1), 1024 iterations: [1, 8, 128, 4] tiles, 1024 runs of 16 bytes each.
  const KernelWork lines = block_graph_work(*k_walk({8, 1, 1}, 1024));
  EXPECT_DOUBLE_EQ(lines.runs_loaded, 1024.0 * 1024 * 8);
}

TEST(TileRuns, ALoopInvariantTileIsCountedOncePerBlock) {
  // W[512, 512] cut into [512, 128] column tiles, read whole by each of 4 blocks: 512 runs
  // of 512 bytes (an eighth of a line-run each) each, and no page walks (nothing comes back
  // to the same pages).
  auto bg = std::make_shared<BlockGraph>(Dim3{4, 1, 1}, 1);
  const int w = bg->new_input({512, 512}, DType::kF32, {1, -1, -1}, -1);
  bg->new_output(bg->unary(OpKind::kExp, w), {1, -1, -1}, DType::kF32);
  const KernelWork work = block_graph_work(*bg);
  EXPECT_DOUBLE_EQ(work.runs_loaded, 512.0 * 4 / 8);
  EXPECT_TRUE(work.paged_loads.empty());
}

TEST(TileRuns, ContiguousTilesCrossNoExtraPages) {
  // V[8,8,4096,128] walked along dim 2 in [1,1,8,128] tiles: one 4 KiB run per iteration.
  auto bg = std::make_shared<BlockGraph>(Dim3{8, 8, 1}, 512);
  const int v = bg->new_input({8, 8, 4096, 128}, DType::kF32, {0, 1, -1}, 2);
  bg->new_output(bg->accum(OpKind::kAccumSum, v), {0, 1, -1}, DType::kF32);
  const KernelWork w = block_graph_work(*bg);
  ASSERT_EQ(w.paged_loads.size(), 1u);
  EXPECT_DOUBLE_EQ(w.paged_loads[0].first, 1);
}

// x[rows, 4096] @ w[4096, 6144] over `blocks` blocks and 32 iterations: w's [128, n] tiles
// are 128 runs each. Wide ones the generated matmuls stream with prefetches of their own;
// [128, 16] tiles take a product without prefetches, and their 64-byte runs count whole.
// x's [rows, 128] tiles continue each row where the last iteration ended: up to 16 rows
// are streams the prefetchers follow, more count (512 bytes a run, an eighth of a line-run).
std::shared_ptr<BlockGraph> gemv(int blocks, int rows = 1) {
  auto bg = std::make_shared<BlockGraph>(Dim3{blocks, 1, 1}, 32);
  const int x = bg->new_input({rows, 4096}, DType::kF32, {-1, -1, -1}, 1);
  const int w = bg->new_input({4096, 6144}, DType::kF32, {1, -1, -1}, 0);
  bg->new_output(bg->accum(OpKind::kAccumSum, bg->matmul(x, w)), {1, -1, -1}, DType::kF32);
  return bg;
}

TEST(TileRuns, RunsOfFourLinesOrMoreInAStreamedWeightTileAreNotCounted) {
  EXPECT_DOUBLE_EQ(block_graph_work(*gemv(96)).runs_loaded, 0);  // [128, 64]: 256-byte runs
  // [128, 32]: streamed too, but in runs of two lines, each counted as half a line-run
  EXPECT_DOUBLE_EQ(block_graph_work(*gemv(192)).runs_loaded, 192.0 * 32 * 128 / 2);
  EXPECT_DOUBLE_EQ(block_graph_work(*gemv(384)).runs_loaded, 384.0 * 32 * 128);  // [128, 16]
}

TEST(TileRuns, FewRowsWalkedAlongThemAreFollowedStreams) {
  EXPECT_DOUBLE_EQ(block_graph_work(*gemv(96, 16)).runs_loaded, 0);
  EXPECT_DOUBLE_EQ(block_graph_work(*gemv(96, 32)).runs_loaded, 96.0 * 32 * 32 / 8);
}

}  // namespace
}  // namespace mj::cost
