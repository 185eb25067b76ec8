#pragma once
// An e-graph (egg, Willsey et al. 2021): e-classes of equivalent terms over the Node
// language of expr.h, hash-consed so that each node exists once, with congruence closure
// restored lazily by rebuild(). Rewrites (rewrite.h) add nodes and merge classes; a
// saturation runner (runner.h) drives them; subexpression.h queries the result.
//
// Between merges and rebuild() the graph is "dirty": lookups may miss a node whose children
// were merged. Every const member is read-only (no path compression), so a rebuilt graph may
// be queried from many threads at once.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cc/absexpr/expr.h"
#include "cc/absexpr/union_find.h"

namespace mj::absexpr {

using ClassId = uint32_t;

struct EClass {
  // After rebuild(): canonical (children are representatives), sorted, without duplicates.
  std::vector<Node> nodes;
  // Every node that has this class as a child, with the class that node belongs to; entries
  // may be stale (pre-merge children) until the next repair of this class.
  std::vector<std::pair<Node, ClassId>> parents;
};

class EGraph {
 public:
  // The class of n (children are class ids), creating a singleton class if n is new.
  ClassId add(const Node& n);
  // Adds every node of the term rooted at `root` and returns the root's class.
  ClassId add_expr(const ExprPool& pool, ExprId root);

  // The class holding n, if the graph has it; n's children need not be canonical.
  std::optional<ClassId> lookup(const Node& n) const;
  // The class of a whole term, if every one of its nodes is present (bottom-up hash-cons).
  std::optional<ClassId> lookup_expr(const ExprPool& pool, ExprId root) const;

  ClassId find(ClassId id) const { return uf_.find(id); }
  // Asserts a == b. Returns false when they were already one class.
  bool merge(ClassId a, ClassId b);
  // Restores congruence closure (equal children => equal nodes => one class) and the
  // hash-cons after merges.
  void rebuild();
  bool is_clean() const { return pending_.empty(); }

  const EClass& eclass(ClassId id) const { return classes_.at(find(id)); }
  std::vector<ClassId> class_ids() const;  // representatives, ascending
  size_t num_nodes() const { return memo_.size(); }
  size_t num_classes() const { return num_classes_; }
  // Grows with every new node and every merge: equal versions mean nothing happened.
  uint64_t version() const { return version_; }
  // The version at which the class's node list last changed (a node added, merged in, or
  // re-canonicalized by rebuild). Lets the runner re-match only where something changed.
  uint64_t changed_at(ClassId id) const { return changed_at_.at(find(id)); }

  // The rational constant of a class, if it holds one (constant folding reads this).
  std::optional<Constant> rational_constant(ClassId id) const;
  // Whether the class's terms contain a sum. Set when a class is made, or-ed on merge and
  // never propagated upward: exact because no axiom equates a term containing a sum with
  // one that does not (sum(1, e) = e is applied only by ExprPool's builders).
  bool has_sum(ClassId id) const { return has_sum_.at(find(id)) != 0; }
  // The inputs that occur outside every sum in some term of the class, as a bit mask (input
  // i >= 63 sets bit 63). Or-ed on merge and not propagated upward, so after merges it may
  // miss variables of ancestors: a hint for the sum axioms, not an exact analysis.
  uint64_t free_vars(ClassId id) const { return free_vars_.at(find(id)); }

  std::string to_string() const;  // one line per class, for debugging and test failures

 private:
  Node canonicalize(Node n) const;
  void repair(ClassId id);
  // Canonicalizes and deduplicates every class's nodes and rebuilds the hash-cons from them;
  // returns false if that exposed congruent nodes in different classes (they are merged).
  bool canonicalize_classes();

  UnionFind uf_;
  std::vector<EClass> classes_;  // indexed by ClassId; only representatives hold nodes
  std::unordered_map<Node, ClassId, NodeHash> memo_;  // the hash-cons
  std::vector<ClassId> pending_;                      // merged classes whose parents need repair
  std::vector<uint64_t> changed_at_;                  // per class id
  std::vector<uint8_t> has_sum_;                      // per class id
  std::vector<uint64_t> free_vars_;                   // per class id
  size_t num_classes_ = 0;
  uint64_t version_ = 0;
};

}  // namespace mj::absexpr
