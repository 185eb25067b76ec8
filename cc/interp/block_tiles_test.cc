// Block graphs: tiles cut by imap on each grid axis and by fmap, nested splits, invariant
// inputs, and stores by omap, each against the element positions computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "cc/interp/interp.h"
#include "cc/interp/interp_test_support.h"
#include "cc/ir/graph.h"

namespace mj::interp {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::KernelGraph;
using ir::OpKind;
using ir::Phase;
using ir::ReduceKind;
using ir::Shape;

namespace {

using interp_testing::cast_tensors;
using interp_testing::mismatch;
using interp_testing::random_tensor;

using Ref = DenseTensor<double>;
constexpr Dim3 kNoMap{-1, -1, -1};

template <class T>
class BlockTiles : public ::testing::Test {
 protected:
  std::vector<DenseTensor<T>> run(const BlockGraph& bg, const std::vector<Ref>& inputs) {
    return interpret_block_graph(bg, cast_tensors<T>(inputs), FloatDomain<T>{});
  }
  std::mt19937 rng{99};
};
using FloatTypes = ::testing::Types<double, float>;
TYPED_TEST_SUITE(BlockTiles, FloatTypes);

// Each block sums its rows; the sums land at the block's position on the stored dim.
TYPED_TEST(BlockTiles, ImapOnEachGridAxis) {
  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    Dim3 grid{1, 1, 1}, imap = kNoMap;
    grid[axis] = 3;
    imap[axis] = 0;
    BlockGraph bg(grid, 1);
    const int x = bg.new_input({6, 4}, DType::kF32, imap, -1);
    bg.new_output(bg.reduce(x, 0, ReduceKind::kSum), imap, DType::kF32);
    const Ref in = random_tensor({6, 4}, this->rng);
    Ref want{{3, 4}, {}};
    for (int b = 0; b < 3; ++b) {
      for (int c = 0; c < 4; ++c) {
        want.data.push_back(in.data[(2 * b) * 4 + c] + in.data[(2 * b + 1) * 4 + c]);
      }
    }
    const auto got = this->run(bg, {in});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(mismatch(got[0], want), "");
  }
}

// All three axes split different dims of one tensor, and the outputs are stored along a
// permutation of those dims.
TYPED_TEST(BlockTiles, ThreeAxesSplitAndStoreDifferentDims) {
  BlockGraph bg({2, 3, 2}, 1);
  // A[6, 8, 4]: x splits dim 2, y dim 0, z dim 1 -> tile [2, 4, 2].
  const int a = bg.new_input({6, 8, 4}, DType::kF32, {2, 0, 1}, -1);
  // Sum over the tile's last dim -> [2, 4, 1]; x stores along dim 2, so out is [6, 8, 2].
  bg.new_output(bg.reduce(a, 2, ReduceKind::kSum), {2, 0, 1}, DType::kF32);
  const Ref in = random_tensor({6, 8, 4}, this->rng);
  Ref want{{6, 8, 2}, {}};
  for (int r = 0; r < 6; ++r) {
    for (int c = 0; c < 8; ++c) {
      for (int bx = 0; bx < 2; ++bx) {
        const int64_t first = (r * 8 + c) * 4 + 2 * bx;
        want.data.push_back(in.data[first] + in.data[first + 1]);
      }
    }
  }
  const auto got = this->run(bg, {in});
  EXPECT_EQ(mismatch(got.at(0), want), "");
}

// fmap: iteration i reads columns [2i, 2i + 2); accum_sum adds the iterations' tiles.
TYPED_TEST(BlockTiles, FmapWalksTheLoopDim) {
  BlockGraph bg({1, 1, 1}, 4);
  const int x = bg.new_input({3, 8}, DType::kF32, kNoMap, 1);
  bg.new_output(bg.accum(OpKind::kAccumSum, x), kNoMap, DType::kF32);
  const Ref in = random_tensor({3, 8}, this->rng);
  Ref want{{3, 2}, {}};
  for (int r = 0; r < 3; ++r) {
    for (int j = 0; j < 2; ++j) {
      double s = 0;
      for (int i = 0; i < 4; ++i) s += in.data[r * 8 + 2 * i + j];
      want.data.push_back(s);
    }
  }
  EXPECT_EQ(mismatch(this->run(bg, {in}).at(0), want), "");
}

// Grid and loop split the same dim: block b takes columns [8b, 8b + 8) and the loop walks
// inside them in steps of 2.
TYPED_TEST(BlockTiles, NestedSplitOfOneDim) {
  BlockGraph bg({2, 1, 1}, 4);
  const int x = bg.new_input({3, 16}, DType::kF32, {1, -1, -1}, 1);
  EXPECT_EQ(bg.tensor(x).shape, (Shape{3, 2}));
  bg.new_output(bg.accum(OpKind::kAccumSum, x), {1, -1, -1}, DType::kF32);
  const Ref in = random_tensor({3, 16}, this->rng);
  Ref want{{3, 4}, {}};
  for (int r = 0; r < 3; ++r) {
    for (int b = 0; b < 2; ++b) {
      for (int j = 0; j < 2; ++j) {
        double s = 0;
        for (int i = 0; i < 4; ++i) s += in.data[r * 16 + 8 * b + 2 * i + j];
        want.data.push_back(s);
      }
    }
  }
  EXPECT_EQ(mismatch(this->run(bg, {in}).at(0), want), "");
}

// A replicated input (imap -1 on a split axis) and a loop-invariant one (fmap -1) used in
// the body and again in the epilogue.
TYPED_TEST(BlockTiles, ReplicatedAndInvariantInputs) {
  BlockGraph bg({2, 1, 1}, 2);
  const int x = bg.new_input({4, 6}, DType::kF32, {0, -1, -1}, 1);      // tile [2, 3]
  const int c = bg.new_input({1, 3}, DType::kF32, kNoMap, -1);          // same for everyone
  const int bias = bg.new_input({4, 1}, DType::kF32, {0, -1, -1}, -1);  // per block rows
  EXPECT_EQ(bg.tensor(c).phase, Phase::kInvariant);
  const int body = bg.binary(OpKind::kMul, bg.binary(OpKind::kMul, x, c), bias);
  const int acc = bg.accum(OpKind::kAccumSum, body);
  bg.new_output(bg.binary(OpKind::kAdd, acc, bias), {0, -1, -1}, DType::kF32);
  const Ref ix = random_tensor({4, 6}, this->rng), ic = random_tensor({1, 3}, this->rng);
  const Ref ib = random_tensor({4, 1}, this->rng);
  Ref want{{4, 3}, {}};
  for (int r = 0; r < 4; ++r) {
    for (int j = 0; j < 3; ++j) {
      double s = 0;
      for (int i = 0; i < 2; ++i) s += ix.data[r * 6 + 3 * i + j] * ic.data[j] * ib.data[r];
      want.data.push_back(s + ib.data[r]);
    }
  }
  EXPECT_EQ(mismatch(this->run(bg, {ix, ic, ib}).at(0), want), "");
}

// With forloop_range 1 a body tensor can be stored directly; two outputs keep their order.
TYPED_TEST(BlockTiles, BodyOutputsWithSingleIterationAndOutputOrder) {
  BlockGraph bg({1, 2, 1}, 1);
  const int x = bg.new_input({2, 4}, DType::kF32, {-1, 1, -1}, 0);  // tile [2, 2]
  const int e = bg.unary(OpKind::kExp, x);
  bg.new_output(bg.unary(OpKind::kNeg, x), {-1, 1, -1}, DType::kF32);
  bg.new_output(e, {-1, 0, -1}, DType::kF32);  // stacked along rows instead: [4, 2]
  const Ref in = random_tensor({2, 4}, this->rng);
  Ref want_neg{{2, 4}, {}}, want_exp{{4, 2}, {}};
  for (double v : in.data) want_neg.data.push_back(-v);
  for (int b = 0; b < 2; ++b) {
    for (int r = 0; r < 2; ++r) {
      for (int j = 0; j < 2; ++j) want_exp.data.push_back(std::exp(in.data[r * 4 + 2 * b + j]));
    }
  }
  const auto got = this->run(bg, {in});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(mismatch(got[0], want_neg), "");
  EXPECT_EQ(mismatch(got[1], want_exp), "");
}

// A customized op inside a kernel graph, followed by a kernel-level op on its output.
TYPED_TEST(BlockTiles, CustomizedOpInKernelGraph) {
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 2);
  const int a = bg->new_input({4, 6}, DType::kF32, {0, -1, -1}, 1);  // tile [2, 3]
  const int b = bg->new_input({6, 5}, DType::kF32, kNoMap, 0);       // tile [3, 5]
  bg->new_output(bg->accum(OpKind::kAccumSum, bg->matmul(a, b)), {0, -1, -1}, DType::kF32);
  KernelGraph g;
  const int ka = g.new_input({4, 6}, DType::kF32);
  const int kb = g.new_input({6, 5}, DType::kF32);
  const int prod = g.customized({ka, kb}, bg).at(0);
  g.mark_output(g.unary(OpKind::kMulScalar, prod, 2.0));
  const Ref ia = random_tensor({4, 6}, this->rng), ib = random_tensor({6, 5}, this->rng);
  Ref want{{4, 5}, {}};
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 5; ++c) {
      double s = 0;
      for (int k = 0; k < 6; ++k) s += ia.data[r * 6 + k] * ib.data[k * 5 + c];
      want.data.push_back(2.0 * s);
    }
  }
  const auto got = interpret(g, cast_tensors<TypeParam>({ia, ib}), FloatDomain<TypeParam>{});
  EXPECT_EQ(mismatch(got.at(0), want), "");
}

}  // namespace
}  // namespace mj::interp
