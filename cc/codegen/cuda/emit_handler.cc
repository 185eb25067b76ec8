#include "cc/codegen/cuda/emit_handler.h"

#include <vector>

#include "cc/codegen/common/ffi_text.h"

namespace mj::codegen::cuda {

using common::dims_list;
using common::ffi_dtype;
using ir::BlockGraph;
using ir::Op;
using ir::OpKind;
using ir::Shape;
using ir::shape_str;

namespace {

using common::dims_list;
using common::ffi_dtype;

void emit_shape_check(const Emit& e, const std::string& buffer_dims, const Shape& shape,
                      const std::string& what) {
  e.w.open("");
  e.w.line("static const std::vector<int64_t> expected = {" + dims_list(shape) + "};");
  e.w.open("if (!(" + buffer_dims + " == xla::ffi::Span<const int64_t>(expected)))");
  e.w.line("return xla::ffi::Error::InvalidArgument(\"" + what + " must have shape " +
           shape_str(shape) + "\");");
  e.w.close();
  e.w.close();
}

// The widest cp.async each input's staged tile uses: its base pointer must be aligned to it.
int required_alignment(const Emit& e, int input) {
  for (const Op& op : e.bg.ops()) {
    if (op.kind != OpKind::kInput || op.io_index != input) continue;
    const TilePlan& tile = e.plan.tiles[op.outputs.at(0)];
    if (tile.storage == Storage::kShared) return tile.copy_bytes;
  }
  return 0;
}

}  // namespace

void emit_io_struct(const Emit& e) {
  e.w.open("struct Io");
  for (int i = 0; i < e.bg.num_inputs(); ++i) {
    e.w.line("const " + std::string(element_type(e.bg.kernel_input_dtype(i))) + "* in" + str(i) +
             ";");
  }
  for (int i = 0; i < e.bg.num_outputs(); ++i) {
    e.w.line(std::string(element_type(e.bg.kernel_output_dtype(i))) + "* out" + str(i) + ";");
  }
  e.w.close(";");
}

void emit_handler_impl(const Emit& e, const std::string& symbol) {
  const BlockGraph& bg = e.bg;
  std::string params = "cudaStream_t stream";
  for (int i = 0; i < bg.num_inputs(); ++i) {
    params += ", xla::ffi::Buffer<" + ffi_dtype(bg.kernel_input_dtype(i)) + "> in" + str(i);
  }
  for (int i = 0; i < bg.num_outputs(); ++i) {
    params += ", xla::ffi::ResultBuffer<" + ffi_dtype(bg.kernel_output_dtype(i)) + "> out" + str(i);
  }
  e.w.open("xla::ffi::Error handler_impl(" + params + ")");
  std::vector<std::string> fields;
  for (int i = 0; i < bg.num_inputs(); ++i) {
    const std::string name = "in" + str(i);
    emit_shape_check(e, name + ".dimensions()", bg.kernel_input_shape(i),
                     symbol + ": input " + str(i));
    fields.push_back("static_cast<const " + std::string(element_type(bg.kernel_input_dtype(i))) +
                     "*>(" + name + ".untyped_data())");
  }
  for (int i = 0; i < bg.num_outputs(); ++i) {
    const std::string name = "out" + str(i);
    emit_shape_check(e, name + "->dimensions()", bg.kernel_output_shape(i),
                     symbol + ": output " + str(i));
    fields.push_back("static_cast<" + std::string(element_type(bg.kernel_output_dtype(i))) + "*>(" +
                     name + "->untyped_data())");
  }
  std::string init;
  for (size_t i = 0; i < fields.size(); ++i) init += (i ? ", " : "") + fields[i];
  e.w.line("const Io io{" + init + "};");
  for (int i = 0; i < bg.num_inputs(); ++i) {
    const int align = required_alignment(e, i);
    if (align <= 2) continue;
    e.w.open("if (reinterpret_cast<uintptr_t>(io.in" + str(i) + ") % " + str(align) + " != 0)");
    e.w.line("return xla::ffi::Error::InvalidArgument(\"" + symbol + ": input " + str(i) +
             " is not " + str(align) + "-byte aligned, which its cp.async tile loads need\");");
    e.w.close();
  }
  e.w.line("constexpr int kSmemBytes = " + str(e.plan.smem_bytes) + ";");
  // Above 48 KiB a kernel must opt in to dynamic shared memory, per device and function.
  e.w.open("if (kSmemBytes > 48 * 1024)");
  e.w.line(
      "const cudaError_t err = cudaFuncSetAttribute(kernel, "
      "cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);");
  e.w.open("if (err != cudaSuccess)");
  e.w.line("return xla::ffi::Error::Internal(std::string(\"" + symbol +
           ": cannot give the "
           "kernel \") + std::to_string(kSmemBytes) + \" bytes of shared memory: \" + "
           "cudaGetErrorString(err));");
  e.w.close();
  e.w.close();
  e.w.line("kernel<<<dim3(" + str(bg.grid()[0]) + ", " + str(bg.grid()[1]) + ", " +
           str(bg.grid()[2]) + "), " + str(e.plan.threads) + ", kSmemBytes, stream>>>(io);");
  e.w.line("const cudaError_t err = cudaGetLastError();");
  e.w.open("if (err != cudaSuccess)");
  e.w.line("return xla::ffi::Error::Internal(std::string(\"" + symbol +
           ": kernel launch failed: \") + cudaGetErrorString(err));");
  e.w.close();
  e.w.line("return xla::ffi::Error::Success();");
  e.w.close();
}

void emit_handler_symbol(const Emit& e, const std::string& symbol,
                         const std::string& kernel_namespace) {
  e.w.line("extern \"C\" __attribute__((visibility(\"default\"))) XLA_FFI_Error* " + symbol +
           "(XLA_FFI_CallFrame* call_frame);");
  e.w.line("XLA_FFI_DEFINE_HANDLER_SYMBOL(" + symbol + ", " + kernel_namespace + "::handler_impl,");
  std::string bind = "    xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<cudaStream_t>>()";
  for (int i = 0; i < e.bg.num_inputs(); ++i) {
    bind += "\n        .Arg<xla::ffi::Buffer<" + ffi_dtype(e.bg.kernel_input_dtype(i)) + ">>()";
  }
  for (int i = 0; i < e.bg.num_outputs(); ++i) {
    bind += "\n        .Ret<xla::ffi::Buffer<" + ffi_dtype(e.bg.kernel_output_dtype(i)) + ">>()";
  }
  e.w.line(bind + ");");
}

}  // namespace mj::codegen::cuda
