#pragma once
// Constants of abstract expressions. Counts (the n of a mean) and dyadic scalars (0.5, 1/4096)
// are exact rationals, so the axioms can fold them (x / 4096 = x * 1/4096). Any other double
// (1e-6, sqrt(2/pi)) is opaque: a symbol equal only to the same double, bit for bit. Folding
// never touches an opaque constant, so no rounding can make two different programs look equal.
#include <cstdint>
#include <optional>
#include <string>

namespace mj::absexpr {

class Constant {
 public:
  static Constant rational(int64_t num, int64_t den);  // den != 0; normalized, den > 0
  // Rational when the double is exactly num/den with |num| < 2^63 and den <= 2^62, else opaque.
  static Constant from_double(double value);
  // The inverse of payload(): how a Node stores a constant.
  static Constant from_payload(int64_t a, int64_t b);

  bool is_rational() const { return den_ != 0; }
  int64_t num() const { return num_; }  // rational only
  int64_t den() const { return den_; }  // rational only
  double value() const;
  bool is_zero() const { return is_rational() && num_ == 0; }
  bool is_one() const { return is_rational() && num_ == 1 && den_ == 1; }
  bool is_integer() const { return is_rational() && den_ == 1; }

  // Exact arithmetic; nullopt when an operand is opaque, on division by zero, or when the
  // result does not fit 64 bits.
  std::optional<Constant> plus(const Constant& o) const;
  std::optional<Constant> times(const Constant& o) const;
  std::optional<Constant> reciprocal() const;
  std::optional<Constant> negated() const;

  // Rational: (num, den). Opaque: (bits of the double, 0).
  int64_t payload_a() const { return num_; }
  int64_t payload_b() const { return den_; }

  // "3", "-1/4096", or the opaque double with 17 significant digits ("1.0000000000000001e-06").
  std::string to_string() const;

  bool operator==(const Constant& o) const { return num_ == o.num_ && den_ == o.den_; }
  bool operator!=(const Constant& o) const { return !(*this == o); }

 private:
  Constant(int64_t a, int64_t b) : num_(a), den_(b) {}
  static Constant opaque(double value);
  int64_t num_ = 0;
  int64_t den_ = 1;
};

// The text form read back: "3", "-1/4096", or any strtod number (through from_double);
// nullopt when the whole atom is not a number.
std::optional<Constant> parse_constant(const std::string& atom);

}  // namespace mj::absexpr
