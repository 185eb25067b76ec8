#pragma once
// A plain row-major tensor of domain values: what the interpreter consumes and produces.
#include <vector>

#include "cc/ir/graph.h"

namespace mj::interp {

template <class V>
struct DenseTensor {
  ir::Shape shape;
  std::vector<V> data;  // row-major
};

}  // namespace mj::interp
