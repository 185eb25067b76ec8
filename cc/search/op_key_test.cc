#include "cc/search/op_key.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

namespace mj::search {

using ir::Op;
using ir::OpKind;

namespace {

// A DAG over two inputs (ids 0, 1): each node is (kind, operand nodes), where operands < 0
// name inputs (-1 -> 0, -2 -> 1) and >= 0 name other nodes.
struct Node {
  OpKind kind;
  std::vector<int> operands;
};

// How many topological orders of the DAG have strictly increasing keys.
int admissible_orders(const std::vector<Node>& dag) {
  std::vector<int> order(dag.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  int admissible = 0;
  do {
    std::map<int, int> tensor_of;  // node -> tensor id in this order
    bool ok = true;
    std::optional<OpKey> last;
    for (size_t pos = 0; pos < order.size() && ok; ++pos) {
      Op op;
      op.kind = dag[order[pos]].kind;
      for (int o : dag[order[pos]].operands) {
        if (o < 0) {
          op.inputs.push_back(-o - 1);
        } else if (tensor_of.count(o)) {
          op.inputs.push_back(tensor_of[o]);
        } else {
          ok = false;  // not topological
        }
      }
      if (!ok) break;
      OpKey key = OpKey::of(op);
      if (last && !(*last < key)) ok = false;
      last = key;
      tensor_of[order[pos]] = 2 + int(pos);
    }
    admissible += ok;
  } while (std::next_permutation(order.begin(), order.end()));
  return admissible;
}

TEST(OpKey, EveryDagHasExactlyOneAdmissibleOrder) {
  // a = exp(x0), b = sqrt(x1), c = mul(a, b), d = neg(x0), e = add(c, d)
  const std::vector<Node> dag = {{OpKind::kExp, {-1}},
                                 {OpKind::kSqrt, {-2}},
                                 {OpKind::kMul, {0, 1}},
                                 {OpKind::kNeg, {-1}},
                                 {OpKind::kAdd, {2, 3}}};
  EXPECT_EQ(admissible_orders(dag), 1);
  // Independent chains: a = exp(x0), b = exp(a), c = sqrt(x1), d = sqrt(c)
  EXPECT_EQ(
      admissible_orders(
          {{OpKind::kExp, {-1}}, {OpKind::kExp, {0}}, {OpKind::kSqrt, {-2}}, {OpKind::kSqrt, {2}}}),
      1);
}

TEST(OpKey, ARecomputationIsNeverAdmissible) {
  // The same exp(x0) twice: equal keys, never strictly increasing.
  EXPECT_EQ(admissible_orders({{OpKind::kExp, {-1}}, {OpKind::kExp, {-1}}}), 0);
}

TEST(OpKey, OperandOrderDistinguishesNonCommutativeOps) {
  Op a, b;
  a.kind = b.kind = OpKind::kSub;
  a.inputs = {0, 1};
  b.inputs = {1, 0};
  EXPECT_TRUE(OpKey::of(a) < OpKey::of(b) || OpKey::of(b) < OpKey::of(a));
}

}  // namespace
}  // namespace mj::search
