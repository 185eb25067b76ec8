// Tile loads that cross more pages per iteration than the TLB maps: counted by
// block_graph_work, priced by the CPU roofline, ignored on a GPU.
#include <gtest/gtest.h>

#include <memory>

#include "cc/cost/block_graph_work.h"
#include "cc/cost/roofline.h"
#include "cc/cost/target.h"

namespace mj {
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

TEST(PageWalks, ManyStridedRunsPerIterationAreCounted) {
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

TEST(PageWalks, SameBytesCostMoreWhenThePagesOutgrowTheTlb) {
  const KernelWork wide = block_graph_work(*k_walk({2, 1, 1}, 512));
  const KernelWork narrow = block_graph_work(*k_walk({8, 8, 1}, 512));
  ASSERT_DOUBLE_EQ(wide.bytes_read, narrow.bytes_read);
  const Target cpu = Target::cpu_host();
  const double extra = kernel_time(wide, cpu).memory_s - kernel_time(narrow, cpu).memory_s;
  EXPECT_DOUBLE_EQ(extra, 4096.0 * 512 * 2 * cpu.page_walk_s / cpu.cores);
  // A GPU's tiles go through shared memory in coalesced rows; no such term there.
  const Target gpu = Target::h100();
  EXPECT_DOUBLE_EQ(kernel_time(wide, gpu).memory_s, kernel_time(narrow, gpu).memory_s);
}

TEST(PageWalks, ContiguousTilesCrossNoExtraPages) {
  // V[8,8,4096,128] walked along dim 2 in [1,1,8,128] tiles: one 4 KiB run per iteration.
  auto bg = std::make_shared<BlockGraph>(Dim3{8, 8, 1}, 512);
  const int v = bg->new_input({8, 8, 4096, 128}, DType::kF32, {0, 1, -1}, 2);
  bg->new_output(bg->accum(OpKind::kAccumSum, v), {0, 1, -1}, DType::kF32);
  const KernelWork w = block_graph_work(*bg);
  ASSERT_EQ(w.paged_loads.size(), 1u);
  EXPECT_DOUBLE_EQ(w.paged_loads[0].first, 1);
}

}  // namespace
}  // namespace mj
