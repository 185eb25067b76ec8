#pragma once
// Cutting a program the search cannot fuse whole into a prefix and a tail, and splicing
// replacements for the tail, or for both parts, back together.
//
// The search's limits (kernel ops, block ops) are sized for one fused kernel; a program such
// as qknorm_gqa (two norms, then attention) needs more ops than that in one kernel. The cut is
// made before the first matmul that reads a computed value (not a program input): the ops
// before it stay as they are, and the tail becomes a program of its own whose inputs are the
// values that cross the cut. A tail candidate spliced back gives a graph over the original
// inputs, to be verified against the original like any other candidate.
#include <optional>
#include <vector>

#include "cc/ir/graph.h"

namespace mj::ir {

struct GraphSplit {
  KernelGraph prefix;         // the original's ops before the cut (output ops left out),
                              // with the original's ids
  KernelGraph tail;           // the ops from the cut on, over the values that cross the cut
  int cut_tensor = -1;        // the first matmul's output (original id), for reports
  std::vector<int> boundary;  // original ids of the tail's inputs, in order
  // Original ids of the outputs made before the cut (a residual stream that a norm and its
  // matmul read, returned for the next layer): the prefix computes them, the tail does not
  // see them.
  std::vector<int> passed;
  // Per output of the original, in order: k >= 0 for the tail's k-th output, -1 - k for
  // passed[k].
  std::vector<int> output_order;
};

// The split of g, or nullopt when it has no matmul of a computed value, nothing but inputs
// before it, or no output made after it. Outputs made before the cut (their output ops placed
// before it or after) are `passed`.
std::optional<GraphSplit> split_before_first_computed_matmul(const KernelGraph& g);

// The original program with its tail replaced by `tail_candidate`, a graph over the tail's
// inputs in order (such as a search result for split.tail). IrError when the candidate's
// inputs do not match the tail's.
KernelGraph splice(const GraphSplit& split, const KernelGraph& tail_candidate);

// The prefix as a program of its own, to be searched like the tail: the original's inputs,
// the ops before the cut, and as outputs the boundary values it computes (those that are not
// program inputs), in boundary order, then the passed outputs not among them.
KernelGraph prefix_program(const GraphSplit& split);

// The original program with both parts replaced: `prefix_candidate` a graph over the
// original's inputs computing prefix_program's outputs in order, `tail_candidate` as in
// splice. IrError when either does not match its part's inputs or outputs.
KernelGraph splice_parts(const GraphSplit& split, const KernelGraph& prefix_candidate,
                         const KernelGraph& tail_candidate);

}  // namespace mj::ir
