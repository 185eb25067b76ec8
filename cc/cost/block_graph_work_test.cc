// Bytes and flops of customized ops: the exact formulas of block_graph_work.h.
#include "cc/cost/block_graph_work.h"

#include <gtest/gtest.h>

#include "cc/testing/rmsnorm_linear.h"
#include "cc/testing/row_gemv.h"

namespace mj::cost {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::OpKind;
using testing::column_split;
using testing::fused_rmsnorm_linear_block;
using testing::RmsNormLinearShape;
using testing::row_gemv_block;

namespace {

constexpr double kX = 8 * 4096 * 4, kG = 4096 * 4, kW = 4096.0 * 6144 * 4, kY = 8 * 6144 * 4;

TEST(BlockGraphWork, FusedRmsNormLinearReadsWOnceAndXOncePerBlock) {
  const KernelWork w = block_graph_work(*fused_rmsnorm_linear_block(column_split(96, 32)));
  EXPECT_EQ(w.kind, KernelKind::kCustomized);
  EXPECT_EQ(w.blocks, 96);
  // Tile bytes × 32 iterations × 96 blocks: W's tiles partition it; X and g are replicated
  // along the grid, so every block reads them whole.
  EXPECT_DOUBLE_EQ(w.bytes_read, kW + 96 * kX + 96 * kG);
  EXPECT_DOUBLE_EQ(w.bytes_read, (128 * 64 * 4 + 8 * 128 * 4 + 128 * 4) * 32.0 * 96);
  EXPECT_DOUBLE_EQ(w.bytes_written, kY);
  ASSERT_EQ(w.replicated.size(), 2u);
  EXPECT_DOUBLE_EQ(w.replicated[0].tensor_bytes, kX);
  EXPECT_DOUBLE_EQ(w.replicated[0].reread_bytes, 95 * kX);
  EXPECT_DOUBLE_EQ(w.replicated[1].tensor_bytes, kG);
  EXPECT_DOUBLE_EQ(w.replicated[1].reread_bytes, 95 * kG);
}

TEST(BlockGraphWork, FlopsCountBodyOpsPerIterationAndEpilogueOpsOnce) {
  const KernelWork w = block_graph_work(*fused_rmsnorm_linear_block(column_split(96, 32)));
  // Per block and iteration: mul x·g [8,128], matmul 2·8·64·128, accum_sum [8,64],
  // square [8,128], accum_mean_last over [8,128]. Epilogue: add_scalar and sqrt on [8,1],
  // div on [8,64].
  const double body = 1024 + 2.0 * 8 * 64 * 128 + 512 + 1024 + 1024;
  const double epilogue = 8 + 8 + 512;
  EXPECT_DOUBLE_EQ(w.flops, 96 * (32 * body + epilogue));
  EXPECT_DOUBLE_EQ(w.low_precision_matmul_flops, 0);  // f32 tiles
}

// X's tiles [8, 128] cut its rows and an elementwise op reads them: the CPU code copies them.
// W's strided tiles, which only the matmul reads, and g's contiguous ones are read in place.
TEST(BlockGraphWork, CountsTheBytesOfTilesTheCpuCodeCopies) {
  const KernelWork w = block_graph_work(*fused_rmsnorm_linear_block(column_split(96, 32)));
  EXPECT_DOUBLE_EQ(w.copied_tile_bytes, 96 * kX);
}

TEST(BlockGraphWork, ReplicatingWAcrossAGridAxisReadsItOncePerRowBlock) {
  const KernelWork w =
      block_graph_work(*fused_rmsnorm_linear_block(column_split(96, 32, /*row_blocks=*/2)));
  EXPECT_EQ(w.blocks, 192);
  EXPECT_DOUBLE_EQ(w.bytes_read, 2 * kW + 96 * kX + 192 * kG);
  EXPECT_DOUBLE_EQ(w.bytes_written, kY);
}

TEST(BlockGraphWork, LoopInvariantTileIsReadOncePerBlock) {
  auto bg = std::make_shared<BlockGraph>(Dim3{4, 1, 1}, 8);
  const int a = bg->new_input({16, 32}, DType::kF32, {0, -1, -1}, 1);  // body
  const int b = bg->new_input({1, 4}, DType::kF32, {-1, -1, -1}, -1);  // invariant [1, 4]
  const int s = bg->accum(OpKind::kAccumSumLast, a);                   // [4, 1]
  bg->new_output(bg->binary(OpKind::kMul, s, b), {0, -1, -1}, DType::kF32);
  const KernelWork w = block_graph_work(*bg);
  EXPECT_DOUBLE_EQ(w.bytes_read, 16 * 32 * 4 + 4 * (4 * 4));
  EXPECT_DOUBLE_EQ(w.bytes_written, 16 * 4 * 4);
  // accum_sum_last over a [4, 4] tile per iteration; the [4, 4] product once.
  EXPECT_DOUBLE_EQ(w.flops, 4 * (8 * 16 + 16));
  ASSERT_EQ(w.replicated.size(), 1u);
  EXPECT_DOUBLE_EQ(w.replicated[0].reread_bytes, 3 * 16);
}

TEST(BlockGraphWork, CutRowBytesCountMainStreamsWalkedAlongTheirRows) {
  // w's rows walked 16 values at a time: all of w is read in pieces of rows
  EXPECT_DOUBLE_EQ(block_graph_work(*row_gemv_block(4)).cut_row_bytes, 256 * 64 * 4);
  // whole rows per block, no loop: nothing
  EXPECT_DOUBLE_EQ(block_graph_work(*row_gemv_block(1)).cut_row_bytes, 0);
  // x[8, 4096] is walked along its rows, but is 11% of the kernel's reads (W is walked down
  // its rows): under kMainStreamShare, like a GEMV's activation read from the cache
  const KernelWork w = block_graph_work(*fused_rmsnorm_linear_block(column_split(96, 32)));
  EXPECT_LT(96 * kX, kMainStreamShare * w.bytes_read);
  EXPECT_DOUBLE_EQ(w.cut_row_bytes, 0);
}

TEST(BlockGraphWork, ConcatsCopyTheirResultsOnChipEveryTimeTheyRun) {
  // LoRA's one-kernel form: [W | B] concatenated in the loop (body, 8 iterations), and a
  // loop-invariant concat of two bf16 tiles (once per block, copied as float32).
  auto bg = std::make_shared<BlockGraph>(Dim3{4, 1, 1}, 8);
  const int w = bg->new_input({32, 16}, DType::kF32, {1, -1, -1}, 0);
  const int b = bg->new_input({2, 16}, DType::kF32, {1, -1, -1}, -1);
  const int c = bg->new_input({1, 8}, DType::kBF16, {1, -1, -1}, -1);
  // Tiles: W [4, 4] (16 columns over 4 blocks, 32 rows over 8 iterations), B [2, 4], C [1, 2].
  const int stacked = bg->concat(w, b, 0);  // [6, 4], body
  const int doubled = bg->concat(c, c, 1);  // [1, 4], invariant
  const int product = bg->binary(OpKind::kMul, stacked, doubled);
  bg->new_output(bg->accum(OpKind::kAccumSum, product), {1, -1, -1}, DType::kF32);
  EXPECT_DOUBLE_EQ(block_graph_work(*bg).on_chip_copy_bytes,
                   2 * (6 * 4 * 4 * 8 * 4 + 1 * 4 * 4 * 4));
  // no concat, nothing copied
  EXPECT_DOUBLE_EQ(
      block_graph_work(*fused_rmsnorm_linear_block(column_split(96, 32))).on_chip_copy_bytes, 0);
}

// Decode attention's Q[4, 128] @ K[128, 4096] over 16 steps of 256 keys, scaled either on
// Q's tile (invariant, once) or on each K tile in the loop, which the CPU code then writes to
// its arena for the product to read back.
KernelWork scaled_scores(bool scale_k) {
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 16);
  const int q = bg->new_input({2, 4, 128}, DType::kF32, {0, -1, -1}, -1);
  const int k = bg->new_input({2, 128, 4096}, DType::kF32, {0, -1, -1}, 2);
  const int scores = scale_k ? bg->matmul(q, bg->unary(OpKind::kMulScalar, k, 0.125))
                             : bg->matmul(bg->unary(OpKind::kMulScalar, q, 0.125), k);
  bg->new_output(bg->accum(OpKind::kAccumMaxLast, scores), {0, -1, -1}, DType::kF32);
  return block_graph_work(*bg);
}

TEST(BlockGraphWork, BodyPassesFromTheMainStreamToAProductCountTheirArenaBytes) {
  // K's [1, 128, 256] tiles: written and read back, every iteration of both blocks
  EXPECT_DOUBLE_EQ(scaled_scores(true).arena_pass_bytes, 2 * (128 * 256 * 4) * 16 * 2.0);
  // the scaled Q tile is loop-invariant
  EXPECT_DOUBLE_EQ(scaled_scores(false).arena_pass_bytes, 0);
  // RMSNorm's x·g [8, 128] per step feeds the product, but x is 11% of the kernel's reads
  EXPECT_DOUBLE_EQ(
      block_graph_work(*fused_rmsnorm_linear_block(column_split(96, 32))).arena_pass_bytes, 0);
}

TEST(BlockGraphWork, LowPrecisionTilesAreReadAtTheirStorageWidth) {
  RmsNormLinearShape s;
  s.dtype = DType::kBF16;
  const KernelWork w = block_graph_work(*fused_rmsnorm_linear_block(column_split(96, 32, 1, s)));
  EXPECT_DOUBLE_EQ(w.bytes_read, (kW + 96 * kX + 96 * kG) / 2);
  EXPECT_DOUBLE_EQ(w.bytes_written, kY / 2);
  EXPECT_DOUBLE_EQ(w.low_precision_matmul_flops, 96 * 32 * 2.0 * 8 * 64 * 128);
}

// x[m, 256] @ w[256, 256] over 2 blocks of w's columns, k in 4 steps of 64: both tiles are
// read in place (only the matmul reads them, rows lying evenly).
KernelWork plain_product(int64_t m, DType x_dtype, DType w_dtype) {
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 4);
  const int x = bg->new_input({m, 256}, x_dtype, {-1, -1, -1}, 1);
  const int w = bg->new_input({256, 256}, w_dtype, {1, -1, -1}, 0);
  bg->new_output(bg->accum(OpKind::kAccumSum, bg->matmul(x, w)), {1, -1, -1}, DType::kF32);
  return block_graph_work(*bg);
}

