#pragma once
// Indented C++ source text, built line by line by the CPU and CUDA code generators.
#include <string>

namespace mj::codegen::common {

class CodeWriter {
 public:
  void line(const std::string& text) {
    if (!text.empty()) out_.append(size_t(2 * indent_), ' ').append(text);
    out_ += '\n';
  }
  // `header {` and one level deeper, until the matching close().
  void open(const std::string& header) {
    line(header.empty() ? "{" : header + " {");
    ++indent_;
  }
  void close(const std::string& suffix = "") {
    --indent_;
    line("}" + suffix);
  }
  // Text emitted verbatim (already formatted, e.g. the fixed prelude).
  void raw(const std::string& text) { out_ += text; }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
  int indent_ = 0;
};

}  // namespace mj::codegen::common
