#include "cc/absexpr/expr.h"

#include <stdexcept>
#include <tuple>

#include "cc/absexpr/sexpr.h"

namespace mj::absexpr {

namespace {

constexpr ExprOpInfo kOpInfo[] = {
    {"var", 0, 0},  {"const", 0, 0}, {"add", 0, 2},  {"mul", 0, 2},
    {"div", 0, 2},  {"neg", 0, 1},   {"exp", 0, 1},  {"sqrt", 0, 1},
    {"silu", 0, 1}, {"gelu", 0, 1},  {"relu", 0, 1}, {"sigmoid", 0, 1},
    {"erf", 0, 1},  {"sum", 1, 1},   {"max", 1, 1},  {"concat", 2, 2},
};
constexpr size_t kNumOps = sizeof(kOpInfo) / sizeof(kOpInfo[0]);
static_assert(kNumOps == size_t(ExprOp::kConcat) + 1, "kOpInfo must list every ExprOp");

uint64_t mix(uint64_t h, uint64_t v) {
  // splitmix64 finalizer over a running xor: cheap and spreads small integers well
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

int64_t parse_payload(const SExpr& s, const char* op) {
  if (!s.is_atom()) throw std::invalid_argument(std::string(op) + ": payload must be an integer");
  auto c = parse_constant(s.atom);
  if (!c || !c->is_integer()) {
    throw std::invalid_argument(std::string(op) + ": payload '" + s.atom + "' is not an integer");
  }
  return c->num();
}

ExprId build(ExprPool& pool, const SExpr& s) {
  if (s.is_atom()) {
    if (s.atom.size() > 1 && s.atom[0] == 'x') {
      auto idx = parse_constant(s.atom.substr(1));
      if (idx && idx->is_integer() && idx->num() >= 0) return pool.make(Node::var(idx->num()));
    }
    auto c = parse_constant(s.atom);
    if (!c) throw std::invalid_argument("expression: unknown atom '" + s.atom + "'");
    return pool.make(Node::constant(*c));
  }
  const SExpr& head = s.items[0];
  auto op = head.is_atom() ? op_from_name(head.atom) : std::nullopt;
  if (!op) throw std::invalid_argument("expression: unknown operator in list");
  const ExprOpInfo& info = op_info(*op);
  if (int(s.items.size()) != 1 + info.payloads + info.arity) {
    throw std::invalid_argument(std::string("expression: '") + info.name + "' takes " +
                                std::to_string(info.payloads + info.arity) + " arguments");
  }
  Node n{*op, 0, 0, {0, 0}};
  if (info.payloads > 0) n.a = parse_payload(s.items[1], info.name);
  if (info.payloads > 1) n.b = parse_payload(s.items[2], info.name);
  for (int i = 0; i < info.arity; ++i) n.children[i] = build(pool, s.items[1 + info.payloads + i]);
  return pool.make(n);
}

}  // namespace

const ExprOpInfo& op_info(ExprOp op) { return kOpInfo[size_t(op)]; }

std::optional<ExprOp> op_from_name(std::string_view name) {
  for (size_t i = size_t(ExprOp::kAdd); i < kNumOps; ++i) {
    if (name == kOpInfo[i].name) return ExprOp(i);
  }
  return std::nullopt;
}

bool Node::operator<(const Node& o) const {
  return std::tie(op, a, b, children) < std::tie(o.op, o.a, o.b, o.children);
}

size_t NodeHash::operator()(const Node& n) const {
  uint64_t h = mix(uint64_t(n.op), uint64_t(n.a));
  h = mix(h, uint64_t(n.b));
  h = mix(h, n.children[0]);
  return size_t(mix(h, n.children[1]));
}

ExprId ExprPool::make(const Node& n) {
  for (int i = 0; i < n.arity(); ++i) {
    if (n.children[i] >= nodes_.size()) throw std::out_of_range("ExprPool::make: unknown child");
  }
  const bool counted = n.op == ExprOp::kSum || n.op == ExprOp::kMax;
  if ((counted && n.a < 1) || (n.op == ExprOp::kConcat && (n.a < 1 || n.b < 1)) ||
      (n.op == ExprOp::kVar && n.a < 0)) {
    throw std::invalid_argument(std::string("ExprPool::make: bad payload for '") +
                                op_info(n.op).name + "'");
  }
  auto [it, inserted] = index_.try_emplace(n, ExprId(nodes_.size()));
  if (inserted) nodes_.push_back(n);
  return it->second;
}

bool ExprPool::is_constant(ExprId id, const Constant& c) const {
  const Node& n = node(id);
  return n.op == ExprOp::kConst && n.constant_value() == c;
}

ExprId ExprPool::add(ExprId x, ExprId y) {
  const Constant zero = Constant::rational(0, 1);
  if (is_constant(y, zero)) return x;
  if (is_constant(x, zero)) return y;
  return make(Node::binary(ExprOp::kAdd, x, y));
}

ExprId ExprPool::mul(ExprId x, ExprId y) {
  const Constant one = Constant::rational(1, 1);
  if (is_constant(y, one)) return x;
  if (is_constant(x, one)) return y;
  return make(Node::binary(ExprOp::kMul, x, y));
}

ExprId ExprPool::div(ExprId x, ExprId y) {
  if (is_constant(y, Constant::rational(1, 1))) return x;
  return make(Node::binary(ExprOp::kDiv, x, y));
}

ExprId ExprPool::neg(ExprId x) {
  if (is_constant(x, Constant::rational(0, 1))) return x;
  return make(Node::unary(ExprOp::kNeg, x));
}

ExprId ExprPool::unary(ExprOp op, ExprId x) {
  if (op_info(op).arity != 1 || op_info(op).payloads != 0) {
    throw std::invalid_argument(std::string("ExprPool::unary: '") + op_info(op).name +
                                "' is not a plain unary operator");
  }
  return make(Node::unary(op, x));
}

ExprId ExprPool::sum(int64_t count, ExprId e) {
  if (count < 1) throw std::invalid_argument("ExprPool::sum: count must be >= 1");
  if (count == 1) return e;
  const Node& inner = node(e);
  if (inner.op == ExprOp::kSum) {
    int64_t total = 0;
    if (__builtin_mul_overflow(count, inner.a, &total)) {
      throw std::overflow_error("ExprPool::sum: nested count overflows 64 bits");
    }
    return sum(total, ExprId(inner.children[0]));
  }
  return make(Node::unary(ExprOp::kSum, e, count));
}

ExprId ExprPool::max(int64_t count, ExprId e) {
  if (count < 1) throw std::invalid_argument("ExprPool::max: count must be >= 1");
  if (count == 1) return e;
  return make(Node::unary(ExprOp::kMax, e, count));
}

ExprId ExprPool::concat(int64_t size_a, int64_t size_b, ExprId x, ExprId y) {
  return make(Node::binary(ExprOp::kConcat, x, y, size_a, size_b));
}

std::string ExprPool::to_string(ExprId id) const {
  const Node& n = node(id);
  if (n.op == ExprOp::kVar) return "x" + std::to_string(n.a);
  if (n.op == ExprOp::kConst) return n.constant_value().to_string();
  const ExprOpInfo& info = op_info(n.op);
  std::string s = std::string("(") + info.name;
  if (info.payloads > 0) s += " " + std::to_string(n.a);
  if (info.payloads > 1) s += " " + std::to_string(n.b);
  for (int i = 0; i < info.arity; ++i) s += " " + to_string(n.children[i]);
  return s + ")";
}

ExprId parse_expr(ExprPool& pool, std::string_view text) { return build(pool, parse_sexpr(text)); }

}  // namespace mj::absexpr
