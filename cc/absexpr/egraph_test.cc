#include "cc/absexpr/egraph.h"

#include <gtest/gtest.h>

#include <random>

namespace mj::absexpr {
namespace {

TEST(EGraph, HashConsingAddsEachNodeOnce) {
  EGraph g;
  const ClassId x = g.add(Node::var(0));
  EXPECT_EQ(g.add(Node::var(0)), x);
  const ClassId e1 = g.add(Node::unary(ExprOp::kExp, x));
  EXPECT_EQ(g.add(Node::unary(ExprOp::kExp, x)), e1);
  EXPECT_EQ(g.num_nodes(), 2u);
  EXPECT_EQ(g.num_classes(), 2u);

  ExprPool pool;
  const ExprId s = pool.add(pool.var(0), pool.var(1));
  const ClassId prod = g.add_expr(pool, pool.mul(s, s));  // the shared x0 + x1 is one node
  EXPECT_EQ(g.num_nodes(), 5u);                           // x0, exp, x1, add, mul
  EXPECT_EQ(g.lookup_expr(pool, pool.mul(s, s)), prod);
  EXPECT_FALSE(g.lookup_expr(pool, pool.mul(s, pool.var(1))));
  EXPECT_FALSE(g.lookup(Node::var(7)));
}

TEST(EGraph, MergeThenRebuildRestoresCongruence) {
  EGraph g;
  const ClassId a = g.add(Node::var(0)), b = g.add(Node::var(1));
  const ClassId fa = g.add(Node::unary(ExprOp::kExp, a)), fb = g.add(Node::unary(ExprOp::kExp, b));
  const ClassId gfa = g.add(Node::unary(ExprOp::kSqrt, fa));
  const ClassId gfb = g.add(Node::unary(ExprOp::kSqrt, fb));
  const ClassId h = g.add(Node::binary(ExprOp::kAdd, gfa, fb));
  const ClassId k = g.add(Node::binary(ExprOp::kAdd, gfb, fa));
  EXPECT_NE(g.find(fa), g.find(fb));

  EXPECT_TRUE(g.merge(a, b));
  EXPECT_FALSE(g.merge(b, a));
  EXPECT_FALSE(g.is_clean());
  g.rebuild();
  EXPECT_TRUE(g.is_clean());
  EXPECT_EQ(g.find(fa), g.find(fb));    // exp(a) = exp(b)
  EXPECT_EQ(g.find(gfa), g.find(gfb));  // and upward, one level at a time
  EXPECT_EQ(g.find(h), g.find(k));      // through both children of a binary node
  EXPECT_EQ(g.num_classes(), 4u);
  EXPECT_EQ(g.num_nodes(), 5u);  // x0, x1, exp, sqrt, add: the duplicates are gone
  EXPECT_EQ(g.lookup(Node::unary(ExprOp::kExp, b)), g.find(fa));
  EXPECT_EQ(g.eclass(a).nodes.size(), 2u);
}

TEST(EGraph, VersionAndChangedAtTrackEdits) {
  EGraph g;
  const ClassId a = g.add(Node::var(0)), b = g.add(Node::var(1));
  const ClassId fa = g.add(Node::unary(ExprOp::kExp, a));
  g.add(Node::unary(ExprOp::kExp, b));
  g.rebuild();
  const uint64_t before = g.version();
  g.add(Node::var(0));  // already there
  g.merge(a, a);
  EXPECT_EQ(g.version(), before);
  g.merge(a, b);
  g.rebuild();
  EXPECT_GT(g.version(), before);
  EXPECT_GT(g.changed_at(a), before);
  EXPECT_GT(g.changed_at(fa), before);  // its node was re-canonicalized / deduplicated
}

TEST(EGraph, RationalConstantOfAClass) {
  EGraph g;
  const ClassId x = g.add(Node::var(0));
  const ClassId k = g.add(Node::constant(Constant::rational(1, 4096)));
  const ClassId eps = g.add(Node::constant(Constant::from_double(1e-6)));
  EXPECT_FALSE(g.rational_constant(x));
  EXPECT_FALSE(g.rational_constant(eps));  // opaque constants are not folded
  EXPECT_EQ(g.rational_constant(k), Constant::rational(1, 4096));
  g.merge(x, k);
  g.rebuild();
  EXPECT_EQ(g.rational_constant(x), Constant::rational(1, 4096));
}

// The e-graph's partition must be the congruence closure of the asserted equalities, no
// coarser and no finer: compare with a naive fixpoint over random terms.
TEST(EGraph, MatchesNaiveCongruenceClosureOnRandomTerms) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<Node> terms;  // children index earlier terms
    for (int i = 0; i < 3; ++i) terms.push_back(Node::var(i));
    for (int i = 0; i < 40; ++i) {
      const uint32_t c0 = rng() % terms.size(), c1 = rng() % terms.size();
      switch (rng() % 3) {
        case 0: terms.push_back(Node::unary(ExprOp::kExp, c0)); break;
        case 1: terms.push_back(Node::binary(ExprOp::kAdd, c0, c1)); break;
        default: terms.push_back(Node::binary(ExprOp::kMul, c0, c1)); break;
      }
    }
    std::vector<std::pair<uint32_t, uint32_t>> asserted;
    for (int i = 0; i < 4; ++i) {
      asserted.emplace_back(rng() % terms.size(), rng() % terms.size());
    }

    EGraph g;
    std::vector<ClassId> cls;
    for (Node n : terms) {
      for (int i = 0; i < n.arity(); ++i) n.children[i] = cls[n.children[i]];
      cls.push_back(g.add(n));
    }
    for (auto [p, q] : asserted) g.merge(cls[p], cls[q]);
    g.rebuild();

    // Naive: equal terms start together, then merge congruent pairs until nothing changes.
    std::vector<size_t> rep(terms.size());
    for (size_t i = 0; i < terms.size(); ++i) {
      rep[i] = i;
      for (size_t j = 0; j < i; ++j) {
        if (terms[j] == terms[i]) rep[i] = rep[j];
      }
    }
    auto root = [&](size_t i) {
      while (rep[i] != i) i = rep[i];
      return i;
    };
    for (auto [p, q] : asserted) rep[root(p)] = root(q);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < terms.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          const Node &s = terms[i], &t = terms[j];
          if (s.op != t.op || s.a != t.a || s.b != t.b || root(i) == root(j)) continue;
          bool same = true;
          for (int c = 0; c < s.arity(); ++c) same &= root(s.children[c]) == root(t.children[c]);
          if (same) rep[root(i)] = root(j), changed = true;
        }
      }
    }
    for (size_t i = 0; i < terms.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        EXPECT_EQ(root(i) == root(j), g.find(cls[i]) == g.find(cls[j]))
            << "round " << round << " terms " << i << ", " << j;
      }
    }
  }
}

}  // namespace
}  // namespace mj::absexpr
