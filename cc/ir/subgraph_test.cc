// Cut before the first matmul of computed values, and splice a tail back: the tail's inputs
// are exactly the values that cross the cut, and splicing the tail itself gives back the
// original program.
#include "cc/ir/subgraph.h"

#include <gtest/gtest.h>

#include <memory>

#include "cc/ir/hash.h"
#include "cc/ir/ir_error_matchers_for_test.h"
#include "cc/ir/print.h"

namespace mj::ir {
namespace {

// exp(rms_norm(x) @ w) * rms_norm(x) + v: the cut is at the matmul; rms_norm(x), w and v
// cross it (in the order the tail first reads them).
KernelGraph normed_linear() {
  KernelGraph g;
  const int x = g.new_input({4, 8}, DType::kF32);
  const int w = g.new_input({8, 8}, DType::kBF16);
  const int v = g.new_input({4, 8}, DType::kF32);
  const int n = g.rms_norm(x, 1e-6);
  const int y = g.unary(OpKind::kExp, g.matmul(n, w));
  g.mark_output(g.binary(OpKind::kAdd, g.binary(OpKind::kMul, y, n), v));
  return g;
}

TEST(Subgraph, SplitsBeforeTheFirstMatmulOfComputedValues) {
  const KernelGraph g = normed_linear();
  const auto split = split_before_first_computed_matmul(g);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->cut_tensor, 4);
  EXPECT_EQ(split->boundary, (std::vector<int>{3, 1, 2}));
  ASSERT_EQ(split->tail.input_ids().size(), 3u);
  EXPECT_EQ(split->tail.tensor(split->tail.input_ids()[1]).dtype, DType::kBF16);
  EXPECT_EQ(split->prefix.ops().size(), 4u);  // three inputs and the norm
  EXPECT_EQ(split->tail.output_ids().size(), 1u);
  // The tail spliced back is the original program, op for op.
  const KernelGraph again = splice(*split, split->tail);
  EXPECT_EQ(graph_hash(again), graph_hash(g));
  EXPECT_EQ(to_string(again), to_string(g));
}

TEST(Subgraph, SpliceTakesAnotherTail) {
  const KernelGraph g = normed_linear();
  const auto split = split_before_first_computed_matmul(g);
  ASSERT_TRUE(split.has_value());
  // A tail that computes something else over the same inputs: the splice does not judge it
  // (the verifier does), it only puts it behind the prefix.
  KernelGraph other;
  const int n = other.new_input({4, 8}, DType::kF32);
  const int w = other.new_input({8, 8}, DType::kBF16);
  const int v = other.new_input({4, 8}, DType::kF32);
  other.mark_output(other.binary(OpKind::kSub, other.matmul(n, w), v));
  const KernelGraph spliced = splice(*split, other);
  EXPECT_EQ(spliced.input_ids().size(), 3u);
  EXPECT_EQ(spliced.ops()[spliced.tensor(spliced.output_ids()[0]).producer].kind, OpKind::kSub);
  EXPECT_EQ(spliced.ops()[3].kind, OpKind::kRmsNorm);
  KernelGraph two_inputs;
  two_inputs.mark_output(two_inputs.new_input({4, 8}, DType::kF32));
  two_inputs.new_input({4, 8}, DType::kF32);
  EXPECT_IR_ERROR(splice(*split, two_inputs), "splice", "2 inputs", "the tail 3");
}

TEST(Subgraph, ThePrefixIsAProgramOfItsOwn) {
  const KernelGraph g = normed_linear();
  const auto split = split_before_first_computed_matmul(g);
  ASSERT_TRUE(split.has_value());
  const KernelGraph prefix = prefix_program(*split);
  EXPECT_EQ(prefix.input_ids().size(), 3u);
  // Of the boundary (the norm, w, v), only the norm is computed: the one output.
  ASSERT_EQ(prefix.output_ids().size(), 1u);
  EXPECT_EQ(prefix.ops()[prefix.tensor(prefix.output_ids()[0]).producer].kind, OpKind::kRmsNorm);
  // Both parts spliced back as they are give the original program, op for op.
  const KernelGraph again = splice_parts(*split, prefix, split->tail);
  EXPECT_EQ(to_string(again), to_string(g));
  EXPECT_EQ(graph_hash(again), graph_hash(g));
}

TEST(Subgraph, SplicePartsTakesAnotherPrefix) {
  const KernelGraph g = normed_linear();
  const auto split = split_before_first_computed_matmul(g);
  ASSERT_TRUE(split.has_value());
  KernelGraph other;  // the norm written out: x * rsqrt(mean(x^2) + eps)
  const int x = other.new_input({4, 8}, DType::kF32);
  other.new_input({8, 8}, DType::kBF16);
  other.new_input({4, 8}, DType::kF32);
  const int ms = other.reduce(other.unary(OpKind::kSquare, x), 1, ReduceKind::kMean);
  other.mark_output(other.binary(
      OpKind::kMul, x, other.unary(OpKind::kRsqrt, other.unary(OpKind::kAddScalar, ms, 1e-6))));
  const KernelGraph spliced = splice_parts(*split, other, split->tail);
  EXPECT_EQ(spliced.input_ids().size(), 3u);
  EXPECT_EQ(spliced.output_ids().size(), 1u);
  EXPECT_EQ(spliced.ops()[spliced.tensor(spliced.output_ids()[0]).producer].kind, OpKind::kAdd);

  KernelGraph wrong_shape;  // its output is [8, 8] bf16, not the norm's [4, 8] f32
  wrong_shape.new_input({4, 8}, DType::kF32);
  const int w = wrong_shape.new_input({8, 8}, DType::kBF16);
  wrong_shape.new_input({4, 8}, DType::kF32);
  wrong_shape.mark_output(wrong_shape.unary(OpKind::kExp, w));
  EXPECT_IR_ERROR(splice_parts(*split, wrong_shape, split->tail), "splice_parts", "shape");
  KernelGraph two_outputs = other;
  two_outputs.mark_output(two_outputs.input_ids()[0]);
  EXPECT_IR_ERROR(splice_parts(*split, two_outputs, split->tail), "splice_parts", "2 outputs");
}

// A residual stream: s = a + b is returned (for the next layer) and normed into a matmul.
// Outputs in the order s, then the matmul's.
KernelGraph residual_norm_linear() {
  KernelGraph g;
  const int a = g.new_input({4, 8}, DType::kF32);
  const int b = g.new_input({4, 8}, DType::kF32);
  const int w = g.new_input({8, 8}, DType::kF32);
  const int s = g.binary(OpKind::kAdd, a, b);
  const int y = g.matmul(g.rms_norm(s, 1e-6), w);
  g.mark_output(s);
  g.mark_output(y);
  return g;
}

TEST(Subgraph, AnOutputMadeBeforeTheCutComesFromThePrefix) {
  const KernelGraph g = residual_norm_linear();
  const auto split = split_before_first_computed_matmul(g);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->boundary, (std::vector<int>{4, 2}));  // the norm and w
  EXPECT_EQ(split->passed, (std::vector<int>{3}));       // the sum
  EXPECT_EQ(split->output_order, (std::vector<int>{-1, 0}));
  EXPECT_EQ(split->tail.output_ids().size(), 1u);  // the tail does not see the sum
  const KernelGraph prefix = prefix_program(*split);
  ASSERT_EQ(prefix.output_ids().size(), 2u);  // the norm (boundary), then the sum
  EXPECT_EQ(prefix.ops()[prefix.tensor(prefix.output_ids()[1]).producer].kind, OpKind::kAdd);
  // Spliced back as they are, both ways give the original program, its outputs in order.
  EXPECT_EQ(to_string(splice(*split, split->tail)), to_string(g));
  EXPECT_EQ(to_string(splice_parts(*split, prefix, split->tail)), to_string(g));
  EXPECT_EQ(graph_hash(splice_parts(*split, prefix, split->tail)), graph_hash(g));

