#include "cc/absexpr/union_find.h"

#include <stdexcept>

namespace mj::absexpr {

uint32_t UnionFind::make_set() {
  const uint32_t id = uint32_t(parent_.size());
  parent_.push_back(id);
  return id;
}

uint32_t UnionFind::find(uint32_t x) const {
  while (parent_.at(x) != x) x = parent_[x];
  return x;
}

uint32_t UnionFind::unite(uint32_t root, uint32_t other) {
  if (parent_.at(root) != root || parent_.at(other) != other) {
    throw std::logic_error("UnionFind::unite: arguments must be representatives");
  }
  parent_[other] = root;
  return root;
}

void UnionFind::compress() {
  for (uint32_t i = 0; i < parent_.size(); ++i) parent_[i] = find(i);
}

}  // namespace mj::absexpr
