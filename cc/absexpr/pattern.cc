#include "cc/absexpr/pattern.h"

#include <algorithm>
#include <stdexcept>

#include "cc/absexpr/sexpr.h"

namespace mj::absexpr {

namespace {

int intern(std::vector<std::string>& names, const std::string& name, const char* kind) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return int(i);
  }
  if (names.size() >= size_t(kMaxPatternVars)) {
    throw std::invalid_argument(std::string("pattern: more than ") +
                                std::to_string(kMaxPatternVars) + " " + kind + " variables");
  }
  names.push_back(name);
  return int(names.size() - 1);
}

bool is_variable(const SExpr& s) { return s.is_atom() && s.atom.size() > 1 && s.atom[0] == '?'; }

int64_t fixed_payload(const SExpr& s, const char* op) {
  auto c = s.is_atom() ? parse_constant(s.atom) : std::nullopt;
  if (!c || !c->is_integer()) {
    throw std::invalid_argument(std::string("pattern: payload of '") + op +
                                "' must be an integer or ?variable");
  }
  return c->num();
}

int build(const SExpr& s, PatternVars& vars, std::vector<PatternNode>& out) {
  PatternNode p;
  if (s.is_atom()) {
    if (is_variable(s)) {
      p.class_var = vars.class_var(s.atom);
    } else if (s.atom.size() > 1 && s.atom[0] == 'x' && parse_constant(s.atom.substr(1))) {
      p.node = Node::var(fixed_payload(SExpr{s.atom.substr(1), {}}, "var"));
    } else if (auto c = parse_constant(s.atom)) {
      p.node = Node::constant(*c);
    } else {
      throw std::invalid_argument("pattern: unknown atom '" + s.atom + "'");
    }
    out.push_back(p);
    return int(out.size() - 1);
  }
  auto op = s.items[0].is_atom() ? op_from_name(s.items[0].atom) : std::nullopt;
  if (!op) throw std::invalid_argument("pattern: unknown operator in list");
  const ExprOpInfo& info = op_info(*op);
  if (int(s.items.size()) != 1 + info.payloads + info.arity) {
    throw std::invalid_argument(std::string("pattern: '") + info.name + "' takes " +
                                std::to_string(info.payloads + info.arity) + " arguments");
  }
  p.node.op = *op;
  if (info.payloads > 0) {
    if (is_variable(s.items[1])) {
      p.payload_var = vars.payload_var(s.items[1].atom);
    } else {
      p.node.a = fixed_payload(s.items[1], info.name);
    }
  }
  if (info.payloads > 1) p.node.b = fixed_payload(s.items[2], info.name);
  for (int i = 0; i < info.arity; ++i) {
    p.node.children[i] = uint32_t(build(s.items[1 + info.payloads + i], vars, out));
  }
  out.push_back(p);
  return int(out.size() - 1);
}

}  // namespace

int PatternVars::class_var(const std::string& name) { return intern(class_names_, name, "class"); }
int PatternVars::payload_var(const std::string& name) {
  return intern(payload_names_, name, "payload");
}

namespace {

int index_of(const std::vector<std::string>& names, const std::string& name) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return int(i);
  }
  throw std::invalid_argument("pattern: no variable " + name);
}

}  // namespace

int PatternVars::class_index(const std::string& name) const { return index_of(class_names_, name); }
int PatternVars::payload_index(const std::string& name) const {
  return index_of(payload_names_, name);
}

Pattern Pattern::parse(std::string_view text, PatternVars& vars) {
  Pattern p;
  build(parse_sexpr(text), vars, p.nodes_);
  if (p.nodes_.size() > size_t(kMaxPatternNodes)) {
    throw std::invalid_argument("pattern: more than " + std::to_string(kMaxPatternNodes) +
                                " nodes in \"" + std::string(text) + "\"");
  }
  std::vector<int> depth(p.nodes_.size(), 1);  // children precede parents
  for (size_t i = 0; i < p.nodes_.size(); ++i) {
    const PatternNode& n = p.nodes_[i];
    if (n.class_var >= 0) continue;
    for (int c = 0; c < n.node.arity(); ++c) {
      depth[i] = std::max(depth[i], 1 + depth[n.node.children[c]]);
    }
  }
  p.depth_ = depth.back();
  return p;
}

