#pragma once
// Classes of tensor dims whose sizes are tied together, for shrunk instances (shrink.h).
//
// Every shape rule of the IR ties dims either by equality (elementwise, matmul m/k/n, ...),
// by a fixed factor (a block input's tile is its kernel dim / the splits; a block output's
// kernel dim is its tile * the grid) or by a sum (concat). Each of these is preserved when
// every dim of a class is scaled by the same ratio, so one union-find over dims, without
// weights, is enough: in a class with gcd G, the dim of size s has size s / G * U after
// shrinking, for one new unit U <= G chosen per class. A size-1 dim forces G = 1, so it and
// its class keep their sizes (a broadcast dim must stay 1).
#include <cstdint>
#include <vector>

namespace mj::verify {

class DimClasses {
 public:
  // A new dim of the given size (>= 1), in a class of its own. Returns its slot id.
  int add_slot(int64_t size);
  // Ties two slots: their sizes scale together.
  void unite(int a, int b);
  // The slot's new size must remain a multiple of factor (a grid or for-loop split).
  void require_multiple(int slot, int64_t factor);

  int64_t size(int slot) const { return size_.at(slot); }
  int num_slots() const { return int(size_.size()); }

  // New sizes, per class: L = the least unit that keeps every required multiple, then
  // U = L * min(G / L, max_tile), at least 2 where G >= 2 so no dim becomes a broadcast 1.
  // A dim split exactly L ways thus keeps tiles of at most max_tile elements.
  std::vector<int64_t> shrunk_sizes(int max_tile) const;

 private:
  int find(int slot) const;

  mutable std::vector<int> parent_;
  std::vector<int64_t> size_;
  std::vector<int64_t> multiple_;  // lcm of the factors required of this slot
};

}  // namespace mj::verify
