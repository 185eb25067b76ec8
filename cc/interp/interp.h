#pragma once
// The reference interpreter: the definition of what a μGraph means (docs/ir-semantics.md).
// It executes a kernel graph op by op; a customized op runs its block graph literally,
// block by block and for-loop iteration by iteration, on tiles cut by imap/fmap and stored
// by omap. Online-softmax accumulators use the max over all iterations, so their value is
// the exact mathematical one (generated code computes the same with a running max).
// Callers that only need float64/float32 link cc/interp/float_interp.h instead of
// instantiating these templates.
#include <cstdint>
#include <vector>

#include "cc/interp/dense_tensor.h"
#include "cc/interp/domain.h"
#include "cc/ir/graph.h"

namespace mj::interp {

// inputs: one per kernel graph input, in order, with exactly that input's shape (IrError
// otherwise). Returns one tensor per marked output, in order.
template <class D>
std::vector<DenseTensor<typename D::Value>> interpret(
    const ir::KernelGraph& g, const std::vector<DenseTensor<typename D::Value>>& inputs,
    const D& domain);

// Runs one block graph on kernel-level tensors (its inputs in order); returns its outputs.
template <class D>
std::vector<DenseTensor<typename D::Value>> interpret_block_graph(
    const ir::BlockGraph& bg, const std::vector<DenseTensor<typename D::Value>>& inputs,
    const D& domain);

}  // namespace mj::interp

#include "cc/interp/interp_impl.h"
