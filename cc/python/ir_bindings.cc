// Kernel and block graphs on integer tensor ids, plus copies of their tensors and ops for
// reading back. Kinds, dtypes and phases cross as the C++ core's own names (strings).
#include <memory>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "cc/ir/cones.h"
#include "cc/ir/fold_prologue.h"
#include "cc/ir/graph.h"
#include "cc/ir/hash.h"
#include "cc/ir/print.h"
#include "cc/ir/serialize.h"
#include "cc/ir/split_kv.h"
#include "cc/ir/subgraph.h"
#include "cc/ir/thread_fusion.h"
#include "cc/python/bindings.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace mj::python {

using ir::block_graph_hash;
using ir::BlockGraph;
using ir::Dim3;
using ir::dtype_name;
using ir::Graph;
using ir::graph_hash;
using ir::KernelGraph;
using ir::Op;
using ir::op_kind_name;
using ir::OpKind;
using ir::parse_dtype;
using ir::parse_op_kind;
using ir::parse_reduce_kind;
using ir::phase_name;
using ir::reduce_kind_name;
using ir::ReduceKind;
using ir::Shape;
using ir::Tensor;
using ir::thread_fusion_groups;
using ir::to_string;

namespace {

std::string name_of(OpKind k) { return std::string(op_kind_name(k)); }
std::string name_of(ReduceKind k) { return std::string(reduce_kind_name(k)); }

void bind_tensor_and_op(nb::module_& m) {
  nb::class_<Tensor>(m, "TensorInfo")
      .def_ro("shape", &Tensor::shape)
      .def_prop_ro("dtype", [](const Tensor& t) { return std::string(dtype_name(t.dtype)); })
      .def_ro("producer", &Tensor::producer)
      .def_ro("output_index", &Tensor::output_index)
      .def_prop_ro("phase", [](const Tensor& t) { return std::string(phase_name(t.phase)); });

  nb::class_<Op>(m, "OpInfo")
      .def_prop_ro("kind", [](const Op& op) { return name_of(op.kind); })
      .def_ro("inputs", &Op::inputs)
      .def_ro("outputs", &Op::outputs)
      .def_ro("scalar", &Op::scalar)
      .def_ro("dim", &Op::dim)
      .def_prop_ro("reduce_kind", [](const Op& op) { return name_of(op.reduce); })
      .def_ro("imap", &Op::imap)
      .def_ro("fmap", &Op::fmap)
      .def_ro("omap", &Op::omap)
      .def_ro("io_index", &Op::io_index)
      // A copy: the Python side owns it outright and cannot reach into the kernel graph.
      .def_prop_ro("block_graph", [](const Op& op) -> nb::object {
        if (!op.block_graph) return nb::none();
        return nb::cast(BlockGraph(*op.block_graph));
      });
}

void bind_graph_base(nb::module_& m) {
  nb::class_<Graph>(m, "Graph")
      .def(
          "unary",
          [](Graph& g, const std::string& kind, int x, double scalar) {
            return g.unary(parse_op_kind(kind), x, scalar);
          },
          "kind"_a, "x"_a, "scalar"_a = 0.0)
      .def(
          "binary",
          [](Graph& g, const std::string& kind, int a, int b, double scalar) {
            return g.binary(parse_op_kind(kind), a, b, scalar);
          },
          "kind"_a, "a"_a, "b"_a, "scalar"_a = 0.0)
      .def("matmul", &Graph::matmul, "a"_a, "b"_a)
      .def(
          "reduce",
          [](Graph& g, int x, int dim, const std::string& kind) {
            return g.reduce(x, dim, parse_reduce_kind(kind));
          },
          "x"_a, "dim"_a, "kind"_a)
      .def("rms_norm", &Graph::rms_norm, "x"_a, "eps"_a)
      .def("concat", &Graph::concat, "a"_a, "b"_a, "dim"_a)
      .def("num_tensors", [](const Graph& g) { return g.tensors().size(); })
      .def("tensor", &Graph::tensor, "id"_a)
      .def("num_ops", [](const Graph& g) { return g.ops().size(); })
      .def(
          "op", [](const Graph& g, size_t i) { return g.ops().at(i); }, "index"_a)
      .def("input_ids", &Graph::input_ids)
      .def("output_ids", &Graph::output_ids);
}

void bind_kernel_graph(nb::module_& m) {
  nb::class_<KernelGraph, Graph>(m, "KernelGraph")
      .def(nb::init<>())
      .def(
          "new_input",
          [](KernelGraph& g, const Shape& shape, const std::string& dtype) {
            return g.new_input(shape, parse_dtype(dtype));
          },
          "shape"_a, "dtype"_a)
      .def(
          "customized",
          [](KernelGraph& g, const std::vector<int>& inputs, const BlockGraph& bg) {
            return g.customized(inputs, std::make_shared<const BlockGraph>(bg));
          },
          "inputs"_a, "block_graph"_a)
      .def("mark_output", &KernelGraph::mark_output, "t"_a)
      .def("hash", [](const KernelGraph& g) { return graph_hash(g); })
      .def("to_string", [](const KernelGraph& g) { return to_string(g); })
      .def("to_json", [](const KernelGraph& g) { return ir::kernel_graph_to_json(g); })
      .def_static(
          "from_json", [](std::string_view text) { return ir::kernel_graph_from_json(text); },
          "text"_a);
}

void bind_block_graph(nb::module_& m) {
  nb::class_<BlockGraph, Graph>(m, "BlockGraph")
      .def(nb::init<Dim3, int>(), "grid"_a, "forloop_range"_a)
      .def(
          "new_input",
          [](BlockGraph& g, const Shape& kernel_shape, const std::string& dtype, Dim3 imap,
             int fmap) { return g.new_input(kernel_shape, parse_dtype(dtype), imap, fmap); },
          "kernel_shape"_a, "dtype"_a, "imap"_a, "fmap"_a)
      .def(
          "accum",
          [](BlockGraph& g, const std::string& kind, int x, double scalar) {
            return g.accum(parse_op_kind(kind), x, scalar);
          },
          "kind"_a, "x"_a, "scalar"_a = 0.0)
      .def("accum_exp_matmul", &BlockGraph::accum_exp_matmul, "s"_a, "v"_a)
      .def(
          "new_output",
          [](BlockGraph& g, int t, Dim3 omap, const std::string& dtype) {
            g.new_output(t, omap, parse_dtype(dtype));
          },
          "t"_a, "omap"_a, "dtype"_a)
      .def_prop_ro("grid", &BlockGraph::grid)
      .def_prop_ro("forloop_range", &BlockGraph::forloop_range)
      .def_prop_ro("num_blocks", &BlockGraph::num_blocks)
      .def_prop_ro("num_inputs", &BlockGraph::num_inputs)
      .def_prop_ro("num_outputs", &BlockGraph::num_outputs)
      .def("kernel_input_shape", &BlockGraph::kernel_input_shape, "i"_a)
      .def(
          "kernel_input_dtype",
          [](const BlockGraph& g, int i) {
            return std::string(dtype_name(g.kernel_input_dtype(i)));
          },
          "i"_a)
      .def("kernel_output_shape", &BlockGraph::kernel_output_shape, "i"_a)
      .def(
          "kernel_output_dtype",
          [](const BlockGraph& g, int i) {
            return std::string(dtype_name(g.kernel_output_dtype(i)));
          },
          "i"_a)
      .def("fusion_groups", [](const BlockGraph& g) { return thread_fusion_groups(g); })
      .def("hash", [](const BlockGraph& g) { return block_graph_hash(g); })
      .def(
          "to_string", [](const BlockGraph& g, int indent) { return to_string(g, indent); },
          "indent"_a = 0);
}

// The op table (cc/ir/ops.def), one dict per kind in table order: what the Python side needs
// to know about an op without a list of its own.
nb::list op_schema() {
  nb::list table;
  for (int k = 0; k < ir::kNumOpKinds; ++k) {
    const ir::OpInfo& info = ir::op_info(OpKind(k));
    nb::list levels;
    if (ir::legal_at_kernel_level(OpKind(k))) levels.append("kernel");
    if (ir::legal_at_block_level(OpKind(k))) levels.append("block");
    nb::dict row;
    row["name"] = std::string(info.name);
    row["arity"] = info.arity < 0 ? nb::object(nb::none()) : nb::object(nb::int_(info.arity));
    row["levels"] = levels;
    row["class"] = std::string(ir::op_class_name(info.cls));
    row["attribute"] = std::string(ir::op_attr_name(info.attr));
    row["flops"] = info.flops;
    table.append(row);
  }
  return table;
}

void bind_subgraph(nb::module_& m) {
  // Graphs are returned as copies: the Python handles own them outright.
  nb::class_<ir::GraphSplit>(m, "GraphSplit")
      .def_prop_ro("prefix", [](const ir::GraphSplit& s) { return s.prefix; })
      .def_prop_ro("tail", [](const ir::GraphSplit& s) { return s.tail; })
      .def_ro("cut_tensor", &ir::GraphSplit::cut_tensor)
      .def_ro("boundary", &ir::GraphSplit::boundary);
  m.def("split_before_first_computed_matmul", &ir::split_before_first_computed_matmul, "graph"_a);
  m.def("splice", &ir::splice, "split"_a, "tail_candidate"_a);
  m.def("prefix_program", &ir::prefix_program, "split"_a);
  m.def("splice_parts", &ir::splice_parts, "split"_a, "prefix_candidate"_a, "tail_candidate"_a);
  m.def("fold_prologues", &ir::fold_prologues, "graph"_a,
        "The graph with the kernel-level ops computing its fused kernels' inputs folded into "
        "their block graphs where each tile holds the dims they reduce whole (cc/ir/"
        "fold_prologue.h); None when nothing folds.");
  m.def("split_kv", &ir::split_kv, "graph"_a, "splits"_a,
        "The graph with its first online-softmax kernel split into the split-KV form (the "
        "partials over slices of the keys, their max, a combine kernel), once per count in "
        "splits that divides its for-loop (cc/ir/split_kv.h); [] when it has no such kernel.");
  nb::class_<ir::OutputCone>(m, "OutputCone")
      .def_prop_ro("program", [](const ir::OutputCone& c) { return c.program; })
      .def_ro("inputs", &ir::OutputCone::inputs)
      .def_ro("outputs", &ir::OutputCone::outputs);
  m.def("output_cones", &ir::output_cones, "graph"_a);
  m.def("join_cones", &ir::join_cones, "graph"_a, "cones"_a, "candidates"_a);
}

}  // namespace

void bind_ir(nb::module_& m) {
  m.attr("GRAPH_JSON_FORMAT") = std::string(ir::kGraphJsonFormat);
  m.attr("GRAPH_JSON_VERSION") = ir::kGraphJsonVersion;
  m.def("op_schema", &op_schema,
        "The op table: a dict per op kind (name, arity (None: any), levels, class, attribute, "
        "flops per element), in the order of cc/ir/ops.def.");
  bind_tensor_and_op(m);
  bind_graph_base(m);
  bind_kernel_graph(m);
  bind_block_graph(m);
  bind_subgraph(m);
}

}  // namespace mj::python
