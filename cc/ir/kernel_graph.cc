// KernelGraph: program inputs, graph-defined (customized) ops and program outputs.
#include "cc/ir/shape_rules.h"

namespace mj::ir {

int KernelGraph::new_input(const Shape& shape, DType dtype) {
  check_valid_shape("new_input", "input shape", shape);
  Op op;
  op.kind = OpKind::kInput;
  op.io_index = int(inputs_.size());
  const int id = add_op(std::move(op), {shape}, dtype);
  inputs_.push_back(id);
  return id;
}

std::vector<int> KernelGraph::customized(const std::vector<int>& inputs,
                                         std::shared_ptr<const BlockGraph> bg) {
  if (!bg) ir_fail("customized", "the block graph is null");
  for (int in : inputs) check_id(in, "customized");
  if (bg->num_outputs() == 0) {
    ir_fail("customized", "the block graph has no outputs (call new_output first)");
  }
  if (int(inputs.size()) != bg->num_inputs()) {
    ir_fail("customized", "got " + std::to_string(inputs.size()) +
                              " inputs but the block graph declares " +
                              std::to_string(bg->num_inputs()));
  }
  for (int i = 0; i < bg->num_inputs(); ++i) {
    const Tensor& t = tensors_[inputs[i]];
    const Shape& want = bg->kernel_input_shape(i);
    if (t.shape != want) {
      ir_fail("customized", "input " + std::to_string(i) + " " + tensor_desc(*this, inputs[i]) +
                                " does not match the block graph's input " + std::to_string(i) +
                                " declared from " + shape_str(want));
    }
    if (t.dtype != bg->kernel_input_dtype(i)) {
      ir_fail("customized", "input " + std::to_string(i) + " " + tensor_desc(*this, inputs[i]) +
                                " has dtype " + dtype_name(t.dtype) +
                                " but the block graph's input " + std::to_string(i) +
                                " was declared " + dtype_name(bg->kernel_input_dtype(i)));
    }
  }
  // A private copy: later edits to the caller's builder must not change this graph.
  auto copy = std::make_shared<const BlockGraph>(*bg);
  std::vector<Shape> shapes;
  for (int i = 0; i < copy->num_outputs(); ++i) shapes.push_back(copy->kernel_output_shape(i));
  Op op;
  op.kind = OpKind::kCustomized;
  op.inputs = inputs;
  op.block_graph = copy;
  const int first = add_op(std::move(op), shapes, DType::kF32);
  std::vector<int> out;
  for (int i = 0; i < copy->num_outputs(); ++i) {
    tensors_[first + i].dtype = copy->kernel_output_dtype(i);
    out.push_back(first + i);
  }
  return out;
}

void KernelGraph::mark_output(int t) {
  check_id(t, "mark_output");
  Op op;
  op.kind = OpKind::kOutput;
  op.inputs = {t};
  op.io_index = int(outputs_.size());
  add_op(std::move(op), {}, DType::kF32);
  outputs_.push_back(t);
}

}  // namespace mj::ir
