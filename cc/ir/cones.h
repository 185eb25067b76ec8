#pragma once
// A program whose outputs are computed apart, such as a decode step's q, k and v projections
// of one normed activation: three matmuls of different widths that no single block graph
// holds, so the search of the whole finds nothing, though each projection with its norm is
// the RMSNorm + Linear it fuses readily. Each group of outputs that shares no matmul with the
// others is a program of its own, its cone (the ops it needs; elementwise work and norms the
// groups share are recomputed in each), searched apart. A candidate per cone, joined, gives
// a program of the whole, to be verified against it like any other candidate.
#include <vector>

#include "cc/ir/graph.h"

namespace mj::ir {

struct OutputCone {
  KernelGraph program;       // the inputs it reads (in the original's order), its ops, outputs
  std::vector<int> inputs;   // per program input, the original's input position
  std::vector<int> outputs;  // per program output, the original's output position
};

// The cones of g's outputs, grouped so that no two groups share a matmul or customized op,
// in the order of their first outputs; empty when that leaves a single group.
std::vector<OutputCone> output_cones(const KernelGraph& g);

// One program over g's inputs from a candidate per cone (candidates[i] computes
// cones[i].program's outputs from its inputs), its outputs in g's order. IrError when a
// candidate's inputs or outputs differ from its cone's in number, shape or dtype.
KernelGraph join_cones(const KernelGraph& g, const std::vector<OutputCone>& cones,
                       const std::vector<KernelGraph>& candidates);

}  // namespace mj::ir
