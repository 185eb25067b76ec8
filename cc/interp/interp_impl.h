#pragma once
// Definitions of interpret() and interpret_block_graph() (declared in interp.h).
#include <string>
#include <vector>

#include "cc/interp/block_runner.h"
#include "cc/interp/dense_shape.h"
#include "cc/interp/dense_tensor.h"
#include "cc/interp/interp.h"
#include "cc/interp/tensor_ops.h"
#include "cc/ir/error.h"
#include "cc/ir/graph.h"
#include "cc/ir/op_kind.h"

namespace mj::interp {

// `what` is "interpret" or "interpret_block_graph"; `expected` the graph's input shapes.
template <class V>
void check_interp_inputs(const char* what, const std::vector<ir::Shape>& expected,
                         const std::vector<DenseTensor<V>>& inputs) {
  if (inputs.size() != expected.size()) {
    throw ir::IrError(std::string(what) + ": the graph has " + std::to_string(expected.size()) +
                      " inputs but " + std::to_string(inputs.size()) + " were given");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].shape != expected[i]) {
      throw ir::IrError(std::string(what) + ": input " + std::to_string(i) + " has shape " +
                        ir::shape_str(inputs[i].shape) + " but the graph's input " +
                        std::to_string(i) + " has shape " + ir::shape_str(expected[i]));
    }
    if (int64_t(inputs[i].data.size()) != num_elements(inputs[i].shape)) {
      throw ir::IrError(std::string(what) + ": input " + std::to_string(i) + " of shape " +
                        ir::shape_str(inputs[i].shape) + " holds " +
                        std::to_string(inputs[i].data.size()) + " values, not " +
                        std::to_string(num_elements(inputs[i].shape)));
    }
  }
}

// Runs every block of bg's grid on `inputs` (checked by the caller), read in place.
template <class D>
std::vector<DenseTensor<typename D::Value>> run_block_graph(
    const ir::BlockGraph& bg, const std::vector<const DenseTensor<typename D::Value>*>& inputs,
    const D& domain) {
  using Tensor = DenseTensor<typename D::Value>;
  std::vector<Tensor> outputs;
  for (int i = 0; i < bg.num_outputs(); ++i) {
    outputs.push_back(filled_tensor(bg.kernel_output_shape(i), domain.constant(0.0)));
  }
  BlockRunner<D> runner(bg, inputs, domain);
  const ir::Dim3& grid = bg.grid();
  for (int bz = 0; bz < grid[2]; ++bz) {
    for (int by = 0; by < grid[1]; ++by) {
      for (int bx = 0; bx < grid[0]; ++bx) runner.run(ir::Dim3{bx, by, bz}, outputs);
    }
  }
  return outputs;
}

template <class D>
std::vector<DenseTensor<typename D::Value>> interpret_block_graph(
    const ir::BlockGraph& bg, const std::vector<DenseTensor<typename D::Value>>& inputs,
    const D& domain) {
  using Tensor = DenseTensor<typename D::Value>;
  std::vector<ir::Shape> expected;
  for (int i = 0; i < bg.num_inputs(); ++i) expected.push_back(bg.kernel_input_shape(i));
  check_interp_inputs("interpret_block_graph", expected, inputs);
  std::vector<const Tensor*> input_ptrs;
  for (const Tensor& t : inputs) input_ptrs.push_back(&t);
  return run_block_graph(bg, input_ptrs, domain);
}

template <class D>
std::vector<DenseTensor<typename D::Value>> interpret(
    const ir::KernelGraph& g, const std::vector<DenseTensor<typename D::Value>>& inputs,
    const D& domain) {
  using Tensor = DenseTensor<typename D::Value>;
  std::vector<ir::Shape> expected;
  for (int id : g.input_ids()) expected.push_back(g.tensor(id).shape);
  check_interp_inputs("interpret", expected, inputs);

  // Inputs are read in place; every computed tensor is owned here.
  std::vector<const Tensor*> value(g.tensors().size(), nullptr);
  std::vector<Tensor> owned(g.tensors().size());
  for (size_t i = 0; i < inputs.size(); ++i) value[g.input_ids()[i]] = &inputs[i];

  auto set = [&](const ir::Op& op, int t, Tensor v) {
    if (v.shape != g.tensor(t).shape) {
      throw ir::IrError("interpret: " + std::string(ir::op_kind_name(op.kind)) + " computed t" +
                        std::to_string(t) + " with shape " + ir::shape_str(v.shape) +
                        " but the graph declares " + ir::shape_str(g.tensor(t).shape));
    }
    owned[t] = std::move(v);
    value[t] = &owned[t];
  };

  for (const ir::Op& op : g.ops()) {
    if (op.kind == ir::OpKind::kInput || op.kind == ir::OpKind::kOutput) continue;
    std::vector<const Tensor*> args;
    for (int t : op.inputs) args.push_back(value.at(t));
    if (op.kind == ir::OpKind::kCustomized) {
      // The IR checked these against the block graph's declared inputs at construction.
      std::vector<Tensor> results = run_block_graph(*op.block_graph, args, domain);
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        set(op, op.outputs[k], std::move(results.at(k)));
      }
    } else {
      set(op, op.outputs.at(0), eval_shared_op(domain, op, args));
    }
  }

  std::vector<Tensor> result;
  for (int id : g.output_ids()) result.push_back(*value.at(id));
  return result;
}

}  // namespace mj::interp
