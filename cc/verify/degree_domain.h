#pragma once
// A value domain for the interpreter that computes, per tensor element, a bound on the
// degrees of the rational function the fingerprint evaluates: the element is P / Q with
// deg P <= num and deg Q <= den, over the inputs (degree 1 each) and the atoms below. It
// feeds the Schwartz-Zippel bound in verify.cc.
//
// Atoms (degree 1, fresh): the results of exp, sqrt, erf and erfc (counted through its
// generic form 1 - erf, of the same degree), and relu's even part A(x). The fingerprint
// evaluates them as g^x and keyed hashes; treating them as independent indeterminates is the
// heuristic part of the bound (see verify.cc).
#include <algorithm>

namespace mj::verify {

struct DegreeValue {
  double num = 0;
  double den = 0;
};

// What the run saw that the bound needs beyond the output degrees.
struct DegreeStats {
  bool has_exp = false;
  double max_exp_arg = 0;  // the largest max(num, den) of an exp argument
};

class DegreeDomain {
 public:
  using Value = DegreeValue;

  // Degrees past this are capped: the bound is vacuous long before.
  static constexpr double kCap = 1e30;

  explicit DegreeDomain(DegreeStats* stats) : stats_(stats) {}

  Value constant(double) const { return {}; }
  // P1/Q1 + P2/Q2 = (P1 Q2 + P2 Q1) / (Q1 Q2)
  Value add(Value a, Value b) const {
    return capped(std::max(a.num + b.den, b.num + a.den), a.den + b.den);
  }
  Value sub(Value a, Value b) const { return add(a, b); }
  Value mul(Value a, Value b) const { return capped(a.num + b.num, a.den + b.den); }
  Value div(Value a, Value b) const { return capped(a.num + b.den, a.den + b.num); }
  Value neg(Value a) const { return a; }
  Value recip(Value a) const { return {a.den, a.num}; }
  Value exp(Value a) const {
    stats_->has_exp = true;
    stats_->max_exp_arg = std::max({stats_->max_exp_arg, a.num, a.den});
    return atom();
  }
  Value sqrt(Value) const { return atom(); }
  Value erf(Value) const { return atom(); }
  // A keyed function of (mask, x) in the fingerprint (ff_domain.h): a fresh atom.
  Value select(Value, Value, double) const { return atom(); }
  // (x + A(x)) / 2 with A an atom (ff_domain.h).
  Value relu(Value a) const { return add(a, atom()); }
  // max is k a b + c (a + b) + const in the fingerprint (ff_domain.h).
  Value max(Value a, Value b) const {
    return capped(std::max({a.num + b.num, a.num + b.den, b.num + a.den, a.den + b.den}),
                  a.den + b.den);
  }
  Value lowest() const { return {}; }

 private:
  static Value atom() { return {1, 0}; }
  static Value capped(double num, double den) { return {std::min(num, kCap), std::min(den, kCap)}; }

  DegreeStats* stats_;
};

}  // namespace mj::verify
