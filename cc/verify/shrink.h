#pragma once
// Shrunk instances: checking a 4096 x 6144 matmul in a finite field for every
// candidate is too slow, so both graphs are rebuilt with smaller dims that keep the same ops,
// grids, for-loop ranges, maps and split counts, with each tile cut to a few elements.
//
// Dims are tied into classes (tied_dims.h, dim_classes.h): equal across elementwise ops,
// matmul m/k/n and batch dims, reduce's and rms_norm's kept dims, concat's operands, block
// tiles and the kernel tensors they cut or store, and input i / output i of the two graphs.
// Each class is scaled by one ratio that keeps every split dividing. Concat is scaled like
// everything else (its sizes add up, which scaling preserves), so no class keeps its full
// size unless a size-1 dim belongs to it.
//
// Equivalence on the shrunk pair is evidence, not proof, of equivalence at full size: it
// holds when both graphs compute the same function for every size of the same structure,
// which is what their construction from the same grids and maps suggests.
#include <cstdint>
#include <unordered_map>
#include <utility>

#include "cc/ir/graph.h"

namespace mj::verify {

// Both graphs rebuilt with shrunk dims. Throws (IrError or std::logic_error) naming the
// reason when the pair cannot be shrunk consistently.
std::pair<ir::KernelGraph, ir::KernelGraph> shrink_pair(const ir::KernelGraph& a,
                                                        const ir::KernelGraph& b, int max_tile);

// The counts the means of a shrunk graph divide by at full size: for every reduce mean,
// rms_norm, accum_mean_last and accum_rms_last of `shrunk`, the number of values the same op
// of `full` averages. A shrunk mean that divided by its own, smaller count would tie the
// constant 1/n to the shrunk size: mean(x) would equal sum(x) * 0.5 once n shrinks to 2, and
// no longer equal sum(x) * (1/n). `shrunk` must come from shrink_pair(full, ...).
std::unordered_map<const ir::Op*, int64_t> full_size_counts(const ir::KernelGraph& full,
                                                            const ir::KernelGraph& shrunk);

// About how many scalar values interpreting g computes: every kernel tensor's elements,
// every block tile's elements per block and loop iteration, and the products of each matmul.
// Saturates near 2^62.
int64_t instance_size(const ir::KernelGraph& g);

}  // namespace mj::verify
