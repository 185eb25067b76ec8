#pragma once
// The interpreter instantiated for float64 and float32, compiled once in float_interp.cc, so
// callers such as the Python bindings link these instead of instantiating the templates.
#include <vector>

#include "cc/interp/dense_tensor.h"
#include "cc/ir/graph.h"

namespace mj::interp {

std::vector<DenseTensor<double>> interpret_f64(const ir::KernelGraph& g,
                                               const std::vector<DenseTensor<double>>& inputs);
std::vector<DenseTensor<float>> interpret_f32(const ir::KernelGraph& g,
                                              const std::vector<DenseTensor<float>>& inputs);

std::vector<DenseTensor<double>> interpret_block_graph_f64(
    const ir::BlockGraph& bg, const std::vector<DenseTensor<double>>& inputs);
std::vector<DenseTensor<float>> interpret_block_graph_f32(
    const ir::BlockGraph& bg, const std::vector<DenseTensor<float>>& inputs);

}  // namespace mj::interp
