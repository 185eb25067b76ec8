#include "cc/interp/float_interp.h"

#include "cc/interp/domain.h"
#include "cc/interp/interp.h"

namespace mj::interp {

using ir::BlockGraph;
using ir::KernelGraph;

std::vector<DenseTensor<double>> interpret_f64(const KernelGraph& g,
                                               const std::vector<DenseTensor<double>>& inputs) {
  return interpret(g, inputs, FloatDomain<double>{});
}

std::vector<DenseTensor<float>> interpret_f32(const KernelGraph& g,
                                              const std::vector<DenseTensor<float>>& inputs) {
  return interpret(g, inputs, FloatDomain<float>{});
}

std::vector<DenseTensor<double>> interpret_block_graph_f64(
    const BlockGraph& bg, const std::vector<DenseTensor<double>>& inputs) {
  return interpret_block_graph(bg, inputs, FloatDomain<double>{});
}

std::vector<DenseTensor<float>> interpret_block_graph_f32(
    const BlockGraph& bg, const std::vector<DenseTensor<float>>& inputs) {
  return interpret_block_graph(bg, inputs, FloatDomain<float>{});
}

}  // namespace mj::interp
