#include "cc/absexpr/rewrite.h"

#include <cstdint>
#include <memory>
#include <stdexcept>

namespace mj::absexpr {

Rewrite::Rewrite(std::string name, std::string_view lhs, std::string_view rhs)
    : name_(std::move(name)), lhs_(Pattern::parse(lhs, vars_)), rhs_text_(rhs) {
  if (lhs_.root().class_var >= 0) {
    throw std::invalid_argument("rewrite " + name_ + ": the left side must not be a variable");
  }
  const int class_vars = vars_.num_class_vars(), payload_vars = vars_.num_payload_vars();
  auto rhs_pattern = std::make_shared<Pattern>(Pattern::parse(rhs, vars_));
  if (vars_.num_class_vars() != class_vars || vars_.num_payload_vars() != payload_vars) {
    throw std::invalid_argument("rewrite " + name_ +
                                ": the right side uses a variable that the "
                                "left side does not bind");
  }
  applier_ = [rhs_pattern](EGraph& g, const Match& m) {
    return g.merge(m.cls, rhs_pattern->instantiate(g, m.subst));
  };
}

Rewrite::Rewrite(std::string name, std::string_view lhs,
                 const std::function<Applier(const PatternVars&)>& make_applier)
    : name_(std::move(name)), lhs_(Pattern::parse(lhs, vars_)), rhs_text_("<fn>") {
  if (lhs_.root().class_var >= 0) {
    throw std::invalid_argument("rewrite " + name_ + ": the left side must not be a variable");
  }
  applier_ = make_applier(vars_);
}

std::vector<Match> Rewrite::search(const EGraph& g, size_t limit) const {
  return search(g, g.class_ids(), limit);
}

std::vector<Match> Rewrite::search(const EGraph& g, const std::vector<ClassId>& roots,
                                   size_t limit) const {
  if (!g.is_clean()) throw std::logic_error("Rewrite::search: rebuild the e-graph first");
  std::vector<Match> matches;
  std::vector<Subst> substs;
  for (ClassId id : roots) {
    substs.clear();
    lhs_.match(g, id, substs);
    for (const Subst& s : substs) {
      if (matches.size() >= limit) return matches;
      matches.push_back(Match{id, s});
    }
  }
  return matches;
}

std::string Rewrite::to_string() const {
  return name_ + ": " + lhs_.to_string(vars_) + " => " + rhs_text_;
}

std::vector<Rewrite> both_ways(const std::string& name, std::string_view a, std::string_view b) {
  std::vector<Rewrite> rules;
  rules.emplace_back(name, a, b);
  rules.emplace_back(name + "-rev", b, a);
  return rules;
}

}  // namespace mj::absexpr
