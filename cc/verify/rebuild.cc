#include "cc/verify/rebuild.h"

#include <memory>
#include <string>
#include <vector>

#include "cc/ir/append_op.h"
#include "cc/ir/error.h"

namespace mj::verify {

using ir::BlockGraph;
using ir::Graph;
using ir::IrError;
using ir::KernelGraph;
using ir::Op;
using ir::op_kind_name;
using ir::OpKind;
using ir::Shape;
using ir::shape_str;

namespace {

// A computation op on the rebuilt ids of its inputs; returns the new tensor id.
int rebuild_op(Graph& out, const Op& op, const std::vector<int>& id) {
  std::vector<int> inputs;
  for (int t : op.inputs) inputs.push_back(id.at(t));
  return ir::append_op(out, op, inputs);
}

void check_shape(const Graph& out, int new_id, const Shape& want, const Op& op, int old_id,
                 const char* level) {
  const Shape& got = out.tensor(new_id).shape;
  if (got != want) {
    throw IrError("rebuild: " + std::string(level) + " " + std::string(op_kind_name(op.kind)) +
                  " produced t" + std::to_string(old_id) + " as " + shape_str(got) +
                  " where the tied dims give " + shape_str(want));
  }
}

std::shared_ptr<const BlockGraph> rebuild_block_graph(const BlockGraph& bg, int custom_op,
                                                      const std::vector<Shape>& kernel_inputs,
                                                      const ShapeOf& shape_of) {
  auto out = std::make_shared<BlockGraph>(bg.grid(), bg.forloop_range());
  std::vector<int> id(bg.tensors().size(), -1);
  for (const Op& op : bg.ops()) {
    int new_id = -1;
    if (op.kind == OpKind::kInput) {
      new_id = out->new_input(kernel_inputs.at(op.io_index), bg.kernel_input_dtype(op.io_index),
                              op.imap, op.fmap);
    } else if (op.kind == OpKind::kOutput) {
      out->new_output(id.at(op.inputs[0]), op.omap, bg.kernel_output_dtype(op.io_index));
      continue;
    } else {
      new_id = rebuild_op(*out, op, id);
    }
    const int old_id = op.outputs.at(0);
    id[old_id] = new_id;
    check_shape(*out, new_id, shape_of(custom_op, old_id), op, old_id, "block");
  }
  return out;
}

}  // namespace

KernelGraph rebuild_with_shapes(const KernelGraph& g, const ShapeOf& shape_of) {
  KernelGraph out;
  std::vector<int> id(g.tensors().size(), -1);
  for (int k = 0; k < int(g.ops().size()); ++k) {
    const Op& op = g.ops()[k];
    if (op.kind == OpKind::kInput) {
      const int old_id = op.outputs.at(0);
      id[old_id] = out.new_input(shape_of(-1, old_id), g.tensor(old_id).dtype);
    } else if (op.kind == OpKind::kOutput) {
      out.mark_output(id.at(op.inputs[0]));
    } else if (op.kind == OpKind::kCustomized) {
      std::vector<int> inputs;
      std::vector<Shape> shapes;
      for (int t : op.inputs) {
        inputs.push_back(id.at(t));
        shapes.push_back(out.tensor(id.at(t)).shape);
      }
      const std::vector<int> outs =
          out.customized(inputs, rebuild_block_graph(*op.block_graph, k, shapes, shape_of));
      for (size_t i = 0; i < outs.size(); ++i) {
        id[op.outputs.at(i)] = outs[i];
        check_shape(out, outs[i], shape_of(-1, op.outputs[i]), op, op.outputs[i], "kernel");
      }
    } else {
      const int old_id = op.outputs.at(0);
      id[old_id] = rebuild_op(out, op, id);
      check_shape(out, id[old_id], shape_of(-1, old_id), op, old_id, "kernel");
    }
  }
  return out;
}

}  // namespace mj::verify
