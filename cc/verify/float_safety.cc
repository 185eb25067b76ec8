#include "cc/verify/float_safety.h"

#include <exception>
#include <optional>
#include <utility>

#include "cc/interp/interp.h"
#include "cc/verify/field_params.h"
#include "cc/verify/shrink.h"
#include "cc/verify/splitmix.h"

namespace mj::verify {

using interp::DenseTensor;
using interp::interpret;
using ir::KernelGraph;

// ------------------------------------------------------------------------------- MaxNode

std::shared_ptr<const MaxNode> MaxNode::over(uint64_t fingerprint, const SafeValue& a,
                                             const SafeValue& b) {
  auto node = std::make_shared<MaxNode>(fingerprint);
  int children = 0;
  for (const SafeValue* v : {&a, &b}) {
    if (v->facts & SafetyDomain::kLowest) continue;
    if (v->max) {
      node->child_[children++] = v->max;
    } else {
      node->leaf_[node->leaves_++] = v->ff.p;
    }
  }
  return node;
}

MaxNode::~MaxNode() {
  // Releasing a chain one node per stack frame would overflow the stack on a long row.
  std::vector<std::shared_ptr<const MaxNode>> pending;
  for (auto& c : child_) {
    if (c) pending.push_back(std::move(c));
  }
  while (!pending.empty()) {
    std::shared_ptr<const MaxNode> n = std::move(pending.back());
    pending.pop_back();
    if (n.use_count() == 1) {  // the last owner: take its children before it goes
      auto* last = const_cast<MaxNode*>(n.get());
      for (auto& c : last->child_) {
        if (c) pending.push_back(std::move(c));
      }
    }
  }
}

const std::unordered_set<uint64_t>& MaxNode::members() const {
  if (members_) return *members_;
  auto set = std::make_unique<std::unordered_set<uint64_t>>();
  std::vector<const MaxNode*> stack{this};
  std::unordered_set<const MaxNode*> seen{this};
  while (!stack.empty()) {
    const MaxNode* n = stack.back();
    stack.pop_back();
    set->insert(n->fingerprint_);
    if (n != this && n->members_) {
      set->insert(n->members_->begin(), n->members_->end());
      continue;
    }
    for (int i = 0; i < n->leaves_; ++i) set->insert(n->leaf_[i]);
    for (const auto& c : n->child_) {
      if (c && seen.insert(c.get()).second) stack.push_back(c.get());
    }
  }
  members_ = std::move(set);
  return *members_;
}

bool MaxNode::bounds(uint64_t v) const { return v == fingerprint_ || members().count(v) > 0; }

// ------------------------------------------------------------------------- SafetyDomain

namespace {

constexpr uint8_t kNonPos = SafetyDomain::kNonPos;
constexpr uint8_t kNonNeg = SafetyDomain::kNonNeg;
// Positive implies non-negative: the two bits are set together.
constexpr uint8_t kPos = SafetyDomain::kPositive | SafetyDomain::kNonNeg;

bool has(const SafeValue& v, uint8_t fact) { return (v.facts & fact) != 0; }

SafeValue computed(FFValue ff, uint8_t facts) {
  SafeValue v;
  v.ff = ff;
  v.facts = facts;
  return v;
}

bool positive(const SafeValue& v) { return (v.facts & SafetyDomain::kPositive) != 0; }

// The sign facts of a product or quotient.
uint8_t product_signs(const SafeValue& a, const SafeValue& b) {
  uint8_t f = 0;
  if (positive(a) && positive(b)) f |= kPos;
  if ((has(a, kNonNeg) && has(b, kNonNeg)) || (has(a, kNonPos) && has(b, kNonPos))) f |= kNonNeg;
  if ((has(a, kNonNeg) && has(b, kNonPos)) || (has(a, kNonPos) && has(b, kNonNeg))) f |= kNonPos;
  return f;
}

}  // namespace

SafeValue SafetyDomain::constant(double c) const {
  uint8_t f = kConstant;
  if (c <= 0) f |= kNonPos;
  if (c >= 0) f |= kNonNeg;
  if (c > 0) f |= kPos;
  return computed(ff_.constant(c), f);
}

SafeValue SafetyDomain::add(const Value& a, const Value& b) const {
  uint8_t f = 0;
  if (has(a, kNonPos) && has(b, kNonPos)) f |= kNonPos;
  if (has(a, kNonNeg) && has(b, kNonNeg)) f |= kNonNeg;
  if ((positive(a) && has(b, kNonNeg)) || (has(a, kNonNeg) && positive(b))) f |= kPos;
  return computed(ff_.add(a.ff, b.ff), f);
}

SafeValue SafetyDomain::sub(const Value& a, const Value& b) const {
  uint8_t f = 0;
  const bool same = a.ff.p == b.ff.p;
  // a - max(..., a, ...) <= 0: the stabilizer of a softmax, and a split softmax's rescale.
  if (same || (has(a, kNonPos) && has(b, kNonNeg)) || (b.max && b.max->bounds(a.ff.p))) {
    f |= kNonPos;
  }
  if (same || (has(a, kNonNeg) && has(b, kNonPos)) || (a.max && a.max->bounds(b.ff.p))) {
    f |= kNonNeg;
  }
  return computed(ff_.sub(a.ff, b.ff), f);
}

SafeValue SafetyDomain::mul(const Value& a, const Value& b) const {
  uint8_t f = product_signs(a, b);
  if (a.ff.p == b.ff.p) f |= kNonNeg;  // a square
  return computed(ff_.mul(a.ff, b.ff), f);
}

SafeValue SafetyDomain::div(const Value& a, const Value& b) const {
  if (!has(b, kConstant)) {
    log_->divisors.insert(b.ff.p);
    // Where it is 0 the quotient is inf or NaN: the same dividends, or another pattern.
    if (!positive(b)) log_->unsigned_divisions.insert(mix64(a.ff.p) ^ b.ff.p);
  }
  return computed(ff_.div(a.ff, b.ff), product_signs(a, b));
}

SafeValue SafetyDomain::neg(const Value& a) const {
  uint8_t f = 0;
  if (has(a, kNonPos)) f |= kNonNeg;
  if (has(a, kNonNeg)) f |= kNonPos;
  return computed(ff_.neg(a.ff), f);
}

SafeValue SafetyDomain::exp(const Value& a) const {
  if (!has(a, kNonPos)) log_->exp_args.insert(a.ff.p);
  return computed(ff_.exp(a.ff), kPos);
}

SafeValue SafetyDomain::sqrt(const Value& a) const {
  log_->sqrt_args.insert(a.ff.p);
  return computed(ff_.sqrt(a.ff), positive(a) ? kPos : kNonNeg);
}

SafeValue SafetyDomain::erf(const Value& a) const {
  return computed(ff_.erf(a.ff), uint8_t(a.facts & (kNonPos | kPos)));
}

SafeValue SafetyDomain::erfc(const Value& a) const { return computed(ff_.erfc(a.ff), kNonNeg); }

SafeValue SafetyDomain::relu(const Value& a) const {
  return computed(ff_.relu(a.ff), positive(a) ? kPos : kNonNeg);
}

SafeValue SafetyDomain::select(const Value& mask, const Value& x, double c) const {
  uint8_t f = 0;
  if (has(x, kNonPos) && c <= 0) f |= kNonPos;
  if (has(x, kNonNeg) && c >= 0) f |= kNonNeg;
  if (positive(x) && c > 0) f |= kPos;
  return computed(ff_.select(mask.ff, x.ff, c), f);
}

SafeValue SafetyDomain::max(const Value& a, const Value& b) const {
  if (has(a, kLowest) && has(b, kLowest)) return a;
  if (has(a, kLowest) && b.max) return b;  // the identity leaves a max as it is
  if (has(b, kLowest) && a.max) return a;
  uint8_t f = 0;
  if (has(a, kNonPos) && has(b, kNonPos)) f |= kNonPos;
  if ((has(a, kNonNeg) && !has(a, kLowest)) || (has(b, kNonNeg) && !has(b, kLowest))) f |= kNonNeg;
  if (positive(a) || positive(b)) f |= kPos;
  SafeValue r = computed(ff_.max(a.ff, b.ff), f);
  r.max = MaxNode::over(r.ff.p, a, b);
  return r;
}

SafeValue SafetyDomain::lowest() const { return computed(ff_.lowest(), kNonPos | kLowest); }

// ---------------------------------------------------------------------------- helpers

std::vector<DenseTensor<SafeValue>> safe_values(const std::vector<DenseTensor<FFValue>>& in) {
  std::vector<DenseTensor<SafeValue>> out;
  for (const auto& t : in) {
    DenseTensor<SafeValue> s;
    s.shape = t.shape;
    s.data.reserve(t.data.size());
    for (const FFValue& v : t.data) s.data.push_back(computed(v, 0));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<DenseTensor<FFValue>> ff_values(const std::vector<DenseTensor<SafeValue>>& out) {
  std::vector<DenseTensor<FFValue>> ff;
  for (const auto& t : out) {
    DenseTensor<FFValue> f;
    f.shape = t.shape;
    f.data.reserve(t.data.size());
    for (const SafeValue& v : t.data) f.data.push_back(v.ff);
    ff.push_back(std::move(f));
  }
  return ff;
}

namespace {

// How many of `of`'s values `in` lacks.
size_t missing(const std::unordered_set<uint64_t>& of, const std::unordered_set<uint64_t>& in) {
  size_t n = 0;
  for (uint64_t v : of) n += in.count(v) == 0;
  return n;
}

// Why graph `xn`'s set `x` of one kind has values `y` lacks, or "".
std::string extra(const std::unordered_set<uint64_t>& x, const std::unordered_set<uint64_t>& y,
                  const char* xn, const char* yn, const char* does, const char* effect) {
  const size_t n = missing(x, y);
  if (n == 0) return "";
  return std::string("not equally safe in floating point: graph ") + xn + " " + does + " " +
         std::to_string(n) + " " + (n == 1 ? "value" : "values") + " graph " + yn + " " + effect;
}

}  // namespace

std::string partial_ops_mismatch(const PartialOps& a, const PartialOps& b) {
  struct Kind {
    const std::unordered_set<uint64_t> PartialOps::* set;
    const char* does;
    const char* effect;
  };
  const Kind kinds[] = {
      {&PartialOps::exp_args, "takes exp of",
       "does not exponentiate, and that are not bounded above (x - max(x) over values "
       "including x): it can overflow where the other cannot (an unstabilized softmax)"},
      {&PartialOps::divisors, "divides by",
       "never divides by: it can divide by zero where the other does not (a softmax "
       "normalized by a sum over other values, x * y / y for x)"},
      {&PartialOps::sqrt_args, "takes the square root of",
       "does not take the root of: NaN where the other is finite (a negative value)"},
      {&PartialOps::unsigned_divisions, "divides",
       "does not divide by the same divisor, which may be 0: where it is, the two differ in "
       "where they are inf or NaN (a division moved across a matmul or a sum)"},
  };
  for (const Kind& k : kinds) {
    std::string why = extra(b.*k.set, a.*k.set, "b", "a", k.does, k.effect);
    if (why.empty()) why = extra(a.*k.set, b.*k.set, "a", "b", k.does, k.effect);
    if (!why.empty()) return why;
  }
  return "";
}

bool has_unbounded_exp(const KernelGraph& full, uint64_t seed) {
  // On the shrunk instance where there is one: the target of a search can be far too large to
  // interpret (the question is structural, any size of the same structure answers it).
  std::optional<KernelGraph> shrunk;
  try {
    shrunk = shrink_pair(full, full, 2).first;
  } catch (const std::exception&) {
  }
  const KernelGraph& g = shrunk ? *shrunk : full;
  const FieldParams& f = field_params(0);
  SplitMix64 rng(mix64(seed) ^ 0x5afe7);
  const FFDomain ff(f, rng.next());
  std::vector<DenseTensor<SafeValue>> inputs;
  for (int id : g.input_ids()) {
    DenseTensor<SafeValue> t;
    t.shape = g.tensor(id).shape;
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    t.data.resize(size_t(n));
    for (SafeValue& v : t.data) {
      v.ff.p = rng.below(f.p);
      v.ff.q = rng.below(f.q);
    }
    inputs.push_back(std::move(t));
  }
  PartialOps log;
  interpret(g, inputs, SafetyDomain(ff, &log));
  return !log.exp_args.empty();
}

}  // namespace mj::verify
