// Canonical hashes: equal for the same DAG built in another order, different for any change.
#include <gtest/gtest.h>

#include <set>

#include "cc/ir/hash.h"

namespace mj::ir {
namespace {

// Every attribute a test may vary; the defaults give the fused RMSNorm + Linear graph.
struct Variant {
  Dim3 grid{96, 1, 1};
  int forloop_range = 32;
  Dim3 w_imap{1, -1, -1};
  int x_fmap = 1;
  Dim3 omap{1, -1, -1};
  double eps = 1e-6;
  DType out_dtype = DType::kF32;
  DType x_dtype = DType::kF32;
  bool square_before_matmul = false;  // order of independent block ops
};

std::shared_ptr<BlockGraph> fused_block_graph(const Variant& v) {
  auto bg = std::make_shared<BlockGraph>(v.grid, v.forloop_range);
  const int x = bg->new_input({8, 4096}, v.x_dtype, {-1, -1, -1}, v.x_fmap);
  const int g = bg->new_input({4096}, DType::kF32, {-1, -1, -1}, 0);
  const int w = bg->new_input({4096, 6144}, DType::kF32, v.w_imap, 0);
  int ms = -1;
  if (v.square_before_matmul) ms = bg->accum(OpKind::kAccumMeanLast, bg->unary(OpKind::kSquare, x));
  const int acc = bg->accum(OpKind::kAccumSum, bg->matmul(bg->binary(OpKind::kMul, x, g), w));
  if (!v.square_before_matmul)
    ms = bg->accum(OpKind::kAccumMeanLast, bg->unary(OpKind::kSquare, x));
  const int den = bg->unary(OpKind::kSqrt, bg->unary(OpKind::kAddScalar, ms, v.eps));
  bg->new_output(bg->binary(OpKind::kDiv, acc, den), v.omap, v.out_dtype);
  return bg;
}

std::string fused_hash(const Variant& v) {
  KernelGraph k;
  const int x = k.new_input({8, 4096}, v.x_dtype);
  const int g = k.new_input({4096}, DType::kF32);
  const int w = k.new_input({4096, 6144}, DType::kF32);
  const std::vector<int> y = k.customized({x, g, w}, fused_block_graph(v));
  k.mark_output(y[0]);
  return graph_hash(k);
}

TEST(Hash, FormatIs32HexChars) {
  const std::string h = fused_hash({});
  ASSERT_EQ(h.size(), 32u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(h, fused_hash({}));  // deterministic
}

TEST(Hash, IndependentOfTheOrderOfIndependentOps) {
  Variant swapped;
  swapped.square_before_matmul = true;
  EXPECT_EQ(fused_hash({}), fused_hash(swapped));
  EXPECT_EQ(block_graph_hash(*fused_block_graph({})),
            block_graph_hash(*fused_block_graph(swapped)));

  // Kernel level: two independent chains appended in either order.
  auto build = [](bool exp_first) {
    KernelGraph k;
    const int a = k.new_input({4, 8}, DType::kF32);
    const int b = k.new_input({8, 2}, DType::kF32);
    int e, s;
    if (exp_first) {
      e = k.unary(OpKind::kExp, a);
      s = k.unary(OpKind::kSqrt, b);
    } else {
      s = k.unary(OpKind::kSqrt, b);
      e = k.unary(OpKind::kExp, a);
    }
    k.mark_output(k.matmul(e, s));
    return graph_hash(k);
  };
  EXPECT_EQ(build(true), build(false));
}

TEST(Hash, EveryAttributeChangesIt) {
  std::vector<Variant> variants(1);
  auto add = [&](auto edit) {
    Variant v;
    edit(v);
    variants.push_back(v);
  };
  add([](Variant& v) { v.eps = 1e-5; });
  add([](Variant& v) {
    v.w_imap = {-1, -1, -1};
    v.grid = {1, 1, 1};
    v.omap = {-1, -1, -1};
  });
  add([](Variant& v) { v.grid = {48, 1, 1}; });
  add([](Variant& v) {
    v.grid = {1, 96, 1};
    v.w_imap = {-1, 1, -1};
    v.omap = {-1, 1, -1};
  });
  add([](Variant& v) { v.forloop_range = 16; });
  add([](Variant& v) {
    v.x_fmap = -1;
    v.forloop_range = 1;
  });
  add([](Variant& v) { v.forloop_range = 1; });
  add([](Variant& v) { v.out_dtype = DType::kBF16; });
  add([](Variant& v) { v.x_dtype = DType::kF16; });
  std::set<std::string> hashes;
  for (const Variant& v : variants) hashes.insert(fused_hash(v));
  EXPECT_EQ(hashes.size(), variants.size());
  std::set<std::string> block_hashes;
  for (const Variant& v : variants) block_hashes.insert(block_graph_hash(*fused_block_graph(v)));
  EXPECT_EQ(block_hashes.size(), variants.size());
}

TEST(Hash, FmapAndOmapDimsChangeIt) {
  auto build = [](int fmap, Dim3 omap) {
    BlockGraph bg({2, 1, 1}, 2);
    const int a = bg.new_input({8, 8}, DType::kF32, {-1, -1, -1}, fmap);
    bg.new_output(bg.accum(OpKind::kAccumSum, a), omap, DType::kF32);
    return block_graph_hash(bg);
  };
  EXPECT_NE(build(0, {0, -1, -1}), build(1, {0, -1, -1}));
  EXPECT_NE(build(0, {0, -1, -1}), build(0, {1, -1, -1}));
}

TEST(Hash, KernelAttributesAndOutputOrderChangeIt) {
  auto build = [](int variant) {
    KernelGraph k;
    const int a = k.new_input({4, 8}, DType::kF32);
    const int b = k.new_input({4, 8}, variant == 1 ? DType::kBF16 : DType::kF32);
    const int n = k.rms_norm(a, variant == 2 ? 1e-5 : 1e-6);
    const int r =
        k.reduce(b, variant == 3 ? 0 : 1, variant == 4 ? ReduceKind::kMax : ReduceKind::kSum);
    const int s = k.unary(OpKind::kMulScalar, a, variant == 5 ? 0.5 : 0.25);
    const int c = variant == 6 ? k.binary(OpKind::kSub, n, r) : k.binary(OpKind::kAdd, n, r);
    if (variant == 7) {
      k.mark_output(s);
      k.mark_output(c);
    } else {
      k.mark_output(c);
      k.mark_output(s);
    }
    if (variant == 8) k.unary(OpKind::kExp, a);  // an extra (dead) op is a different graph
    return graph_hash(k);
  };
  std::set<std::string> hashes;
  for (int v = 0; v <= 8; ++v) hashes.insert(build(v));
  EXPECT_EQ(hashes.size(), 9u);
}

TEST(Hash, InputPositionsMatter) {
  auto build = [](bool swap) {
    KernelGraph k;
    const int a = k.new_input({4, 4}, DType::kF32);
    const int b = k.new_input({4, 4}, DType::kF32);
    k.mark_output(swap ? k.binary(OpKind::kSub, b, a) : k.binary(OpKind::kSub, a, b));
    return graph_hash(k);
  };
  EXPECT_NE(build(false), build(true));
}

}  // namespace
}  // namespace mj::ir
