#pragma once
// Patterns: terms with variables, matched against e-classes (e-matching) and instantiated
// into the e-graph. "?a" in a child position is a class variable; "?n" in a payload position
// (the count of sum or max) is a payload variable. Otherwise the text form is that of
// parse_expr: "(mul (div ?a ?b) ?c)", "(sum ?n (sum ?m ?e))", "(mul ?a 1)".
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cc/absexpr/egraph.h"

namespace mj::absexpr {

constexpr int kMaxPatternVars = 8;    // of each kind, per rewrite
constexpr int kMaxPatternNodes = 16;  // per pattern

// The variable names of one rewrite, shared by both sides so "?a" is one variable.
class PatternVars {
 public:
  int class_var(const std::string& name);    // interned; throws past kMaxPatternVars
  int payload_var(const std::string& name);  // interned; throws past kMaxPatternVars
  int num_class_vars() const { return int(class_names_.size()); }
  int num_payload_vars() const { return int(payload_names_.size()); }
  // The index of an interned variable ("?a"); throws std::invalid_argument if absent.
  int class_index(const std::string& name) const;
  int payload_index(const std::string& name) const;
  const std::string& class_name(int v) const { return class_names_.at(v); }
  const std::string& payload_name(int v) const { return payload_names_.at(v); }

 private:
  std::vector<std::string> class_names_, payload_names_;
};

// A binding of pattern variables to e-classes and payload values.
struct Subst {
  std::array<ClassId, kMaxPatternVars> classes{};
  std::array<int64_t, kMaxPatternVars> payloads{};
  uint32_t class_bound = 0, payload_bound = 0;  // bit v: variable v is bound
};

struct PatternNode {
  int class_var = -1;    // >= 0: this node is that class variable, `node` is unused
  int payload_var = -1;  // >= 0: node.a is that payload variable, not a fixed value
  Node node;             // op and fixed payload; children index Pattern::nodes()
};

class Pattern {
 public:
  // Variables are interned into `vars`. Throws std::invalid_argument on bad text.
  static Pattern parse(std::string_view text, PatternVars& vars);

  // Every substitution extending `seed` under which the pattern matches class `id` of a
  // clean (rebuilt) graph: matching relies on each class's nodes being sorted by op.
  void match(const EGraph& g, ClassId id, std::vector<Subst>& out, const Subst& seed = {}) const;
  // Adds the pattern's nodes under `s` (which binds all its variables); returns the root class.
  ClassId instantiate(EGraph& g, const Subst& s) const;

  const std::vector<PatternNode>& nodes() const { return nodes_; }  // children first, root last
  const PatternNode& root() const { return nodes_.back(); }
  // Levels of e-classes a match inspects, variables included: (sum ?n (mul ?a ?b)) is 3.
  // A match can only be new if one of those classes changed.
  int depth() const { return depth_; }
  std::string to_string(const PatternVars& vars) const;

 private:
  struct Goal {  // pattern node `index` must match class `cls`
    int index;
    ClassId cls;
  };
  void match_goals(const EGraph& g, Goal* goals, int count, const Subst& s,
                   std::vector<Subst>& out) const;
  std::string to_string_at(int index, const PatternVars& vars) const;

  std::vector<PatternNode> nodes_;
  int depth_ = 0;
};

}  // namespace mj::absexpr
