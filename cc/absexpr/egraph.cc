#include "cc/absexpr/egraph.h"

#include <algorithm>
#include <stdexcept>

namespace mj::absexpr {

namespace {

// Ids of the term's nodes, children before parents. Pool ids already have that order
// (a node can only be made from existing children), so sorting the reachable ids suffices.
std::vector<ExprId> reachable_in_order(const ExprPool& pool, ExprId root) {
  std::vector<ExprId> out, stack{root};
  std::vector<bool> seen(root + 1, false);
  seen[root] = true;
  while (!stack.empty()) {
    const ExprId id = stack.back();
    stack.pop_back();
    out.push_back(id);
    const Node& n = pool.node(id);
    for (int i = 0; i < n.arity(); ++i) {
      const ExprId c = n.children[i];
      if (!seen[c]) seen[c] = true, stack.push_back(c);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Node EGraph::canonicalize(Node n) const {
  for (int i = 0; i < n.arity(); ++i) n.children[i] = find(n.children[i]);
  return n;
}

ClassId EGraph::add(const Node& n) {
  for (int i = 0; i < n.arity(); ++i) {
    if (n.children[i] >= classes_.size()) throw std::out_of_range("EGraph::add: unknown class");
  }
  const Node cn = canonicalize(n);
  if (auto it = memo_.find(cn); it != memo_.end()) return find(it->second);
  const ClassId id = uf_.make_set();
  classes_.emplace_back();
  changed_at_.push_back(version_ + 1);
  bool sum = cn.op == ExprOp::kSum;
  for (int i = 0; i < cn.arity(); ++i) sum = sum || has_sum_[cn.children[i]];
  has_sum_.push_back(sum);
  uint64_t free = 0;
  if (cn.op == ExprOp::kVar) {
    free = uint64_t(1) << (cn.a < 63 ? cn.a : 63);
  } else if (cn.op != ExprOp::kSum) {
    for (int i = 0; i < cn.arity(); ++i) free |= free_vars_[cn.children[i]];
  }
  free_vars_.push_back(free);
  classes_[id].nodes.push_back(cn);
  for (int i = 0; i < cn.arity(); ++i) classes_[cn.children[i]].parents.emplace_back(cn, id);
  memo_.emplace(cn, id);
  ++num_classes_;
  ++version_;
  return id;
}

ClassId EGraph::add_expr(const ExprPool& pool, ExprId root) {
  std::unordered_map<ExprId, ClassId> cls;
  for (ExprId id : reachable_in_order(pool, root)) {
    Node n = pool.node(id);
    for (int i = 0; i < n.arity(); ++i) n.children[i] = cls.at(n.children[i]);
    cls[id] = add(n);
  }
  return cls.at(root);
}

std::optional<ClassId> EGraph::lookup(const Node& n) const {
  for (int i = 0; i < n.arity(); ++i) {
    if (n.children[i] >= classes_.size()) return std::nullopt;
  }
  auto it = memo_.find(canonicalize(n));
  if (it == memo_.end()) return std::nullopt;
  return find(it->second);
}

std::optional<ClassId> EGraph::lookup_expr(const ExprPool& pool, ExprId root) const {
  std::unordered_map<ExprId, ClassId> cls;
  for (ExprId id : reachable_in_order(pool, root)) {
    Node n = pool.node(id);
    for (int i = 0; i < n.arity(); ++i) n.children[i] = cls.at(n.children[i]);
    auto c = lookup(n);
    if (!c) return std::nullopt;
    cls[id] = *c;
  }
  return cls.at(root);
}

bool EGraph::merge(ClassId a, ClassId b) {
  a = find(a);
  b = find(b);
  if (a == b) return false;
  // The class with more parents stays the root, so fewer parent entries move.
  if (classes_[a].parents.size() < classes_[b].parents.size()) std::swap(a, b);
  uf_.unite(a, b);
  EClass& root = classes_[a];
  EClass& gone = classes_[b];
  root.nodes.insert(root.nodes.end(), gone.nodes.begin(), gone.nodes.end());
  root.parents.insert(root.parents.end(), gone.parents.begin(), gone.parents.end());
  gone = EClass{};
  has_sum_[a] |= has_sum_[b];
  free_vars_[a] |= free_vars_[b];
  pending_.push_back(a);
  --num_classes_;
  changed_at_[a] = ++version_;
  return true;
}

void EGraph::repair(ClassId id) {
  std::vector<std::pair<Node, ClassId>> parents;
  parents.swap(classes_[id].parents);
  for (auto& [node, cls] : parents) {
    memo_.erase(node);  // the key as it was hash-consed, possibly with stale children
    node = canonicalize(node);
    cls = find(cls);
  }
  std::sort(parents.begin(), parents.end());
  // Parents that became equal nodes are congruent: their classes are one class.
  std::vector<std::pair<Node, ClassId>> unique;
  for (const auto& p : parents) {
    if (!unique.empty() && unique.back().first == p.first) {
      merge(unique.back().second, p.second);
      unique.back().second = find(p.second);
    } else {
      unique.push_back(p);
    }
  }
  for (auto& [node, cls] : unique) {
    cls = find(cls);
    memo_[node] = cls;
  }
  auto& dest = classes_[find(id)].parents;
  dest.insert(dest.end(), unique.begin(), unique.end());
}

bool EGraph::canonicalize_classes() {
  memo_.clear();
  std::vector<std::pair<ClassId, ClassId>> congruent;
  for (ClassId id = 0; id < classes_.size(); ++id) {
    if (find(id) != id) continue;
    auto& nodes = classes_[id].nodes;
    bool changed = false;
    for (Node& n : nodes) {
      const Node canonical = canonicalize(n);
      if (!(canonical == n)) n = canonical, changed = true;
    }
    std::sort(nodes.begin(), nodes.end());
    const auto end = std::unique(nodes.begin(), nodes.end());
    if (end != nodes.end()) nodes.erase(end, nodes.end()), changed = true;
    // Only a merge can change a canonical form, and it already advanced the version.
    if (changed) changed_at_[id] = version_;
    for (const Node& n : nodes) {
      auto [it, inserted] = memo_.emplace(n, id);
      if (!inserted) congruent.emplace_back(it->second, id);
    }
  }
  for (auto [a, b] : congruent) merge(a, b);
  return congruent.empty();
}

void EGraph::rebuild() {
  do {
    while (!pending_.empty()) {
      std::vector<ClassId> todo;
      todo.swap(pending_);
      for (ClassId& c : todo) c = find(c);
      std::sort(todo.begin(), todo.end());
      todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
      for (ClassId c : todo) repair(c);
    }
    // Repair fixes every congruence it can see through parent lists; this pass makes the
    // hash-cons exact (no stale keys, so num_nodes() counts real nodes) and would catch
    // anything repair missed.
  } while (!canonicalize_classes());
  uf_.compress();
}

std::vector<ClassId> EGraph::class_ids() const {
  std::vector<ClassId> ids;
  ids.reserve(num_classes_);
  for (ClassId id = 0; id < classes_.size(); ++id) {
    if (find(id) == id) ids.push_back(id);
  }
  return ids;
}

std::optional<Constant> EGraph::rational_constant(ClassId id) const {
  for (const Node& n : eclass(id).nodes) {
    if (n.op == ExprOp::kConst && n.constant_value().is_rational()) return n.constant_value();
    if (is_clean() && n.op > ExprOp::kConst) break;  // sorted: leaves come first
  }
  return std::nullopt;
}

std::string EGraph::to_string() const {
  std::string s;
  for (ClassId id : class_ids()) {
    s += "c" + std::to_string(id) + ":";
    for (const Node& n : classes_[id].nodes) {
      const ExprOpInfo& info = op_info(n.op);
      s += " ";
      if (n.op == ExprOp::kVar) {
        s += "x" + std::to_string(n.a);
        continue;
      }
      if (n.op == ExprOp::kConst) {
        s += n.constant_value().to_string();
        continue;
      }
      s += std::string("(") + info.name;
      if (info.payloads > 0) s += " " + std::to_string(n.a);
      if (info.payloads > 1) s += " " + std::to_string(n.b);
      for (int i = 0; i < info.arity; ++i) s += " c" + std::to_string(find(n.children[i]));
      s += ")";
    }
    s += "\n";
  }
  return s;
}

}  // namespace mj::absexpr
