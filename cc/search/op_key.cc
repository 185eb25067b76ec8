#include "cc/search/op_key.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <tuple>

namespace mj::search {

using ir::Op;

OpKey OpKey::of(const Op& op, std::string extra) {
  if (op.inputs.size() > size_t(kMaxKeyInputs)) {
    throw std::invalid_argument("OpKey: more than " + std::to_string(kMaxKeyInputs) + " inputs");
  }
  OpKey k;
  k.num_inputs = int(op.inputs.size());
  std::copy(op.inputs.begin(), op.inputs.end(), k.newest_first.begin());
  std::copy(op.inputs.begin(), op.inputs.end(), k.operands.begin());
  std::sort(k.newest_first.begin(), k.newest_first.begin() + k.num_inputs, std::greater<int>());
  k.kind = int(op.kind);
  k.dim = op.dim;
  k.reduce = int(op.reduce);
  k.scalar = op.scalar;
  k.extra = std::move(extra);
  return k;
}

bool OpKey::operator<(const OpKey& o) const {
  // Newest inputs first, lexicographically over the sorted ids (a shorter prefix first).
  const int n = std::min(num_inputs, o.num_inputs);
  for (int i = 0; i < n; ++i) {
    if (newest_first[i] != o.newest_first[i]) return newest_first[i] < o.newest_first[i];
  }
  if (num_inputs != o.num_inputs) return num_inputs < o.num_inputs;
  return std::tie(kind, dim, reduce, scalar, extra, operands) <
         std::tie(o.kind, o.dim, o.reduce, o.scalar, o.extra, o.operands);
}

}  // namespace mj::search
