#include "cc/ir/append_op.h"

#include <string>

#include "cc/ir/error.h"

namespace mj::ir {
namespace {

BlockGraph& block_graph_of(Graph& g, const Op& like) {
  auto* bg = dynamic_cast<BlockGraph*>(&g);
  if (!bg) {
    throw IrError("append_op: " + std::string(op_kind_name(like.kind)) +
                  " is an accumulator, legal in block graphs only");
  }
  return *bg;
}

}  // namespace

int append_op(Graph& g, const Op& like, const std::vector<int>& inputs) {
  const OpInfo& info = op_info(like.kind);
  if (info.arity >= 0 && int(inputs.size()) != info.arity) {
    throw IrError("append_op: " + std::string(info.name) + " takes " + std::to_string(info.arity) +
                  " inputs, got " + std::to_string(inputs.size()));
  }
  switch (info.cls) {
    case OpClass::kUnary: return g.unary(like.kind, inputs[0], like.scalar);
    case OpClass::kBinary: return g.binary(like.kind, inputs[0], inputs[1], like.scalar);
    case OpClass::kMatmul: return g.matmul(inputs[0], inputs[1]);
    case OpClass::kReduce: return g.reduce(inputs[0], like.dim, like.reduce);
    case OpClass::kRmsNorm: return g.rms_norm(inputs[0], like.scalar);
    case OpClass::kConcat: return g.concat(inputs[0], inputs[1], like.dim);
    case OpClass::kAccum:
    case OpClass::kAccumLast:
      return block_graph_of(g, like).accum(like.kind, inputs[0], like.scalar);
    case OpClass::kAccumMatmul:
      return block_graph_of(g, like).accum_exp_matmul(inputs[0], inputs[1]);
    case OpClass::kBoundary:
    case OpClass::kCustomized: break;
  }
  throw IrError("append_op: " + std::string(info.name) +
                " is not a computation op (its level's builder takes more than its inputs)");
}

void copy_kernel_op(const KernelGraph& from, const Op& op, KernelGraph& to, std::vector<int>& id) {
  std::vector<int> inputs;
  for (int t : op.inputs) inputs.push_back(id.at(t));
  std::vector<int> outputs;
  switch (op.kind) {
    case OpKind::kInput: {
      const Tensor& t = from.tensor(op.outputs[0]);
      outputs = {to.new_input(t.shape, t.dtype)};
      break;
    }
    case OpKind::kOutput: to.mark_output(inputs.at(0)); break;
    case OpKind::kCustomized: outputs = to.customized(inputs, op.block_graph); break;
    default: outputs = {append_op(to, op, inputs)}; break;
  }
  for (size_t i = 0; i < outputs.size(); ++i) id.at(op.outputs[i]) = outputs[i];
}

void copy_block_op(const BlockGraph& from, const Op& op, BlockGraph& to, std::vector<int>& id) {
  if (op.kind == OpKind::kInput) {
    id.at(op.outputs[0]) = to.new_input(from.kernel_input_shape(op.io_index),
                                        from.kernel_input_dtype(op.io_index), op.imap, op.fmap);
    return;
  }
  std::vector<int> inputs;
  for (int t : op.inputs) inputs.push_back(id.at(t));
  if (op.kind == OpKind::kOutput) {
    to.new_output(inputs.at(0), op.omap, from.kernel_output_dtype(op.io_index));
    return;
  }
  id.at(op.outputs[0]) = append_op(to, op, inputs);
}

}  // namespace mj::ir
