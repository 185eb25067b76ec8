// Which tiles the generated CPU code reads in place and which it copies: the rule that the
// CPU code generator and the cost model both follow.
#include "cc/layout/cpu_tile_reads.h"

#include <gtest/gtest.h>

namespace mj::layout {

using ir::BlockGraph;
using ir::DType;
using ir::OpKind;

namespace {

const ir::Op& input_op(const BlockGraph& bg, int t) { return bg.ops()[bg.tensor(t).producer]; }

TEST(CpuTileReads, ContiguousAndMatrixShapes) {
  EXPECT_TRUE(tile_is_contiguous({1, 4, 8}, {2, 16, 8}));           // whole rows
  EXPECT_TRUE(tile_is_contiguous({1, 1, 8}, {2, 16, 32}));          // part of one row
  EXPECT_FALSE(tile_is_contiguous({1, 4, 8}, {2, 16, 32}));         // rows cut
  EXPECT_TRUE(matrices_lie_evenly({1, 4, 8}, {2, 16, 32}));         // one strided matrix
  EXPECT_TRUE(matrices_lie_evenly({2, 4, 8}, {2, 16, 32}));         // two, a kernel matrix apart
  EXPECT_FALSE(matrices_lie_evenly({2, 2, 4, 8}, {2, 4, 16, 32}));  // inner batch dim cut
  EXPECT_FALSE(matrices_lie_evenly({8}, {32}));
}

// A masked score tile: Q @ Kᵀ plus a mask tile, softmax-weighted sum of V. The contiguous
// Q tile and the strided K and V tiles that only products read are read in place; the mask,
// which an add reads, is copied.
TEST(CpuTileReads, TilesOnlyProductsReadStayInPlaceAndOthersAreCopied) {
  BlockGraph bg({2, 1, 1}, 4);
  const int q = bg.new_input({2, 16, 8}, DType::kF32, {0, -1, -1}, -1);     // [1, 16, 8]
  const int k = bg.new_input({2, 8, 64}, DType::kF32, {0, -1, -1}, 2);      // [1, 8, 16]
  const int v = bg.new_input({2, 64, 8}, DType::kF32, {0, -1, -1}, 1);      // [1, 16, 8]
  const int mask = bg.new_input({2, 16, 64}, DType::kF32, {0, -1, -1}, 2);  // [1, 16, 16]
  const int s = bg.binary(OpKind::kAdd, bg.matmul(q, k), mask);
  bg.new_output(
      bg.binary(OpKind::kDiv, bg.accum_exp_matmul(s, v), bg.accum(OpKind::kAccumExpSumLast, s)),
      {0, -1, -1}, DType::kF32);
  EXPECT_TRUE(cpu_reads_in_place(bg, input_op(bg, q)));
  EXPECT_TRUE(cpu_reads_in_place(bg, input_op(bg, k)));
  EXPECT_TRUE(cpu_reads_in_place(bg, input_op(bg, v)));
  EXPECT_FALSE(cpu_reads_in_place(bg, input_op(bg, mask)));
  EXPECT_TRUE(only_matmuls_read(bg, v));
  EXPECT_FALSE(only_matmuls_read(bg, mask));
}

// An online softmax's scores are its first input: the softmax reads them row by row, so a
// score tile read from the kernel tensor is copied even when nothing else reads it, while
// the same tile as V is not.
TEST(CpuTileReads, AnOnlineSoftmaxCopiesItsScoresAndReadsItsValuesInPlace) {
  BlockGraph bg({1, 1, 1}, 4);
  const int s = bg.new_input({16, 64}, DType::kF32, {-1, -1, -1}, 1);   // [16, 16]
  const int v = bg.new_input({64, 16}, DType::kF32, {-1, -1, -1}, 0);   // [16, 16]
  bg.new_output(bg.accum_exp_matmul(s, v), {-1, -1, -1}, DType::kF32);  // unnormalized
  EXPECT_FALSE(only_matmuls_read(bg, s));
  EXPECT_FALSE(cpu_reads_in_place(bg, input_op(bg, s)));
  EXPECT_TRUE(cpu_reads_in_place(bg, input_op(bg, v)));
}

// bfloat16 tiles are read in place only by products (which widen as they load); anything
// else, even one contiguous run, gets a float32 copy.
TEST(CpuTileReads, BFloat16TilesAreReadInPlaceOnlyByProducts) {
  BlockGraph bg({2, 1, 1}, 1);
  const int x = bg.new_input({4, 32}, DType::kBF16, {-1, -1, -1}, -1);  // whole, contiguous
  const int w = bg.new_input({32, 64}, DType::kBF16, {1, -1, -1}, -1);  // [32, 32], strided
  const int y = bg.new_input({4, 64}, DType::kBF16, {1, -1, -1}, -1);   // [4, 32]
  bg.new_output(bg.binary(OpKind::kAdd, bg.matmul(bg.unary(OpKind::kExp, x), w), y), {1, -1, -1},
                DType::kF32);
  EXPECT_FALSE(cpu_reads_in_place(bg, input_op(bg, x)));
  EXPECT_TRUE(cpu_reads_in_place(bg, input_op(bg, w)));
  EXPECT_FALSE(cpu_reads_in_place(bg, input_op(bg, y)));
}

// x[8, 256] @ w[256, 512]: blocks over w's columns, a loop over k. The generated matmuls
// stream w's tiles with prefetches of their own when they are wide enough for the row
// panels; x, the first operand, is not streamed so, nor is a tile read once, a tile copied
// because another op reads it, or one too narrow for the panels.
TEST(CpuTileReads, OnlyLoopWalkedWeightTilesOfWideProductsAreStreamed) {
  auto product = [](int blocks, int forloop, bool exp_of_w) {
    BlockGraph bg({blocks, 1, 1}, forloop);
    const int fmap_x = forloop > 1 ? 1 : -1, fmap_w = forloop > 1 ? 0 : -1;
    const int x = bg.new_input({8, 256}, DType::kF32, {-1, -1, -1}, fmap_x);
    const int w = bg.new_input({256, 512}, DType::kF32, {1, -1, -1}, fmap_w);
    const int weight = exp_of_w ? bg.unary(OpKind::kExp, w) : w;
    bg.new_output(bg.accum(OpKind::kAccumSum, bg.matmul(x, weight)), {1, -1, -1}, DType::kF32);
    return std::make_pair(bg, std::make_pair(x, w));
  };
  const auto [wide, wide_io] = product(4, 8, false);  // [32, 128] tiles of w
  EXPECT_TRUE(cpu_streams_weight_tile(wide, input_op(wide, wide_io.second)));
  EXPECT_FALSE(cpu_streams_weight_tile(wide, input_op(wide, wide_io.first)));
  const auto [once, once_io] = product(4, 1, false);  // [256, 128] tiles, no loop
  EXPECT_FALSE(cpu_streams_weight_tile(once, input_op(once, once_io.second)));
  const auto [narrow, narrow_io] = product(32, 8, false);  // [32, 16] tiles
  EXPECT_FALSE(cpu_streams_weight_tile(narrow, input_op(narrow, narrow_io.second)));
  const auto [copied, copied_io] = product(4, 8, true);  // exp(w) @ ...: w is copied
  EXPECT_FALSE(cpu_reads_in_place(copied, input_op(copied, copied_io.second)));
  EXPECT_FALSE(cpu_streams_weight_tile(copied, input_op(copied, copied_io.second)));
}

}  // namespace
}  // namespace mj::layout
