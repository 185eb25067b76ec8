// How many steps an iteration a generated loop runs: enough for 8 rows of k in a product of
// up to 8 rows and 128 in a taller one, by a factor that divides the loop (all of it when no
// divisor reaches that); none for long enough steps, for a body without a product and for
// one whose values do not coarsen. Graphs that differ only in such cuts, or in the order of a
// kernel's arguments, share a code hash.
#include "cc/codegen/cpu/loop_steps.h"

#include <gtest/gtest.h>

#include <memory>

#include "cc/ir/hash.h"

namespace mj::codegen::cpu {
namespace {

using ir::BlockGraph;
using ir::DType;
using ir::OpKind;

// x[rows, k] @ w[k, 32], the loop walking k in `steps`.
BlockGraph product(int rows, int k, int steps) {
  BlockGraph bg({1, 1, 1}, steps);
  const int x = bg.new_input({rows, k}, DType::kF32, {-1, -1, -1}, 1);
  const int w = bg.new_input({k, 32}, DType::kF32, {-1, -1, -1}, 0);
  bg.new_output(bg.accum(OpKind::kAccumSum, bg.matmul(x, w)), {-1, -1, -1}, DType::kF32);
  return bg;
}

TEST(LoopSteps, FewRowsTakeEightRowsOfK) {
  EXPECT_EQ(step_factor(product(8, 64, 16)), 2);  // 4-row steps
  EXPECT_EQ(step_factor(product(1, 64, 64)), 8);  // 1-row steps
  EXPECT_EQ(step_factor(product(8, 64, 8)), 1);   // 8 already
  EXPECT_EQ(step_factor(product(4, 24, 6)), 2);   // 4 rows, a loop of 6
  EXPECT_EQ(step_factor(product(4, 20, 5)), 5);   // no divisor but the whole loop
}

TEST(LoopSteps, TallerProductsTakeOneHundredTwentyEight) {
  EXPECT_EQ(step_factor(product(32, 256, 32)), 16);  // 8-row steps, two iterations left
  EXPECT_EQ(step_factor(product(32, 256, 2)), 1);    // 128 already
  EXPECT_EQ(step_factor(product(32, 48, 3)), 3);     // all of k is 48 rows
}

TEST(LoopSteps, NoProductOrNoCoarseningNoFactor) {
  BlockGraph norms({1, 1, 1}, 16);
  const int x = norms.new_input({8, 64}, DType::kF32, {-1, -1, -1}, 1);
  norms.new_output(norms.accum(OpKind::kAccumRmsLast, x, 1e-6), {-1, -1, -1}, DType::kF32);
  EXPECT_EQ(step_factor(norms), 1);

  BlockGraph tiles({1, 1, 1}, 16);  // a sum of whole tiles beside the product
  const int t = tiles.new_input({8, 64}, DType::kF32, {-1, -1, -1}, 1);
  const int w = tiles.new_input({64, 32}, DType::kF32, {-1, -1, -1}, 0);
  tiles.new_output(tiles.accum(OpKind::kAccumSum, tiles.matmul(t, w)), {-1, -1, -1}, DType::kF32);
  tiles.new_output(tiles.accum(OpKind::kAccumSum, t), {-1, -1, -1}, DType::kF32);
  EXPECT_EQ(step_factor(tiles), 1);
}

TEST(LoopSteps, FinerCutsOfKShareACodeHash) {
  auto kernel = [](int steps) {
    ir::KernelGraph g;
    const int x = g.new_input({8, 64}, DType::kF32);
    const int w = g.new_input({64, 32}, DType::kF32);
    g.mark_output(g.customized({x, w}, std::make_shared<BlockGraph>(product(8, 64, steps)))[0]);
    return g;
  };
  EXPECT_NE(ir::graph_hash(kernel(16)), ir::graph_hash(kernel(8)));
  EXPECT_EQ(cpu_code_hash(kernel(16)), cpu_code_hash(kernel(8)));
  EXPECT_EQ(cpu_code_hash(kernel(64)), cpu_code_hash(kernel(8)));
  EXPECT_NE(cpu_code_hash(kernel(4)), cpu_code_hash(kernel(8)));
  EXPECT_EQ(loop_form(product(8, 64, 16)).forloop_range(), 8);
}

// a - b over two [8, 64] kernel inputs; `swapped` lists them as (b, a) and reads them back in
// the block graph's own order.
ir::KernelGraph difference(bool swapped, bool reversed) {
  ir::KernelGraph g;
  const int a = g.new_input({8, 64}, DType::kF32);
  const int b = g.new_input({8, 64}, DType::kF32);
  auto bg = std::make_shared<BlockGraph>(ir::Dim3{2, 1, 1}, 1);
  const int first = bg->new_input({8, 64}, DType::kF32, {0, -1, -1}, -1);
  const int second = bg->new_input({8, 64}, DType::kF32, {0, -1, -1}, -1);
  // Argument i of the kernel is kernel tensor args[i]; the block graph computes x - y.
  const int x = swapped ? second : first, y = swapped ? first : second;
  bg->new_output(reversed ? bg->binary(OpKind::kSub, y, x) : bg->binary(OpKind::kSub, x, y),
                 {0, -1, -1}, DType::kF32);
  const std::vector<int> args = swapped ? std::vector<int>{b, a} : std::vector<int>{a, b};
  g.mark_output(g.customized(args, bg)[0]);
  return g;
}

TEST(LoopSteps, PermutedKernelArgumentsShareACodeHash) {
  const ir::KernelGraph plain = difference(false, false);
  const ir::KernelGraph permuted = difference(true, false);  // (b, a), reading a - b
  EXPECT_NE(ir::graph_hash(plain), ir::graph_hash(permuted));
  EXPECT_EQ(cpu_code_hash(plain), cpu_code_hash(permuted));
  // b - a is another program, in either argument order.
  EXPECT_NE(cpu_code_hash(plain), cpu_code_hash(difference(false, true)));
  EXPECT_NE(cpu_code_hash(plain), cpu_code_hash(difference(true, true)));
}

}  // namespace
}  // namespace mj::codegen::cpu