  // An output both passed and read across the cut is made once by the prefix.
  KernelGraph both;
  const int p = both.new_input({2, 8}, DType::kF32);
  const int q = both.new_input({8, 8}, DType::kF32);
  const int r = both.unary(OpKind::kExp, p);
  both.mark_output(both.matmul(r, q));
  both.mark_output(r);
  const auto split2 = split_before_first_computed_matmul(both);
  ASSERT_TRUE(split2.has_value());
  EXPECT_EQ(split2->output_order, (std::vector<int>{0, -1}));
  EXPECT_EQ(prefix_program(*split2).output_ids().size(), 1u);
  EXPECT_EQ(to_string(splice_parts(*split2, prefix_program(*split2), split2->tail)),
            to_string(both));

  // Its output op may stand before the cut, as the frontend places it: the same split.
  KernelGraph early;
  const int e0 = early.new_input({4, 8}, DType::kF32);
  const int e1 = early.new_input({4, 8}, DType::kF32);
  const int ew = early.new_input({8, 8}, DType::kF32);
  const int es = early.binary(OpKind::kAdd, e0, e1);
  early.mark_output(es);
  early.mark_output(early.matmul(early.rms_norm(es, 1e-6), ew));
  const auto split3 = split_before_first_computed_matmul(early);
  ASSERT_TRUE(split3.has_value());
  EXPECT_EQ(split3->passed, (std::vector<int>{3}));
  EXPECT_EQ(split3->output_order, (std::vector<int>{-1, 0}));
  EXPECT_EQ(split3->prefix.output_ids().size(), 0u);
  // Outputs come out in the original's order (the output ops now after the tail's ops).
  EXPECT_EQ(to_string(splice_parts(*split3, prefix_program(*split3), split3->tail)), to_string(g));

  // A prefix candidate without the passed output is refused.
  KernelGraph short_prefix;
  const int x = short_prefix.new_input({4, 8}, DType::kF32);
  const int y = short_prefix.new_input({4, 8}, DType::kF32);
  short_prefix.new_input({8, 8}, DType::kF32);
  short_prefix.mark_output(short_prefix.rms_norm(short_prefix.binary(OpKind::kAdd, x, y), 1e-6));
  EXPECT_IR_ERROR(splice_parts(*split, short_prefix, split->tail), "splice_parts", "1 outputs",
                  "the prefix program 2");
}

TEST(Subgraph, NothingToSplit) {
  KernelGraph plain;  // the matmul reads inputs only
  const int x = plain.new_input({2, 8}, DType::kF32);
  const int w = plain.new_input({8, 4}, DType::kF32);
  plain.mark_output(plain.unary(OpKind::kExp, plain.matmul(x, w)));
  EXPECT_FALSE(split_before_first_computed_matmul(plain).has_value());

  KernelGraph only_before;  // every output made before the cut: the tail would make none
  const int a = only_before.new_input({2, 8}, DType::kF32);
  const int b = only_before.new_input({8, 8}, DType::kF32);
  const int e = only_before.unary(OpKind::kExp, a);
  only_before.matmul(e, b);
  only_before.mark_output(e);
  EXPECT_FALSE(split_before_first_computed_matmul(only_before).has_value());

  EXPECT_FALSE(split_before_first_computed_matmul(KernelGraph()).has_value());
}

}  // namespace
}  // namespace mj::ir
