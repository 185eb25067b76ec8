#pragma once
// Numerical safety as part of equivalence (docs/ir-semantics.md, "Numerical safety"). Two
// graphs equal over the reals can still differ in floating point where one of them overflows,
// divides by zero or takes the square root of a negative number where the other does not:
// exp(x) / sum(exp(x)) is softmax over the reals and NaN in floats once a logit passes 88 or a
// row is masked out. The finite-field fingerprint cannot see this, so verify_equivalent also
// requires that both graphs evaluate these partial operations at the same values:
//
//  - exp: every argument is either bounded above by construction (x - m with m a max taken
//    over values that include x, or a positive multiple of that, a sum of such, ...; the
//    online-softmax accumulators compute exp(s - M(s)) that way by definition, and a split
//    softmax's rescale exp(m_b - M) subtracts a max over the partial maxima m_b), or a value
//    the other graph also exponentiates without such a bound;
//  - division: every divisor that is not a nonzero constant is a value the other graph also
//    divides by (so a normalizer is the same number: the max of a stabilized softmax must be
//    taken over the same values in both, and x * y / y is not x); and a divisor that is not
//    provably positive (positive constants, exp, sqrt of a positive value, sums and products
//    of those: an rms with eps > 0, a softmax's sum) divides the same values in both graphs:
//    (x / z) @ w and (x @ w) / z differ where z = 0;
//  - sqrt: every argument is a value the other graph also takes the square root of.
//
// "Value" is the fingerprint (cc/verify/ff_domain.h) on the trial's random inputs: equal
// fingerprints mean equal values over the reals with the verifier's false-accept bound. The
// analysis is a value domain of the interpreter, so it sees exactly what the interpreter
// evaluates, block by block and iteration by iteration; no structural pattern can slip past
// it. It runs inside verify_equivalent, so every caller (the search, superoptimize's second
// proof, cached results, users) gets it.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "cc/interp/dense_tensor.h"
#include "cc/ir/graph.h"
#include "cc/verify/ff_domain.h"

namespace mj::verify {

// A max's value and the values it is known to bound from above: its operands, and theirs.
// Operands that are maxima themselves are kept as nodes, so a reduce over n values builds a
// chain of n nodes in O(n) and the set is only materialized for maxima that are subtracted.
struct SafeValue;
class MaxNode {
 public:
  // The node of max(a, b), whose fingerprint is `fingerprint`; operands that are max's
  // identity (-inf) are left out.
  static std::shared_ptr<const MaxNode> over(uint64_t fingerprint, const SafeValue& a,
                                             const SafeValue& b);
  explicit MaxNode(uint64_t fingerprint) : fingerprint_(fingerprint) {}
  ~MaxNode();  // iterative: a chain of nodes must not recurse once per element
  MaxNode(const MaxNode&) = delete;
  MaxNode& operator=(const MaxNode&) = delete;

  uint64_t fingerprint() const { return fingerprint_; }
  // Whether v (a fingerprint) is this max, or one of the values it was taken over.
  bool bounds(uint64_t v) const;

 private:
  const std::unordered_set<uint64_t>& members() const;

  uint64_t fingerprint_;
  std::shared_ptr<const MaxNode> child_[2];  // operands that are maxima
  uint64_t leaf_[2] = {0, 0};                // operands that are not
  int leaves_ = 0;
  mutable std::unique_ptr<std::unordered_set<uint64_t>> members_;
};

struct SafeValue {
  FFValue ff;
  uint8_t facts = 0;                   // SafetyDomain::k* bits
  std::shared_ptr<const MaxNode> max;  // set when this value is a max
};

// What one graph's run evaluated: the values of its unbounded exp arguments, its computed
// divisors and its square-root arguments (Z_p fingerprints).
struct PartialOps {
  std::unordered_set<uint64_t> exp_args, divisors, sqrt_args;
  std::unordered_set<uint64_t> unsigned_divisions;  // (dividend, divisor) of divisors maybe 0
};

// The interpreter's value domain: the finite-field value plus the facts above.
class SafetyDomain {
 public:
  using Value = SafeValue;
  static constexpr uint8_t kNonPos = 1;     // <= 0 over the reals
  static constexpr uint8_t kNonNeg = 2;     // >= 0
  static constexpr uint8_t kConstant = 4;   // a literal constant (not computed)
  static constexpr uint8_t kLowest = 8;     // max's identity (-inf)
  static constexpr uint8_t kPositive = 16;  // > 0 over the reals (then kNonNeg too)

  SafetyDomain(const FFDomain& ff, PartialOps* log) : ff_(ff), log_(log) {}

  Value constant(double c) const;
  Value add(const Value& a, const Value& b) const;
  Value sub(const Value& a, const Value& b) const;
  Value mul(const Value& a, const Value& b) const;
  Value div(const Value& a, const Value& b) const;
  Value neg(const Value& a) const;
  Value recip(const Value& a) const { return div(constant(1.0), a); }
  Value exp(const Value& a) const;
  Value sqrt(const Value& a) const;
  // Bounded by ±1 and defined everywhere: nothing to record. It keeps its argument's sign.
  Value erf(const Value& a) const;
  // In [0, 2]: not known positive, as float32 erfc is 0 from x = 10.06 on.
  Value erfc(const Value& a) const;
  Value relu(const Value& a) const;
  // x or c: what both have in common of sign.
  Value select(const Value& mask, const Value& x, double c) const;
  Value max(const Value& a, const Value& b) const;
  Value lowest() const;
  int64_t logical_count(const ir::Op& op, int64_t n) const { return ff_.logical_count(op, n); }

 private:
  const FFDomain& ff_;
  PartialOps* log_;
};

// The op table's erfc (cc/ir/elementwise.h), as the finite field has it.
inline SafeValue erfc(const SafetyDomain& d, const SafeValue& x) { return d.erfc(x); }

std::vector<interp::DenseTensor<SafeValue>> safe_values(
    const std::vector<interp::DenseTensor<FFValue>>& in);
std::vector<interp::DenseTensor<FFValue>> ff_values(
    const std::vector<interp::DenseTensor<SafeValue>>& out);

// "" when a and b evaluated the partial operations at the same values, else why not.
std::string partial_ops_mismatch(const PartialOps& a, const PartialOps& b);

// Whether g evaluates exp at an argument that is not bounded above (an unstabilized softmax,
// or a plain exp such as exp(x @ w)), on one random draw. The search uses it to decide whether
// a candidate may exponentiate anything that is not x - max(x).
bool has_unbounded_exp(const ir::KernelGraph& g, uint64_t seed = 0);

}  // namespace mj::verify
