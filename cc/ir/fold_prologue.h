#pragma once
// Folding the kernel-level ops that compute a fused kernel's input into its block graph, so
// that every block recomputes them on its own tile: how a program searched as two parts
// (subgraph.h) comes out as the one kernel neither part's search could make alone, such as
// qknorm_gqa's norms inside its attention kernel (the Mirage paper's μGraph), where the
// splice of the parts' best runs the norms as kernels of their own.
//
// The ops that fold are elementwise ops, reductions, rms_norm and matmuls; the walk back
// from a kernel's input stops at program inputs, concats, other fused kernels and ops it
// cannot fold (the sources). Each folded op runs on the tile of its output that the
// kernel's tile split implies: a dim the tile splits maps to the same dim of an elementwise
// op's inputs (whole where one broadcasts), of a reduction's input, and to a matmul's rows
// (A) or columns (B); a reduction's dim and a matmul's contraction are then always whole. An
// rms_norm whose normalized dim the tile splits does not fold (its output is whole there),
// and a block graph the IR's rules refuse leaves its kernel as it was. A source read under
// two splits is read twice. The result is verified like any other candidate.
#include <optional>

#include "cc/ir/graph.h"

namespace mj::ir {

// g with every input of its customized ops that folds, folded, and the kernel-level ops no
// longer read left out; nullopt when no input folds.
std::optional<KernelGraph> fold_prologues(const KernelGraph& g);

}  // namespace mj::ir
