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

}  // namespace
}  // namespace mj::search
