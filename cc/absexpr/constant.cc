#include "cc/absexpr/constant.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace mj::absexpr {

namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// num/den normalized, or nullopt when a step overflows (or would produce -2^63, which has no
// negation).
std::optional<Constant> checked(int64_t num, int64_t den) {
  if (den == 0 || num == kMin || den == kMin) return std::nullopt;
  return Constant::rational(num, den);
}

}  // namespace

Constant Constant::rational(int64_t num, int64_t den) {
  if (den == 0) throw std::invalid_argument("Constant::rational: zero denominator");
  if (num == kMin || den == kMin) {
    throw std::invalid_argument("Constant::rational: -2^63 is not representable");
  }
  if (den < 0) num = -num, den = -den;
  const int64_t g = std::gcd(num, den);
  if (g > 1) num /= g, den /= g;
  return Constant(num, den);
}

Constant Constant::opaque(double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return Constant(bits, 0);
}

Constant Constant::from_double(double value) {
  if (!std::isfinite(value)) return opaque(value);
  if (value == 0.0) return Constant(0, 1);  // -0.0 and 0.0 are the same number
  int exp = 0;
  const double frac = std::frexp(value, &exp);   // value = frac * 2^exp, 0.5 <= |frac| < 1
  int64_t mant = int64_t(std::ldexp(frac, 53));  // exact: a double has 53 significant bits
  exp -= 53;
  while ((mant & 1) == 0) mant /= 2, ++exp;
  if (exp >= 0) {
    if (exp >= 62 || std::llabs(mant) >= (int64_t(1) << (62 - exp))) return opaque(value);
    return Constant(mant * (int64_t(1) << exp), 1);
  }
  if (-exp > 62) return opaque(value);
  return Constant(mant, int64_t(1) << -exp);  // mant is odd: already reduced
}

Constant Constant::from_payload(int64_t a, int64_t b) { return Constant(a, b); }

double Constant::value() const {
  if (is_rational()) return double(num_) / double(den_);
  double v;
  std::memcpy(&v, &num_, sizeof v);
  return v;
}

std::optional<Constant> Constant::plus(const Constant& o) const {
  if (!is_rational() || !o.is_rational()) return std::nullopt;
  // Over the least common denominator, so that sums of counts' reciprocals stay small.
  const int64_t g = std::gcd(den_, o.den_);
  int64_t den, left, right, num;
  if (__builtin_mul_overflow(den_ / g, o.den_, &den) ||
      __builtin_mul_overflow(num_, o.den_ / g, &left) ||
      __builtin_mul_overflow(o.num_, den_ / g, &right) ||
      __builtin_add_overflow(left, right, &num)) {
    return std::nullopt;
  }
  return checked(num, den);
}

std::optional<Constant> Constant::times(const Constant& o) const {
  if (!is_rational() || !o.is_rational()) return std::nullopt;
  // Cancel across first: the product may fit even when the unreduced one would not.
  // Denominators are >= 1, so both gcds are too.
  const int64_t g1 = std::gcd(num_, o.den_), g2 = std::gcd(o.num_, den_);
  int64_t num, den;
  if (__builtin_mul_overflow(num_ / g1, o.num_ / g2, &num) ||
      __builtin_mul_overflow(den_ / g2, o.den_ / g1, &den)) {
    return std::nullopt;
  }
  return checked(num, den);
}

std::optional<Constant> Constant::reciprocal() const {
  if (!is_rational() || num_ == 0) return std::nullopt;
  return Constant::rational(den_, num_);
}

std::optional<Constant> Constant::negated() const {
  if (!is_rational()) return std::nullopt;
  return Constant(-num_, den_);
}

std::string Constant::to_string() const {
  if (is_rational()) {
    return den_ == 1 ? std::to_string(num_) : std::to_string(num_) + "/" + std::to_string(den_);
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", value());
  return buf;
}

std::optional<Constant> parse_constant(const std::string& atom) {
  if (atom.empty()) return std::nullopt;
  const size_t slash = atom.find('/');
  if (slash != std::string::npos) {
    const std::string n = atom.substr(0, slash), d = atom.substr(slash + 1);
    char* end = nullptr;
    errno = 0;
    const long long num = std::strtoll(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0' || errno) return std::nullopt;
    const long long den = std::strtoll(d.c_str(), &end, 10);
    if (d.empty() || *end != '\0' || errno || den == 0) return std::nullopt;
    if (num == kMin || den == kMin) {
      return std::nullopt;
    }
    return Constant::rational(num, den);
  }
  char* end = nullptr;
  errno = 0;
  const long long whole = std::strtoll(atom.c_str(), &end, 10);
  if (*end == '\0' && errno == 0 && whole != kMin) {
    return Constant::rational(whole, 1);  // exact even beyond 2^53
  }
  const double v = std::strtod(atom.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return Constant::from_double(v);
}

}  // namespace mj::absexpr
