#pragma once
// The term language of abstract expressions (Mirage §4.3): what a tensor computes from the
// kernel inputs, with every index forgotten. A tile is the same variable as its kernel tensor,
// matmul(A, B) is sum(k, A*B), and sum(n, e) sums n anonymous copies of e.
//
// Terms live in an ExprPool: a hash-consed DAG, so a subterm shared by many tensors (or by
// many candidate graphs of one search) is stored once and has one id. The same Node type is
// the e-node of the e-graph, whose children are e-class ids instead of pool ids.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cc/absexpr/constant.h"

namespace mj::absexpr {

enum class ExprOp : uint8_t {
  kVar,    // payload a: kernel input index
  kConst,  // payload (a, b): Constant::payload_a/b
  kAdd,
  kMul,
  kDiv,
  kNeg,
  kExp,
  kSqrt,
  kSilu,
  kGelu,
  kRelu,
  kSigmoid,  // uninterpreted except for silu(x) = x * sigmoid(x)
  kErf,      // uninterpreted
  kSum,      // payload a: how many terms, >= 1; one child
  kMax,      // payload a: how many terms; uninterpreted (a max kept as a real max)
  kConcat,   // payload (a, b): the two parts' sizes along the concat dim; children: the parts
};

struct ExprOpInfo {
  const char* name;  // the s-expression head
  int payloads;      // leading integer arguments in text form (sum and max: 1, concat: 2)
  int arity;         // children
};
const ExprOpInfo& op_info(ExprOp op);
std::optional<ExprOp> op_from_name(std::string_view name);  // not "var" / "const": atoms

using ExprId = uint32_t;

// One operator application. Unused payload and child slots are zero, so that equal nodes
// compare and hash equal.
struct Node {
  ExprOp op = ExprOp::kConst;
  int64_t a = 0, b = 0;
  std::array<uint32_t, 2> children{0, 0};

  static Node var(int64_t input_index) { return Node{ExprOp::kVar, input_index, 0, {0, 0}}; }
  static Node constant(const Constant& c) {
    return Node{ExprOp::kConst, c.payload_a(), c.payload_b(), {0, 0}};
  }
  static Node unary(ExprOp op, uint32_t x, int64_t a = 0) { return Node{op, a, 0, {x, 0}}; }
  static Node binary(ExprOp op, uint32_t x, uint32_t y, int64_t a = 0, int64_t b = 0) {
    return Node{op, a, b, {x, y}};
  }

  int arity() const { return op_info(op).arity; }
  Constant constant_value() const { return Constant::from_payload(a, b); }  // kConst only
  bool operator==(const Node& o) const {
    return op == o.op && a == o.a && b == o.b && children == o.children;
  }
  bool operator<(const Node& o) const;
};

struct NodeHash {
  size_t operator()(const Node& n) const;
};

class ExprPool {
 public:
  // Hash-consed insertion of exactly this node; children must be ids of this pool.
  ExprId make(const Node& n);

  // Builders used by derivation. They apply the identities x+0 = x, x*1 = x, x/1 = x,
  // -0 = 0, sum(1, e) = e and sum(a, sum(b, e)) = sum(a*b, e), so that the cheap
  // hash-cons lookup of a candidate sees fewer spellings of the same term.
  ExprId var(int input_index) { return make(Node::var(input_index)); }
  ExprId constant(const Constant& c) { return make(Node::constant(c)); }
  ExprId constant(double v) { return constant(Constant::from_double(v)); }
  ExprId add(ExprId x, ExprId y);
  ExprId sub(ExprId x, ExprId y) { return add(x, neg(y)); }
  ExprId mul(ExprId x, ExprId y);
  ExprId div(ExprId x, ExprId y);
  ExprId neg(ExprId x);
  ExprId unary(ExprOp op, ExprId x);  // exp, sqrt, silu, gelu, relu, sigmoid, erf
  ExprId sum(int64_t count, ExprId e);
  ExprId max(int64_t count, ExprId e);
  ExprId concat(int64_t size_a, int64_t size_b, ExprId x, ExprId y);

  const Node& node(ExprId id) const { return nodes_.at(id); }
  size_t size() const { return nodes_.size(); }
  bool is_constant(ExprId id, const Constant& c) const;

  std::string to_string(ExprId id) const;  // s-expression; shared subterms are repeated

 private:
  std::vector<Node> nodes_;
  std::unordered_map<Node, ExprId, NodeHash> index_;
};

// The text form: atoms "x3" (input 3), "4096", "-1/2", "1e-06" (a double, see
// Constant::from_double); lists "(op payload... child...)", e.g. "(sum 128 (mul x0 x2))".
// Nodes are made exactly as written (no identities applied). Throws std::invalid_argument.
ExprId parse_expr(ExprPool& pool, std::string_view text);

}  // namespace mj::absexpr
