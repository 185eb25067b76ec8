#pragma once
// Disjoint sets over dense ids: the equivalence relation of the e-graph.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mj::absexpr {

class UnionFind {
 public:
  uint32_t make_set();  // a fresh singleton; ids are 0, 1, 2, ...
  // The representative. Never writes, so a finished e-graph can be read from many threads;
  // compress() after a batch of unions keeps the chains short instead.
  uint32_t find(uint32_t x) const;
  // Makes `root`'s set absorb `other`'s; both must be representatives. Returns `root`.
  uint32_t unite(uint32_t root, uint32_t other);
  void compress();  // points every id straight at its representative
  size_t size() const { return parent_.size(); }

 private:
  std::vector<uint32_t> parent_;
};

}  // namespace mj::absexpr
