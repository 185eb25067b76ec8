#pragma once
// How many of a block graph's loop steps one iteration of its generated CPU loop runs, and
// the graphs that therefore generate the same code. A product takes a number of rows of k
// per pass over its accumulator; a loop step of fewer reads and writes the accumulator that
// much more often for the same work, so the loop runs several steps an iteration where its
// values allow it (ir::coarsen_loop), and candidates that cut k more or less finely
// generate one kernel, as the cost model prices them alike.
#include <string>

#include "cc/ir/graph.h"

namespace mj::codegen::cpu {

// The steps an iteration of bg's generated loop runs: the fewest that give every product in
// the body the rows of k it takes per pass (or all of k), where that divides the loop; 1
// when the body has no product or its values do not allow it.
int step_factor(const ir::BlockGraph& bg);

// bg as its kernel is generated: its loop coarsened by step_factor (bg itself for 1).
ir::BlockGraph loop_form(const ir::BlockGraph& bg);

// A content hash of g in which every customized op's block graph is its loop_form and its
// arguments are in the order of the tensors they are: two candidates with the same hash
// generate the same CPU kernels, up to the order of their arguments.
std::string cpu_code_hash(const ir::KernelGraph& g);

}  // namespace mj::codegen::cpu
