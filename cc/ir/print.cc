// Text form of μGraphs, one line per op, block graphs nested under their customized op.
#include "cc/ir/print.h"

#include <cstdio>
#include <cstdlib>

#include "cc/ir/thread_fusion.h"

namespace mj::ir {
namespace {

// The shortest decimal that reads back as the same double, so constants print exactly.
std::string number(double v) {
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string dim3(const Dim3& d) {
  return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) +
         ")";
}

std::string type_str(const Tensor& t) { return shape_str(t.shape) + " " + dtype_name(t.dtype); }

// "name(t1, t2, attrs)" for a computation op.
std::string call_str(const Op& op) {
  std::string s(op_kind_name(op.kind));
  s += "(";
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (i) s += ", ";
    s += "t" + std::to_string(op.inputs[i]);
  }
  switch (op_info(op.kind).attr) {
    case OpAttr::kScalar: s += ", " + number(op.scalar); break;
    case OpAttr::kEps: s += ", eps=" + number(op.scalar); break;
    case OpAttr::kDimReduce:
      s += ", dim=" + std::to_string(op.dim) + ", " + std::string(reduce_kind_name(op.reduce));
      break;
    case OpAttr::kDim: s += ", dim=" + std::to_string(op.dim); break;
    case OpAttr::kNone:
    case OpAttr::kBlockGraph: break;  // the block graph is printed below its op
  }
  return s + ")";
}

std::string lhs(const Op& op) {
  std::string s;
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    if (i) s += ", ";
    s += "t" + std::to_string(op.outputs[i]);
  }
  return s;
}

std::string results(const Graph& g, const Op& op) {
  std::string s;
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    if (i) s += ", ";
    s += type_str(g.tensors()[op.outputs[i]]);
  }
  return s;
}

}  // namespace

std::string to_string(const BlockGraph& g, int indent) {
  const std::string pad(indent, ' '), body_pad(indent + 2, ' ');
  const std::vector<int> groups = thread_fusion_groups(g);
  std::string s = pad + "block graph grid=" + dim3(g.grid()) +
                  " forloop_range=" + std::to_string(g.forloop_range()) + "\n";
  for (size_t o = 0; o < g.ops().size(); ++o) {
    const Op& op = g.ops()[o];
    s += body_pad;
    if (op.kind == OpKind::kInput) {
      const Tensor& t = g.tensors()[op.outputs[0]];
      s += lhs(op) + " = input#" + std::to_string(op.io_index) + " imap=" + dim3(op.imap) +
           " fmap=" + std::to_string(op.fmap) + " of " +
           shape_str(g.kernel_input_shape(op.io_index)) + "  tile " + type_str(t) + "  " +
           phase_name(t.phase);
    } else if (op.kind == OpKind::kOutput) {
      s += "output#" + std::to_string(op.io_index) + " = t" + std::to_string(op.inputs[0]) +
           " omap=" + dim3(op.omap) + "  -> " + shape_str(g.kernel_output_shape(op.io_index)) +
           " " + dtype_name(g.kernel_output_dtype(op.io_index));
    } else {
      const Tensor& t = g.tensors()[op.outputs[0]];
      s += lhs(op) + " = " + call_str(op) + "  " + results(g, op) + "  " + phase_name(t.phase);
      if (is_accumulator(op.kind)) s += "  accumulator";
      s += "  group " + std::to_string(groups[o]);
    }
    s += "\n";
  }
  return s;
}

std::string to_string(const KernelGraph& g) {
  std::string s = "kernel graph\n";
  for (const Op& op : g.ops()) {
    s += "  ";
    if (op.kind == OpKind::kInput) {
      s += lhs(op) + " = input#" + std::to_string(op.io_index) + "  " + results(g, op) + "\n";
    } else if (op.kind == OpKind::kOutput) {
      s += "output#" + std::to_string(op.io_index) + " = t" + std::to_string(op.inputs[0]) + "\n";
    } else {
      s += lhs(op) + " = " + call_str(op) + "  " + results(g, op) + "\n";
      if (op.block_graph) s += to_string(*op.block_graph, 4);
    }
  }
  return s;
}

}  // namespace mj::ir