TEST(BlockGraphWork, ProductsWithABfloat16WeightAreCountedByHowAIsHeld) {
  const double flops = 2.0 * 64 * 64 * 128 * 4 * 2;  // [64, 64] @ [64, 128], 4 steps, 2 blocks
  const KernelWork both = plain_product(64, DType::kBF16, DType::kBF16);
  EXPECT_DOUBLE_EQ(both.bf16_weight_matmul_flops, flops);
  EXPECT_DOUBLE_EQ(both.f32_bf16_weight_matmul_flops, 0);
  ASSERT_EQ(both.matmul_tiles.size(), 1u);
  EXPECT_TRUE(both.matmul_tiles[0].bf16_weight);
  const KernelWork f32_x = plain_product(64, DType::kF32, DType::kBF16);
  EXPECT_DOUBLE_EQ(f32_x.bf16_weight_matmul_flops, 0);
  EXPECT_DOUBLE_EQ(f32_x.f32_bf16_weight_matmul_flops, flops);
  // A float16 x is copied into the arena as float32.
  EXPECT_DOUBLE_EQ(plain_product(64, DType::kF16, DType::kBF16).f32_bf16_weight_matmul_flops,
                   flops);
  // Under 32 rows, a float32 or float16 weight: the vector path's products.
  for (const KernelWork& w :
       {plain_product(16, DType::kBF16, DType::kBF16), plain_product(64, DType::kBF16, DType::kF32),
        plain_product(64, DType::kF32, DType::kF16)}) {
    EXPECT_DOUBLE_EQ(w.bf16_weight_matmul_flops + w.f32_bf16_weight_matmul_flops, 0);
    EXPECT_FALSE(w.matmul_tiles.at(0).bf16_weight);
  }
  // The norm's output, computed, is float32 whatever the program's dtype says.
  RmsNormLinearShape s;
  s.m = 64;
  s.dtype = DType::kBF16;
  const KernelWork fused =
      block_graph_work(*fused_rmsnorm_linear_block(column_split(96, 32, 1, s)));
  EXPECT_DOUBLE_EQ(fused.f32_bf16_weight_matmul_flops, 96 * 32 * 2.0 * 64 * 64 * 128);
  EXPECT_DOUBLE_EQ(fused.bf16_weight_matmul_flops, 0);
}

}  // namespace
}  // namespace mj::cost
