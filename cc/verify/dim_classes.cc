#include "cc/verify/dim_classes.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace mj::verify {

int DimClasses::add_slot(int64_t size) {
  if (size < 1)
    throw std::invalid_argument("DimClasses: dim size " + std::to_string(size) + " < 1");
  parent_.push_back(int(parent_.size()));
  size_.push_back(size);
  multiple_.push_back(1);
  return int(size_.size()) - 1;
}

int DimClasses::find(int slot) const {
  while (parent_.at(slot) != slot) {
    parent_[slot] = parent_[parent_[slot]];
    slot = parent_[slot];
  }
  return slot;
}

void DimClasses::unite(int a, int b) {
  const int ra = find(a), rb = find(b);
  if (ra != rb) parent_[std::max(ra, rb)] = std::min(ra, rb);
}

void DimClasses::require_multiple(int slot, int64_t factor) {
  if (factor < 1) {
    throw std::invalid_argument("DimClasses: split factor " + std::to_string(factor) + " < 1");
  }
  multiple_.at(slot) = std::lcm(multiple_[slot], factor);
}

std::vector<int64_t> DimClasses::shrunk_sizes(int max_tile) const {
  const int n = num_slots();
  const int64_t tile = std::max(max_tile, 1);
  std::vector<int64_t> gcd(n, 0);
  for (int s = 0; s < n; ++s) gcd[find(s)] = std::gcd(gcd[find(s)], size_[s]);
  // Slot s has size (size_[s] / G) * G; its factor f must divide (size_[s] / G) * U, which
  // holds iff f / gcd(f, size_[s] / G) divides U. That quotient divides G (f divided the
  // original size), so so does their lcm: L | G and the new unit never exceeds G.
  std::vector<int64_t> least(n, 1);
  for (int s = 0; s < n; ++s) {
    const int r = find(s);
    const int64_t ratio = size_[s] / gcd[r];
    const int64_t need = multiple_[s] / std::gcd(multiple_[s], ratio);
    least[r] = std::lcm(least[r], need);
  }
  std::vector<int64_t> out(n);
  for (int s = 0; s < n; ++s) {
    const int r = find(s);
    const int64_t g = gcd[r], l = least[r];
    if (g % l != 0) {
      throw std::logic_error("DimClasses: a split of dim slot " + std::to_string(s) +
                             " does not divide its size " + std::to_string(size_[s]));
    }
    int64_t unit = l * std::min(g / l, tile);
    if (g >= 2 && unit < 2) unit = 2;
    out[s] = size_[s] / g * unit;
  }
  return out;
}

}  // namespace mj::verify
