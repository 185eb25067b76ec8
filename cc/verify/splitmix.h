#pragma once
// SplitMix64 (Steele, Lea and Flood): a tiny, well-mixed 64-bit generator. Used for the
// verifier's random inputs and keyed hashes because its output is the same on every
// platform, unlike the distributions of <random>.
#include <cstdint>

namespace mj::verify {

// The SplitMix64 finalizer: a bijective mix of all 64 bits.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_ += 0x9e3779b97f4a7c15ULL); }
  // Uniform in [0, bound), bound >= 1: rejection sampling on the bits bound needs.
  uint64_t below(uint64_t bound) {
    uint64_t mask = bound - 1;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    for (;;) {
      const uint64_t r = next() & mask;
      if (r < bound) return r;
    }
  }

 private:
  uint64_t state_;
};

}  // namespace mj::verify
