#pragma once
// The s-expression reader behind the text forms of expressions and rewrite patterns, so that
// axioms and tests read like the math: "(sum 4096 (mul x0 x1))".
#include <string>
#include <string_view>
#include <vector>

namespace mj::absexpr {

struct SExpr {
  std::string atom;          // non-empty for an atom
  std::vector<SExpr> items;  // the elements of a list (empty for an atom)
  bool is_atom() const { return !atom.empty(); }
};

// Exactly one s-expression; throws std::invalid_argument naming the position on bad input.
SExpr parse_sexpr(std::string_view text);

}  // namespace mj::absexpr
