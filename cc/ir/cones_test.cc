// Output cones: a program's outputs grouped by the matmuls they share, each group a program
// of its own over the inputs it reads; the cones joined back compute the original's outputs
// in its order, and a candidate that does not fit its cone is an error.
#include "cc/ir/cones.h"

#include <gtest/gtest.h>

#include "cc/ir/ir_error_matchers_for_test.h"
#include "cc/ir/print.h"

namespace mj::ir {
namespace {

// A decode step's projections: n = rms_norm(x); outputs q = n @ wq, k = n @ wk, exp(q), and
// x itself (passed through).
KernelGraph projections() {
  KernelGraph g;
  const int x = g.new_input({4, 8}, DType::kF32);
  const int wq = g.new_input({8, 16}, DType::kF32);
  const int wk = g.new_input({8, 4}, DType::kBF16);
  const int n = g.rms_norm(x, 1e-6);
  const int q = g.matmul(n, wq);
  g.mark_output(q);
  g.mark_output(g.matmul(n, wk));
  g.mark_output(g.unary(OpKind::kExp, q));
  g.mark_output(x);
  return g;
}

TEST(Cones, GroupsOutputsByTheMatmulsTheyShare) {
  const KernelGraph g = projections();
  const std::vector<OutputCone> cones = output_cones(g);
  ASSERT_EQ(cones.size(), 2u);
  // q and exp(q) share q's matmul; x, passed through, joins the first group.
  EXPECT_EQ(cones[0].outputs, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(cones[0].inputs, (std::vector<int>{0, 1}));
  EXPECT_EQ(cones[1].outputs, (std::vector<int>{1}));
  EXPECT_EQ(cones[1].inputs, (std::vector<int>{0, 2}));
  // Each cone recomputes the norm it needs, and holds one matmul.
  for (const OutputCone& c : cones) {
    int norms = 0, matmuls = 0;
    for (const Op& op : c.program.ops()) {
      norms += op.kind == OpKind::kRmsNorm;
      matmuls += op.kind == OpKind::kMatmul;
    }
    EXPECT_EQ(norms, 1) << to_string(c.program);
    EXPECT_EQ(matmuls, 1) << to_string(c.program);
  }
  EXPECT_EQ(cones[1].program.tensor(cones[1].program.input_ids()[1]).dtype, DType::kBF16);
}

TEST(Cones, JoiningTheConesGivesTheOriginalsOutputsInOrder) {
  const KernelGraph g = projections();
  const std::vector<OutputCone> cones = output_cones(g);
  std::vector<KernelGraph> candidates;
  for (const OutputCone& c : cones) candidates.push_back(c.program);
  const KernelGraph joined = join_cones(g, cones, candidates);
  ASSERT_EQ(joined.input_ids().size(), 3u);
  ASSERT_EQ(joined.output_ids().size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    const Tensor& want = g.tensor(g.output_ids()[k]);
    const Tensor& got = joined.tensor(joined.output_ids()[k]);
    EXPECT_EQ(got.shape, want.shape) << k;
    EXPECT_EQ(got.dtype, want.dtype) << k;
  }
  const auto kind_of = [&](size_t k) {
    return joined.ops()[joined.tensor(joined.output_ids()[k]).producer].kind;
  };
  EXPECT_EQ(kind_of(0), OpKind::kMatmul);
  EXPECT_EQ(kind_of(1), OpKind::kMatmul);
  EXPECT_EQ(kind_of(2), OpKind::kExp);
  EXPECT_EQ(kind_of(3), OpKind::kInput);
  EXPECT_EQ(joined.output_ids()[3], joined.input_ids()[0]);
}

// A cone's candidate with its norm in a kernel of its own: rows of x normed in 2 blocks, then
// the cone's matmul.
KernelGraph normed_then(const Shape& w_shape, DType w_dtype) {
  KernelGraph c;
  const int x = c.new_input({4, 8}, DType::kF32);
  const int w = c.new_input(w_shape, w_dtype);
  auto norm = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 1);
  norm->new_output(norm->rms_norm(norm->new_input({4, 8}, DType::kF32, {0, -1, -1}, -1), 1e-6),
                   {0, -1, -1}, DType::kF32);
  const int n = c.customized({x}, norm).at(0);
  c.mark_output(c.matmul(n, w));
  return c;
}

TEST(Cones, AKernelTwoConesRunOnTheSameValuesRunsOnce) {
  KernelGraph g;  // q = rms_norm(x) @ wq, k = rms_norm(x) @ wk
  const int x = g.new_input({4, 8}, DType::kF32);
  const int wq = g.new_input({8, 16}, DType::kF32);
  const int wk = g.new_input({8, 4}, DType::kF32);
  const int n = g.rms_norm(x, 1e-6);
  g.mark_output(g.matmul(n, wq));
  g.mark_output(g.matmul(n, wk));
  const std::vector<OutputCone> cones = output_cones(g);
  ASSERT_EQ(cones.size(), 2u);
  const KernelGraph joined =
      join_cones(g, cones, {normed_then({8, 16}, DType::kF32), normed_then({8, 4}, DType::kF32)});
  int kernels = 0, matmuls = 0;
  for (const Op& op : joined.ops()) {
    kernels += op.kind == OpKind::kCustomized;
    matmuls += op.kind == OpKind::kMatmul;
  }
  EXPECT_EQ(kernels, 1) << to_string(joined);
  EXPECT_EQ(matmuls, 2) << to_string(joined);
  const auto operand = [&](size_t k) {
    return joined.ops()[joined.tensor(joined.output_ids()[k]).producer].inputs.at(0);
  };
  EXPECT_EQ(operand(0), operand(1));
}

TEST(Cones, OneGroupIsNoSplit) {
  KernelGraph g;
  const int x = g.new_input({4, 8}, DType::kF32);
  const int w = g.new_input({8, 8}, DType::kF32);
  const int y = g.matmul(x, w);
  g.mark_output(y);
  g.mark_output(g.unary(OpKind::kExp, y));
  EXPECT_TRUE(output_cones(g).empty());
}

TEST(Cones, ACandidateThatDoesNotFitItsConeIsRejected) {
  const KernelGraph g = projections();
  const std::vector<OutputCone> cones = output_cones(g);
  std::vector<KernelGraph> candidates{cones[0].program, cones[0].program};
  EXPECT_IR_ERROR(join_cones(g, cones, candidates), "join_cones", "cone 1");
  KernelGraph narrow;  // the right arity, a wrong output shape
  const int x = narrow.new_input({4, 8}, DType::kF32);
  narrow.new_input({8, 4}, DType::kBF16);
  narrow.mark_output(x);
  candidates = {cones[0].program, narrow};
  EXPECT_IR_ERROR(join_cones(g, cones, candidates), "cone 1", "output 0");
  EXPECT_IR_ERROR(join_cones(g, cones, {cones[0].program}), "1 candidates for 2 cones");
}

}  // namespace
}  // namespace mj::ir
