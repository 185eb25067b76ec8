#include "cc/search/stabilizers.h"

#include <gtest/gtest.h>

namespace mj::search {

using ir::Op;
using ir::OpKind;
using ir::ReduceKind;

namespace {

Op op_of(OpKind kind, std::vector<int> inputs) {
  Op op;
  op.kind = kind;
  op.inputs = std::move(inputs);
  return op;
}

TEST(Stabilizers, AMaxIsOnlySubtractedFromWhatItWasTakenOf) {
  // t0 = S [q, kv], t1 = V-like [q, kv] with another value, t2 = max(S) over kv.
  const int q = 0, kv = 1;
  Op max = op_of(OpKind::kReduce, {0});
  max.reduce = ReduceKind::kMax;
  max.dim = 1;
  std::vector<TensorFacts> facts = {{/*expr=*/1, {q, kv}, 0}, {/*expr=*/2, {q, kv}, 0}};
  facts.push_back(new_tensor_facts(max, /*expr=*/3, {q, kUnitClass}, facts));
  ASSERT_TRUE(facts[2].stabilizer);
  Pruner off(nullptr);  // values compare by expression id only
  EXPECT_TRUE(reads_stabilizers_only_to_subtract(op_of(OpKind::kSub, {0, 2}), facts, off));
  EXPECT_FALSE(reads_stabilizers_only_to_subtract(op_of(OpKind::kSub, {1, 2}), facts, off));
  EXPECT_FALSE(reads_stabilizers_only_to_subtract(op_of(OpKind::kAdd, {0, 2}), facts, off));
  EXPECT_FALSE(reads_stabilizers_only_to_subtract(op_of(OpKind::kNeg, {2}), facts, off));
  EXPECT_TRUE(subtracts_stabilizer(op_of(OpKind::kSub, {0, 2}), facts));
  EXPECT_TRUE(max_over_stabilized_index(max, facts[0].classes, {kv}));
  EXPECT_FALSE(max_over_stabilized_index(max, facts[0].classes, {q}));
}

TEST(Stabilizers, ExpIsOnlyTakenOfAMaxSubtractedValue) {
  const int q = 0, kv = 1;
  Op max = op_of(OpKind::kReduce, {0});
  max.reduce = ReduceKind::kMax;
  max.dim = 1;
  std::vector<TensorFacts> facts = {{/*expr=*/1, {q, kv}, 0}};
  facts.push_back(new_tensor_facts(max, /*expr=*/2, {q, kUnitClass}, facts));
  const Op shifted_op = op_of(OpKind::kSub, {0, 1});
  facts.push_back(new_tensor_facts(shifted_op, /*expr=*/1, {q, kv}, facts));
  EXPECT_FALSE(facts[0].bounded_above);
  EXPECT_TRUE(facts[2].bounded_above);
  Op scaled = op_of(OpKind::kMulScalar, {2});
  scaled.scalar = 0.125;
  facts.push_back(new_tensor_facts(scaled, /*expr=*/3, {q, kv}, facts));
  EXPECT_TRUE(facts[3].bounded_above);
  scaled.scalar = -1.0;  // -(x - max x) >= 0: not bounded above
  EXPECT_FALSE(new_tensor_facts(scaled, /*expr=*/4, {q, kv}, facts).bounded_above);

  const bool stabilized_target = false, target_with_plain_exp = true;
  EXPECT_FALSE(exp_is_stabilized(op_of(OpKind::kExp, {0}), facts, stabilized_target));
  EXPECT_TRUE(exp_is_stabilized(op_of(OpKind::kExp, {2}), facts, stabilized_target));
  EXPECT_TRUE(exp_is_stabilized(op_of(OpKind::kExp, {3}), facts, stabilized_target));
  EXPECT_TRUE(exp_is_stabilized(op_of(OpKind::kExp, {0}), facts, target_with_plain_exp));
  EXPECT_TRUE(exp_is_stabilized(op_of(OpKind::kNeg, {0}), facts, stabilized_target));
}

}  // namespace
}  // namespace mj::search
