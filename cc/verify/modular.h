#pragma once
// Arithmetic modulo a prime below 2^63: the building blocks of the finite-field fingerprints.
// Residues are kept in [0, m); sums of two residues fit in 64 bits because m < 2^63.
#include <cstdint>

namespace mj::verify {

inline uint64_t add_mod(uint64_t a, uint64_t b, uint64_t m) {
  const uint64_t s = a + b;
  return s >= m ? s - m : s;
}

inline uint64_t sub_mod(uint64_t a, uint64_t b, uint64_t m) { return a >= b ? a - b : a + m - b; }

inline uint64_t neg_mod(uint64_t a, uint64_t m) { return a == 0 ? 0 : m - a; }

inline uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t m) {
  return uint64_t((unsigned __int128)a * b % m);
}

uint64_t pow_mod(uint64_t base, uint64_t exponent, uint64_t m);

// The inverse of a modulo a prime m (a must not be 0 mod m): Fermat, a^(m-2).
uint64_t inv_mod(uint64_t a, uint64_t m);

// Miller-Rabin with the first twelve prime bases, which is deterministic for every n < 2^64
// (it is for all n < 3.3e24).
bool is_prime_u64(uint64_t n);

}  // namespace mj::verify
