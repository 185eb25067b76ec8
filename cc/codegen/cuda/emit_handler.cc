#include "cc/codegen/cuda/emit_handler.h"

#include <vector>

#include "cc/codegen/common/ffi_text.h"

namespace mj::codegen::cuda {

using common::ffi_dtype;
using ir::BlockGraph;
using ir::Op;
using ir::OpKind;
using ir::Shape;
using ir::shape_str;

namespace {

using common::ffi_dtype;

// A buffer of the same elements in another shape is accepted, as by the CPU kernels' handler
// (cc/python/cpu_dispatch.cc): row-major, a reshape is the same bytes.
void emit_shape_check(const Emit& e, const std::string& buffer, const Shape& shape,
                      const std::string& what) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  e.w.open("if (" + buffer + "element_count() != size_t(" + std::to_string(count) + "))");
  e.w.line("return xla::ffi::Error::InvalidArgument(\"" + what + " must have shape " +
           shape_str(shape) + " (or a reshape of it)\");");
  e.w.close();
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
  if (e.plan.split_k > 1) e.w.line("float* ws;  // split-K partial sums");
  e.w.close(";");
}

void emit_handler_impl(const Emit& e, const std::string& symbol) {
  const BlockGraph& bg = e.bg;
  const bool split = e.plan.split_k > 1;
  e.w.line("constexpr int kSmemBytes = " + str(e.plan.smem_bytes) + ";");
  e.w.line("constexpr int kThreads = " + str(e.plan.threads) + ";");
  if (split) {
    const int64_t blocks = int64_t(bg.grid()[0]) * bg.grid()[1] * bg.grid()[2];
    e.w.line("constexpr int kSplitK = " + str(e.plan.split_k) + ";");
    e.w.line("constexpr int64_t kWorkspaceBytes = " +
             str(blocks * e.plan.split_k * e.plan.workspace_floats * 4) + ";");
  }
  e.w.line("");
  // Once per device, before the first launch (and again from the exported check at load):
  // whether the kernel can run there at all, with its shared memory granted.
  e.w.open("inline const char* prepare(int device)");
  e.w.line("static std::once_flag once[mj_cuda::kMaxDevices];");
  e.w.line("static std::string problem[mj_cuda::kMaxDevices];");
  e.w.line(
      "if (device < 0 || device >= mj_cuda::kMaxDevices) return \"device ordinal out of "
      "range\";");
  if (split) {
    e.w.line(
        "std::call_once(once[device], [device] { problem[device] = "
        "mj_cuda::prepare_kernel(reinterpret_cast<const void*>(&kernel_partial), device, "
        "kSmemBytes, kThreads); if (problem[device].empty()) problem[device] = "
        "mj_cuda::prepare_kernel(reinterpret_cast<const void*>(&kernel_finish), device, "
        "kSmemBytes, kThreads); });");
  } else {
    e.w.line(
        "std::call_once(once[device], [device] { problem[device] = "
        "mj_cuda::prepare_kernel(reinterpret_cast<const void*>(&kernel), device, "
        "kSmemBytes, kThreads); });");
  }
  e.w.line("return problem[device].empty() ? nullptr : problem[device].c_str();");
  e.w.close();
  e.w.line("");
  std::string params = "cudaStream_t stream, int32_t device";
  if (split) params += ", xla::ffi::ScratchAllocator scratch";
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
    emit_shape_check(e, name + ".", bg.kernel_input_shape(i), symbol + ": input " + str(i));
    fields.push_back("static_cast<const " + std::string(element_type(bg.kernel_input_dtype(i))) +
                     "*>(" + name + ".untyped_data())");
  }
  for (int i = 0; i < bg.num_outputs(); ++i) {
    const std::string name = "out" + str(i);
    emit_shape_check(e, name + "->", bg.kernel_output_shape(i), symbol + ": output " + str(i));
    fields.push_back("static_cast<" + std::string(element_type(bg.kernel_output_dtype(i))) + "*>(" +
                     name + "->untyped_data())");
  }
  e.w.open("if (const char* problem = prepare(device))");
  e.w.line("return xla::ffi::Error(xla::ffi::ErrorCode::kFailedPrecondition, std::string(\"" +
           symbol + ": \") + problem);");
  e.w.close();
  std::string init;
  for (size_t i = 0; i < fields.size(); ++i) init += (i ? ", " : "") + fields[i];
  e.w.line("Io io{" + init + "};");
  if (split) {
    e.w.line("const std::optional<void*> ws = scratch.Allocate(kWorkspaceBytes, 16);");
    e.w.open("if (!ws.has_value())");
    e.w.line("return xla::ffi::Error(xla::ffi::ErrorCode::kResourceExhausted, \"" + symbol +
             ": no scratch memory for the split-K partial sums (\" + "
             "std::to_string(kWorkspaceBytes) + \" bytes)\");");
    e.w.close();
    e.w.line("io.ws = static_cast<float*>(*ws);");
  }
  e.w.line("void* args[] = {&io};");
  // cudaLaunchKernel returns this launch's own error; cudaGetLastError after <<<>>> could
  // return an earlier one of someone else's.
  const std::string grid = str(bg.grid()[0]) + ", " + str(bg.grid()[1]) + ", ";
  if (split) {
    e.w.line(
        "cudaError_t err = cudaLaunchKernel(reinterpret_cast<const void*>(&kernel_partial), "
        "dim3(" +
        grid + str(bg.grid()[2]) +
        " * kSplitK), dim3(kThreads), args, "
        "kSmemBytes, stream);");
    e.w.open("if (err == cudaSuccess)");
    e.w.line("err = cudaLaunchKernel(reinterpret_cast<const void*>(&kernel_finish), dim3(" + grid +
             str(bg.grid()[2]) + "), dim3(kThreads), args, kSmemBytes, stream);");
    e.w.close();
  } else {
    e.w.line(
        "const cudaError_t err = cudaLaunchKernel(reinterpret_cast<const void*>(&kernel), "
        "dim3(" +
        grid + str(bg.grid()[2]) +
        "), dim3(kThreads), args, kSmemBytes, "
        "stream);");
  }
  e.w.open("if (err != cudaSuccess)");
  e.w.line("(void)cudaGetLastError();  // this launch's error, reported here: clear it");
  e.w.line("return xla::ffi::Error::Internal(std::string(\"" + symbol +
           ": kernel launch failed: \") + cudaGetErrorString(err));");
  e.w.close();
  e.w.line("return xla::ffi::Error::Success();");
  e.w.close();
}

