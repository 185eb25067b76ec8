#pragma once
// The canonical order that makes each DAG come out of the enumeration once.
// An op's key is its inputs sorted newest first, then its kind and attributes, then its
// inputs in operand order. Ops are appended only in strictly increasing key order: an op
// that is ready (its inputs exist) and has a smaller key than the last op appended can never
// be appended later, so every DAG has exactly one admissible order, and two identical ops
// (a recomputation) can never both appear.
#include <array>
#include <string>

#include "cc/ir/graph.h"

namespace mj::search {

// Keys are built for every proposed op, so they hold their inputs inline, not on the heap.
constexpr int kMaxKeyInputs = 8;

struct OpKey {
  int num_inputs = 0;
  std::array<int, kMaxKeyInputs> newest_first{};  // input tensor ids, descending
  int kind = 0;
  int dim = -1;
  int reduce = 0;
  double scalar = 0;
  std::string extra;                          // a customized op's block-graph hash
  std::array<int, kMaxKeyInputs> operands{};  // in operand order (a - b and b - a differ)

  // Throws std::invalid_argument for an op with more than kMaxKeyInputs inputs.
  static OpKey of(const ir::Op& op, std::string extra = {});
  int newest_input() const { return num_inputs > 0 ? newest_first[0] : -1; }
  bool operator<(const OpKey& o) const;
};

}  // namespace mj::search
