#include "cc/absexpr/sexpr.h"

#include <cctype>
#include <stdexcept>

namespace mj::absexpr {

namespace {

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  SExpr read() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end of input");
    if (text_[pos_] == ')') fail("unexpected ')'");
    if (text_[pos_] == '(') {
      ++pos_;
      SExpr list;
      for (;;) {
        skip_space();
        if (pos_ >= text_.size()) fail("missing ')'");
        if (text_[pos_] == ')') break;
        list.items.push_back(read());
      }
      ++pos_;
      if (list.items.empty()) fail("empty list");
      return list;
    }
    SExpr atom;
    while (pos_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[pos_])) &&
           text_[pos_] != '(' && text_[pos_] != ')') {
      atom.atom += text_[pos_++];
    }
    return atom;
  }

  void expect_end() {
    skip_space();
    if (pos_ != text_.size()) fail("trailing text");
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw std::invalid_argument("s-expression: " + why + " at offset " + std::to_string(pos_) +
                                " in \"" + std::string(text_) + "\"");
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

SExpr parse_sexpr(std::string_view text) {
  Reader r(text);
  SExpr e = r.read();
  r.expect_end();
  return e;
}

}  // namespace mj::absexpr