void Pattern::match(const EGraph& g, ClassId id, std::vector<Subst>& out, const Subst& seed) const {
  Goal goal{int(nodes_.size()) - 1, id};
  match_goals(g, &goal, 1, seed, out);
}

// Backtracking over a small stack of goals, copied per choice: no allocation per step.
void Pattern::match_goals(const EGraph& g, Goal* goals, int count, const Subst& s,
                          std::vector<Subst>& out) const {
  if (count == 0) {
    out.push_back(s);
    return;
  }
  const Goal goal = goals[count - 1];
  const PatternNode& p = nodes_[goal.index];
  const ClassId id = g.find(goal.cls);
  if (p.class_var >= 0) {
    const uint32_t bit = 1u << p.class_var;
    if (s.class_bound & bit) {
      if (g.find(s.classes[p.class_var]) == id) match_goals(g, goals, count - 1, s, out);
    } else {
      Subst bound = s;
      bound.classes[p.class_var] = id;
      bound.class_bound |= bit;
      match_goals(g, goals, count - 1, bound, out);
    }
    return;
  }
  const int arity = p.node.arity();
  const auto& nodes = g.eclass(id).nodes;  // sorted by op first (after rebuild)
  auto it = std::lower_bound(nodes.begin(), nodes.end(), p.node.op,
                             [](const Node& n, ExprOp op) { return n.op < op; });
  for (; it != nodes.end() && it->op == p.node.op; ++it) {
    const Node& n = *it;
    if (n.b != p.node.b) continue;
    Subst next = s;
    if (p.payload_var >= 0) {
      const uint32_t bit = 1u << p.payload_var;
      if (next.payload_bound & bit) {
        if (next.payloads[p.payload_var] != n.a) continue;
      } else {
        next.payloads[p.payload_var] = n.a;
        next.payload_bound |= bit;
      }
    } else if (n.a != p.node.a) {
      continue;
    }
    Goal rest[kMaxPatternNodes];
    std::copy(goals, goals + count - 1, rest);
    for (int i = 0; i < arity; ++i) {
      rest[count - 1 + i] = Goal{int(p.node.children[i]), n.children[i]};
    }
    match_goals(g, rest, count - 1 + arity, next, out);
  }
}

ClassId Pattern::instantiate(EGraph& g, const Subst& s) const {
  std::vector<ClassId> ids(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const PatternNode& p = nodes_[i];
    if (p.class_var >= 0) {
      if (!(s.class_bound & (1u << p.class_var))) {
        throw std::logic_error("Pattern::instantiate: unbound class variable");
      }
      ids[i] = s.classes[p.class_var];
      continue;
    }
    Node n = p.node;
    if (p.payload_var >= 0) {
      if (!(s.payload_bound & (1u << p.payload_var))) {
        throw std::logic_error("Pattern::instantiate: unbound payload variable");
      }
      n.a = s.payloads[p.payload_var];
    }
    for (int c = 0; c < n.arity(); ++c) n.children[c] = ids[n.children[c]];
    ids[i] = g.add(n);
  }
  return ids.back();
}

std::string Pattern::to_string(const PatternVars& vars) const {
  return to_string_at(int(nodes_.size()) - 1, vars);
}

std::string Pattern::to_string_at(int index, const PatternVars& vars) const {
  const PatternNode& p = nodes_[index];
  if (p.class_var >= 0) return vars.class_name(p.class_var);
  if (p.node.op == ExprOp::kVar) return "x" + std::to_string(p.node.a);
  if (p.node.op == ExprOp::kConst) return p.node.constant_value().to_string();
  const ExprOpInfo& info = op_info(p.node.op);
  std::string s = std::string("(") + info.name;
  if (info.payloads > 0) {
    s += " " + (p.payload_var >= 0 ? vars.payload_name(p.payload_var) : std::to_string(p.node.a));
  }
  if (info.payloads > 1) s += " " + std::to_string(p.node.b);
  for (int i = 0; i < info.arity; ++i) s += " " + to_string_at(int(p.node.children[i]), vars);
  return s + ")";
}

}  // namespace mj::absexpr