void emit_handler_symbol(const Emit& e, const std::string& symbol,
                         const std::string& kernel_namespace) {
  // The load-time check (mirage_jax/runtime): 0 when the kernel can run on `device`, else
  // the reason, written to `message`.
  e.w.open("extern \"C\" __attribute__((visibility(\"default\"))) int " + symbol +
           "_check(int device, char* message, int size)");
  e.w.line("const char* problem = " + kernel_namespace + "::prepare(device);");
  e.w.line("if (problem == nullptr) return 0;");
  e.w.line("if (size > 0) std::snprintf(message, size_t(size), \"%s\", problem);");
  e.w.line("return 1;");
  e.w.close();
  e.w.line("extern \"C\" __attribute__((visibility(\"default\"))) XLA_FFI_Error* " + symbol +
           "(XLA_FFI_CallFrame* call_frame);");
  e.w.line("XLA_FFI_DEFINE_HANDLER_SYMBOL(" + symbol + ", " + kernel_namespace + "::handler_impl,");
  const bool split = e.plan.split_k > 1;
  std::string bind =
      "    xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<cudaStream_t>>()"
      ".Ctx<xla::ffi::DeviceOrdinal>()";
  if (split) bind += ".Ctx<xla::ffi::ScratchAllocator>()";
  for (int i = 0; i < e.bg.num_inputs(); ++i) {
    bind += "\n        .Arg<xla::ffi::Buffer<" + ffi_dtype(e.bg.kernel_input_dtype(i)) + ">>()";
  }
  for (int i = 0; i < e.bg.num_outputs(); ++i) {
    bind += "\n        .Ret<xla::ffi::Buffer<" + ffi_dtype(e.bg.kernel_output_dtype(i)) + ">>()";
  }
  if (split) {
    // The split-K workspace comes from XLA's scratch allocator at run time: not graph-safe.
    e.w.line(bind + ");");
    return;
  }
  // Graph-safe: one kernel launch on XLA's stream into buffers XLA passed, no allocation, no
  // synchronization, no stream query (prepare's one-time attribute calls are not stream
  // work). XLA may then record the call into its command buffers (CUDA graphs).
  e.w.line(bind + ",");
  e.w.line("    {xla::ffi::Traits::kCmdBufferCompatible});");
}

}  // namespace mj::codegen::cuda
