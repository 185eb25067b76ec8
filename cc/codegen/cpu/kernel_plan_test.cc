// What the CPU generator decides before writing code: passes, buffers, tiles read in place,
// matmuls that add into their accumulator, shared running maxes.
#include <gtest/gtest.h>

#include <algorithm>

#include "cc/codegen/cpu/generate.h"
#include "cc/codegen/cpu/kernel_plan.h"
#include "cc/ir/error.h"

namespace mj::codegen::cpu {

using ir::BlockGraph;
using ir::DType;
using ir::IrError;
using ir::OpKind;

namespace {

int op_of(const BlockGraph& g, int t) { return g.tensor(t).producer; }

// rms_norm(X)·g @ W as the paper fuses it: the matmul accumulates over the loop, the norm is
// divided out in the epilogue.
struct RmsNormLinear {
  BlockGraph bg{{3, 1, 1}, 4};
  int x, g, w, mm, acc, mean_sq, out;
  RmsNormLinear() {
    x = bg.new_input({2, 16}, DType::kF32, {-1, -1, -1}, 1);
    g = bg.new_input({16}, DType::kF32, {-1, -1, -1}, 0);
    w = bg.new_input({16, 12}, DType::kF32, {1, -1, -1}, 0);
    mm = bg.matmul(bg.binary(OpKind::kMul, x, g), w);
    acc = bg.accum(OpKind::kAccumSum, mm);
    mean_sq = bg.accum(OpKind::kAccumMeanLast, bg.unary(OpKind::kSquare, x));
    const int rms = bg.unary(OpKind::kSqrt, bg.unary(OpKind::kAddScalar, mean_sq, 1e-6));
    out = bg.binary(OpKind::kDiv, acc, rms);
    bg.new_output(out, {1, -1, -1}, DType::kF32);
  }
};

TEST(KernelPlan, BodyMatmulAddsIntoItsAccumulator) {
  RmsNormLinear f;
  const KernelPlan plan = plan_kernel(f.bg);
  EXPECT_TRUE(plan.matmul_adds_into_accum[op_of(f.bg, f.mm)]);
  // The accumulator heads the epilogue pass acc / rms, so all three share out's buffer.
  EXPECT_EQ(plan.buffer_of[f.mm], f.out);
  EXPECT_EQ(plan.buffer_of[f.acc], f.out);
  EXPECT_EQ(plan.arena_offset[f.acc], -1);
  EXPECT_GE(plan.arena_offset[f.out], 0);
}

TEST(KernelPlan, PassesEndAtTheirLastMemberAndIntermediatesHaveNoBuffer) {
  RmsNormLinear f;
  const KernelPlan plan = plan_kernel(f.bg);
  const int mean_op = op_of(f.bg, f.mean_sq);
  const int add_eps = mean_op + 1, sqrt_op = mean_op + 2;
  EXPECT_EQ(plan.pass_ending_at[sqrt_op], (std::vector<int>{mean_op, add_eps, sqrt_op}));
  EXPECT_TRUE(plan.pass_ending_at[add_eps].empty());
  EXPECT_EQ(plan.buffer_of[f.bg.ops()[add_eps].outputs[0]], -1);
  EXPECT_EQ(plan.buffer_of[f.mean_sq], f.bg.ops()[sqrt_op].outputs[0]);
}

TEST(KernelPlan, Float32TilesAreReadInPlaceWhenContiguousOrStridedMatmulOperands) {
  RmsNormLinear f;
  const KernelPlan plan = plan_kernel(f.bg);
  EXPECT_FALSE(plan.read_in_place[f.x]);  // [2, 4] of [2, 16]: rows 16 apart, read by a mul
  EXPECT_TRUE(plan.read_in_place[f.g]);   // [4] of [16]
  EXPECT_EQ(plan.row_stride[f.g], 4);
  // [4, 4] of [16, 12], read only by the matmul: in place, rows 12 floats apart; the next
  // iteration's tile is 4 rows further on.
  EXPECT_TRUE(plan.read_in_place[f.w]);
  EXPECT_EQ(plan.row_stride[f.w], 12);
  EXPECT_EQ(plan.next_tile_offset[f.w], 4 * 12);
  EXPECT_EQ(plan.block_group, 1);  // 3 blocks: too few to group
  BlockGraph rows({4, 1, 1}, 1);
  const int whole_rows = rows.new_input({8, 6}, DType::kF32, {0, -1, -1}, -1);
  const int half = rows.new_input({8, 6}, DType::kBF16, {0, -1, -1}, -1);
  rows.new_output(rows.binary(OpKind::kAdd, whole_rows, half), {0, -1, -1}, DType::kF32);
  const KernelPlan p = plan_kernel(rows);
  EXPECT_TRUE(p.read_in_place[whole_rows]);
  EXPECT_FALSE(p.read_in_place[half]);  // bf16 converts on load
}

// A bfloat16 matrix that only matmuls read stays where it lies, as their A or their B (the
// products widen it as they load it); one that an elementwise op reads is converted.
TEST(KernelPlan, Bfloat16TilesAreReadInPlaceWhenOnlyMatmulsReadThem) {
  BlockGraph bg{{2, 1, 1}, 2};
  const int x = bg.new_input({4, 16}, DType::kBF16, {-1, -1, -1}, 1);  // tiles [4, 8]
  const int w = bg.new_input({16, 12}, DType::kBF16, {1, -1, -1}, 0);  // tiles [8, 6]
  const int bias = bg.new_input({4, 12}, DType::kBF16, {1, -1, -1}, -1);
  const int acc = bg.accum(OpKind::kAccumSum, bg.matmul(x, w));
  bg.new_output(bg.binary(OpKind::kAdd, acc, bias), {1, -1, -1}, DType::kF32);
  const KernelPlan plan = plan_kernel(bg);
  EXPECT_TRUE(plan.read_in_place[w]);
  EXPECT_EQ(plan.row_stride[w], 12);
  EXPECT_TRUE(plan.read_in_place[x]);
  EXPECT_EQ(plan.row_stride[x], 16);
  EXPECT_FALSE(plan.read_in_place[bias]);
}

// A GQA block's V tile holds both heads and a slice of the keys: [2, 8, 4] of [2, 32, 4].
// Its matrices lie one kernel matrix apart, so the online softmax's product reads it in
// place (rows 4 floats apart, matrices 32 * 4); the score tile, which the softmax reads row
// by row, and a V tile whose inner batch dim is cut are copied.
TEST(KernelPlan, BatchedTilesWithCutRowsAreReadInPlaceByTheSoftmaxProduct) {
  BlockGraph bg({4, 1, 1}, 4);
  const int s = bg.new_input({2, 16, 32}, DType::kF32, {1, -1, -1}, 2);  // [2, 4, 8]
  const int v = bg.new_input({2, 32, 4}, DType::kF32, {-1, -1, -1}, 1);  // [2, 8, 4]
  const int o = bg.accum_exp_matmul(s, v);
  bg.new_output(bg.binary(OpKind::kDiv, o, bg.accum(OpKind::kAccumExpSumLast, s)), {1, -1, -1},
                DType::kF32);
  const KernelPlan plan = plan_kernel(bg);
  EXPECT_TRUE(plan.read_in_place[v]);
  EXPECT_EQ(plan.row_stride[v], 4);
  EXPECT_EQ(plan.matrix_stride[v], 32 * 4);
  EXPECT_EQ(plan.next_iteration_offset[v], 8 * 4);
  EXPECT_EQ(plan.next_copy_offset[v], 0);  // the matmul prefetches it
  EXPECT_FALSE(plan.read_in_place[s]);
  EXPECT_EQ(plan.matrix_stride[s], 4 * 8);  // its arena copy
  EXPECT_EQ(plan.next_copy_offset[s], 8);   // whose copy prefetches the next 8 columns

  BlockGraph cut({2, 1, 1}, 2);
  const int x = cut.new_input({2, 3, 4, 8}, DType::kF32, {-1, -1, -1}, 3);  // [2, 3, 4, 4]
  const int w = cut.new_input({2, 6, 8, 4}, DType::kF32, {1, -1, -1}, 2);   // [2, 3, 4, 4]
  cut.new_output(cut.accum(OpKind::kAccumSum, cut.matmul(x, w)), {1, -1, -1}, DType::kF32);
  const KernelPlan cut_plan = plan_kernel(cut);
  EXPECT_FALSE(cut_plan.read_in_place[w]);  // its batch's inner dim is cut
  EXPECT_EQ(cut_plan.next_copy_offset[w], 4 * 4);

  BlockGraph once({2, 1, 1}, 1);  // no next iteration to prefetch
  const int y = once.new_input({2, 16, 32}, DType::kF32, {1, -1, -1}, 2);
  once.new_output(once.accum(OpKind::kAccumExpSumLast, y), {1, -1, -1}, DType::kF32);
  const KernelPlan once_plan = plan_kernel(once);
  EXPECT_FALSE(once_plan.read_in_place[y]);
  EXPECT_EQ(once_plan.next_copy_offset[y], 0);
}

// Blocks of 4 columns of a 64-column W: short runs, so blocks run in groups that read W in
// 4 * 4 = 16-column runs, and the matmul (its A does not depend on the block) runs once per
// group over the group's side-by-side W tiles.
TEST(KernelPlan, BlocksWithShortRunsOfAStreamedInputRunInGroups) {
  BlockGraph bg{{16, 1, 1}, 2};
  const int x = bg.new_input({2, 16}, DType::kF32, {-1, -1, -1}, 1);  // tiles [2, 8]
  const int w = bg.new_input({16, 64}, DType::kF32, {1, -1, -1}, 0);  // tiles [8, 4]
  const int mm = bg.matmul(x, w);
  bg.new_output(bg.accum(OpKind::kAccumSum, mm), {1, -1, -1}, DType::kF32);
  const KernelPlan plan = plan_kernel(bg);
  EXPECT_EQ(plan.block_group, 4);  // 16 blocks, at least 4 tasks
  EXPECT_TRUE(plan.group_matmul[op_of(bg, mm)]);
  EXPECT_EQ(plan.next_tile_offset[w], 4);            // the next block's tile
  EXPECT_EQ(plan.next_iteration_offset[w], 8 * 64);  // the next iteration's
}

TEST(KernelPlan, AMatmulWhoseLeftOperandDependsOnTheBlockRunsPerBlock) {
  BlockGraph bg{{16, 1, 1}, 2};
  const int x = bg.new_input({32, 16}, DType::kF32, {0, -1, -1}, 1);  // rows split over x
  const int w = bg.new_input({16, 64}, DType::kF32, {1, -1, -1}, 0);
  const int mm = bg.matmul(bg.unary(OpKind::kRelu, x), w);
  bg.new_output(bg.accum(OpKind::kAccumSum, mm), {0, -1, -1}, DType::kF32);
  const KernelPlan plan = plan_kernel(bg);
  EXPECT_FALSE(plan.group_matmul[op_of(bg, mm)]);
}

TEST(KernelPlan, OnlineSoftmaxAccumulatorsOverOneScoreShareARunningMax) {
  BlockGraph bg({1, 1, 1}, 2);
  const int s = bg.new_input({4, 8}, DType::kF32, {-1, -1, -1}, 1);
  const int v = bg.new_input({8, 3}, DType::kF32, {-1, -1, -1}, 0);
  const int other = bg.new_input({4, 8}, DType::kF32, {-1, -1, -1}, 1);
  const int o = bg.accum_exp_matmul(s, v);
  const int l = bg.accum(OpKind::kAccumExpSumLast, s);
  const int m = bg.accum(OpKind::kAccumMaxLast, other);
  bg.new_output(bg.binary(OpKind::kDiv, o, l), {-1, -1, -1}, DType::kF32);
  bg.new_output(m, {-1, -1, -1}, DType::kF32);
  const KernelPlan plan = plan_kernel(bg);
  ASSERT_EQ(plan.softmax_groups.size(), 2u);
  EXPECT_EQ(plan.softmax_groups[0].s, s);
  EXPECT_EQ(plan.softmax_groups[0].accum_ops, (std::vector<int>{op_of(bg, o), op_of(bg, l)}));
  EXPECT_EQ(plan.softmax_groups[1].s, other);
  EXPECT_EQ(plan.softmax_group_of[op_of(bg, m)], 1);
}

TEST(KernelPlan, AReduceOverAnInnerDimEvaluatesTheChainThatFeedsIt) {
  // Decode's P @ V: sum over the keys of p * V. The product never gets a buffer.
  BlockGraph bg({2, 1, 1}, 4);
  const int p = bg.new_input({2, 32, 3, 1}, DType::kF32, {0, -1, -1}, 1);
  const int v = bg.new_input({2, 32, 3, 16}, DType::kF32, {0, -1, -1}, 1);
  const int product = bg.binary(OpKind::kMul, p, v);
  const int sum = bg.reduce(product, 1, ir::ReduceKind::kSum);
  bg.new_output(bg.accum(OpKind::kAccumSum, sum), {0, -1, -1}, DType::kF32);
  const KernelPlan plan = plan_kernel(bg);
  EXPECT_EQ(plan.reduce_prologue[op_of(bg, sum)], (std::vector<int>{op_of(bg, product)}));
  EXPECT_TRUE(plan.pass_ending_at[op_of(bg, product)].empty());
  EXPECT_EQ(plan.buffer_of[product], -1);
  EXPECT_EQ(plan.arena_offset[product], -1);
  // Over the last dim too, up to rows of kMaxStackRowFloats; a longer row keeps its pass.
  for (int64_t len : {int64_t{64}, kMaxStackRowFloats + 1}) {
    BlockGraph rows({1, 1, 1}, 1);
    const int x = rows.new_input({4, len}, DType::kF32, {-1, -1, -1}, -1);
    const int squared = rows.unary(OpKind::kSquare, x);
    const int row_sum = rows.reduce(squared, 1, ir::ReduceKind::kSum);
    rows.new_output(row_sum, {-1, -1, -1}, DType::kF32);
    const KernelPlan row_plan = plan_kernel(rows);
    const bool fused = len <= kMaxStackRowFloats;
    EXPECT_EQ(row_plan.reduce_prologue[op_of(rows, row_sum)].empty(), !fused) << len;
    EXPECT_EQ(row_plan.arena_offset[squared] >= 0, !fused) << len;
  }
}

TEST(KernelPlan, ArenaBuffersAreDisjointAndCacheLineAligned) {
  RmsNormLinear f;
  const KernelPlan plan = plan_kernel(f.bg);
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (size_t t = 0; t < plan.arena_offset.size(); ++t) {
    if (plan.arena_offset[t] < 0) continue;
    EXPECT_EQ(plan.arena_offset[t] % 16, 0);
    spans.emplace_back(plan.arena_offset[t],
                       plan.arena_offset[t] + element_count(f.bg.tensor(int(t)).shape));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first);
  EXPECT_LE(spans.back().second, plan.arena_floats);
}

TEST(GenerateCpuKernel, ExportsTheSymbolWithDefaultVisibility) {
  RmsNormLinear f;
  const std::string symbol = cpu_kernel_symbol(f.bg);
  EXPECT_EQ(symbol.rfind("mj_cpu_", 0), 0u);
  const std::string source = generate_cpu_kernel(f.bg, symbol);
  const std::string exported = "extern \"C\" __attribute__((visibility(\"default\"))) ";
  EXPECT_NE(
      source.find(exported + "void " + symbol + "(const MjCpuGridV1* grid, void* const* buffers)"),
      std::string::npos);
  EXPECT_NE(source.find(exported + "const int64_t* " + symbol + "_signature()"), std::string::npos);
  // A kernel library includes no XLA header: the extension's handler calls it.
  EXPECT_EQ(source.find("xla/ffi"), std::string::npos);
  EXPECT_EQ(source.find("XLA_FFI"), std::string::npos);
  EXPECT_THROW(generate_cpu_kernel(f.bg, "not an identifier"), IrError);
}

}  // namespace
}  // namespace mj::codegen::cpu
