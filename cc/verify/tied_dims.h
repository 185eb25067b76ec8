#pragma once
// Every dim of every tensor of two kernel graphs (and of their block graphs) as a slot of
// DimClasses, tied by the shape rules of docs/ir-semantics.md and by the pairing of the two
// graphs' inputs and outputs, with each grid and for-loop split recorded as a required
// multiple of the kernel dim it splits. The input of shrink.h.
#include <map>
#include <vector>

#include "cc/ir/graph.h"
#include "cc/verify/dim_classes.h"

namespace mj::verify {

// Slot ids of one graph's tensors: dim d of tensor t is slot first[t] + d.
struct TensorSlots {
  std::vector<int> first;
  int slot(int t, int d) const { return first.at(t) + d; }
};

struct GraphDims {
  TensorSlots kernel;
  std::map<int, TensorSlots> blocks;  // keyed by the index of the customized op
};

struct TiedDims {
  DimClasses classes;
  GraphDims a, b;
};

// a and b must have the same input and output shapes (the verifier checks that first).
TiedDims tie_dims(const ir::KernelGraph& a, const ir::KernelGraph& b);

}  // namespace mj::verify
