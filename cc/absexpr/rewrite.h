#pragma once
// Rewrite rules: a pattern to search for and what to do with each match. Most axioms are
// pattern => pattern; the ones that compute (fold constants, multiply or factor sum counts)
// supply a function instead.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cc/absexpr/pattern.h"

namespace mj::absexpr {

struct Match {
  ClassId cls;  // the class the left-hand side matched
  Subst subst;
};

// Adds nodes and merges for one match; returns true if the graph changed.
using Applier = std::function<bool(EGraph& g, const Match& m)>;

class Rewrite {
 public:
  // lhs => rhs. Every variable of rhs must occur in lhs. Throws std::invalid_argument.
  Rewrite(std::string name, std::string_view lhs, std::string_view rhs);
  // lhs => make_applier(vars)(...): the factory sees lhs's variables to resolve their names.
  Rewrite(std::string name, std::string_view lhs,
          const std::function<Applier(const PatternVars&)>& make_applier);

  const std::string& name() const { return name_; }
  const Pattern& lhs() const { return lhs_; }
  const PatternVars& vars() const { return vars_; }

  // Matches rooted at `roots` (all classes by default) of a clean graph, in the order given;
  // stops after `limit` matches. Throws std::logic_error on a dirty graph.
  std::vector<Match> search(const EGraph& g, size_t limit = SIZE_MAX) const;
  std::vector<Match> search(const EGraph& g, const std::vector<ClassId>& roots,
                            size_t limit = SIZE_MAX) const;
  bool apply(EGraph& g, const Match& m) const { return applier_(g, m); }

  std::string to_string() const;  // "name: lhs => rhs" (rhs "<fn>" for a function)

 private:
  std::string name_;
  PatternVars vars_;
  Pattern lhs_;
  std::string rhs_text_;
  Applier applier_;
};

// The two rules a = b and b = a, named name and name + "-rev".
std::vector<Rewrite> both_ways(const std::string& name, std::string_view a, std::string_view b);

}  // namespace mj::absexpr
