#include "cc/codegen/cpu/emit_entry.h"

#include <vector>

#include "cc/codegen/cpu/emit_tile_io.h"

namespace mj::codegen::cpu {

using common::CodeWriter;
using ir::BlockGraph;
using ir::DType;
using ir::Shape;

namespace {

// The dtype codes of a kernel signature, as cc/python/cpu_dispatch.cc reads them.
int signature_dtype(DType d) {
  switch (d) {
    case DType::kBF16: return 1;
    case DType::kF16: return 2;
    default: return 0;  // float32
  }
}

void append_buffer(std::vector<int64_t>& words, DType dtype, const Shape& shape) {
  words.push_back(signature_dtype(dtype));
  words.push_back(int64_t(shape.size()));
  for (int64_t d : shape) words.push_back(d);
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

void emit_task(CodeWriter& w) {
  w.open("void run_task(const void* io, float* arena, int64_t task)");
  w.line("run_blocks(*static_cast<const Io*>(io), arena, task);");
  w.close();
}

void emit_entry(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan,
                const std::string& symbol, const std::string& kernel_namespace) {
  std::vector<int64_t> words = {kCpuSignatureVersion, bg.num_inputs(), bg.num_outputs()};
  for (int i = 0; i < bg.num_inputs(); ++i) {
    append_buffer(words, bg.kernel_input_dtype(i), bg.kernel_input_shape(i));
  }
  for (int i = 0; i < bg.num_outputs(); ++i) {
    append_buffer(words, bg.kernel_output_dtype(i), bg.kernel_output_shape(i));
  }
  std::string list;
  for (size_t i = 0; i < words.size(); ++i) list += (i ? ", " : "") + std::to_string(words[i]);
  const std::string exported = "extern \"C\" __attribute__((visibility(\"default\"))) ";
  w.open(exported + "const int64_t* " + symbol + "_signature()");
  w.line("static const int64_t words[] = {" + list + "};");
  w.line("return words;");
  w.close();

  w.open(exported + "void " + symbol + "(const MjCpuGridV1* grid, void* const* buffers)");
  std::string init;
  for (int i = 0; i < bg.num_inputs(); ++i) {
    init += std::string(i ? ", " : "") + "static_cast<const " +
            storage_type(bg.kernel_input_dtype(i)) + "*>(buffers[" + std::to_string(i) + "])";
  }
  for (int i = 0; i < bg.num_outputs(); ++i) {
    init += ", static_cast<" + std::string(storage_type(bg.kernel_output_dtype(i))) +
            "*>(buffers[" + std::to_string(bg.num_inputs() + i) + "])";
  }
  w.line("const " + kernel_namespace + "::Io io{" + init + "};");
  w.line("grid->run(grid->context, &" + kernel_namespace + "::run_task, &io, " +
         std::to_string(bg.num_blocks() / plan.block_group) + ", " +
         std::to_string(plan.arena_floats * plan.block_group) + ");");
  w.close();
}

}  // namespace mj::codegen::cpu
