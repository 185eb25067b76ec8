#include "cc/codegen/cpu/emit_handler.h"

#include <vector>

#include "cc/codegen/common/ffi_text.h"

#include "cc/codegen/cpu/emit_tile_io.h"

namespace mj::codegen::cpu {

using common::CodeWriter;
using common::dims_list;
using common::ffi_dtype;
using ir::BlockGraph;
using ir::Shape;
using ir::shape_str;

namespace {

using common::dims_list;
using common::ffi_dtype;

// Emits a check that `buffer` has exactly `shape`, returning InvalidArgument otherwise.
void emit_shape_check(CodeWriter& w, const std::string& buffer_dims, const Shape& shape,
                      const std::string& what) {
  w.open("");
  w.line("static const std::vector<int64_t> expected = {" + dims_list(shape) + "};");
  w.open("if (!(" + buffer_dims + " == xla::ffi::Span<const int64_t>(expected)))");
  w.line("return xla::ffi::Error::InvalidArgument(\"" + what + " must have shape " +
         shape_str(shape) + "\");");
  w.close();
  w.close();
}

}  // namespace

void emit_io_struct(CodeWriter& w, const BlockGraph& bg) {
  w.open("struct Io");
  for (int i = 0; i < bg.num_inputs(); ++i) {
    w.line("const " + std::string(storage_type(bg.kernel_input_dtype(i))) + "* in" +
           std::to_string(i) + ";");
  }
  for (int i = 0; i < bg.num_outputs(); ++i) {
    w.line(std::string(storage_type(bg.kernel_output_dtype(i))) + "* out" + std::to_string(i) +
           ";");
  }
  w.close(";");
}

void emit_handler_impl(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan,
                       const std::string& symbol) {
  std::string params = "xla::ffi::ThreadPool pool";
  for (int i = 0; i < bg.num_inputs(); ++i) {
    params +=
        ", xla::ffi::Buffer<" + ffi_dtype(bg.kernel_input_dtype(i)) + "> in" + std::to_string(i);
  }
  for (int i = 0; i < bg.num_outputs(); ++i) {
    params += ", xla::ffi::ResultBuffer<" + ffi_dtype(bg.kernel_output_dtype(i)) + "> out" +
              std::to_string(i);
  }
  w.open("xla::ffi::Error handler_impl(" + params + ")");
  std::vector<std::string> fields;
  for (int i = 0; i < bg.num_inputs(); ++i) {
    const std::string name = "in" + std::to_string(i);
    emit_shape_check(w, name + ".dimensions()", bg.kernel_input_shape(i),
                     symbol + ": input " + std::to_string(i));
    fields.push_back("static_cast<const " + std::string(storage_type(bg.kernel_input_dtype(i))) +
                     "*>(" + name + ".untyped_data())");
  }
  for (int i = 0; i < bg.num_outputs(); ++i) {
    const std::string name = "out" + std::to_string(i);
    emit_shape_check(w, name + "->dimensions()", bg.kernel_output_shape(i),
                     symbol + ": output " + std::to_string(i));
    fields.push_back("static_cast<" + std::string(storage_type(bg.kernel_output_dtype(i))) + "*>(" +
                     name + "->untyped_data())");
  }
  std::string init;
  for (size_t i = 0; i < fields.size(); ++i) init += (i ? ", " : "") + fields[i];
  w.line("const Io io{" + init + "};");
  w.line("mj_cpu::run_grid<Io>(pool, io, &run_blocks, " +
         std::to_string(bg.num_blocks() / plan.block_group) + ", " +
         std::to_string(plan.arena_floats * plan.block_group) + ");");
  w.line("return xla::ffi::Error::Success();");
  w.close();
}

void emit_handler_symbol(CodeWriter& w, const BlockGraph& bg, const std::string& symbol,
                         const std::string& kernel_namespace) {
  w.line("extern \"C\" __attribute__((visibility(\"default\"))) XLA_FFI_Error* " + symbol +
         "(XLA_FFI_CallFrame* call_frame);");
  w.line("XLA_FFI_DEFINE_HANDLER_SYMBOL(" + symbol + ", " + kernel_namespace + "::handler_impl,");
  std::string bind = "    xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()";
  for (int i = 0; i < bg.num_inputs(); ++i) {
    bind += "\n        .Arg<xla::ffi::Buffer<" + ffi_dtype(bg.kernel_input_dtype(i)) + ">>()";
  }
  for (int i = 0; i < bg.num_outputs(); ++i) {
    bind += "\n        .Ret<xla::ffi::Buffer<" + ffi_dtype(bg.kernel_output_dtype(i)) + ">>()";
  }
  w.line(bind + ");");
}

}  // namespace mj::codegen::cpu
