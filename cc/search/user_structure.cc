#include "cc/search/user_structure.h"

#include <algorithm>

namespace mj::search {

using ir::Dim3;

namespace {

std::string bad_map(const Dim3& m, const std::string& where) {
  for (int a = 0; a < 3; ++a) {
    if (m[a] < -1) return where + " has dim " + std::to_string(m[a]) + " (-1 or a dim)";
    for (int b = 0; b < a; ++b) {
      // One dim cut by two axes would need a tile index no block graph input has.
      if (m[a] >= 0 && m[a] == m[b]) {
        return where + " splits dim " + std::to_string(m[a]) + " on two grid axes";
      }
    }
  }
  return "";
}

template <typename T>
bool listed(const std::vector<T>& list, const T& v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

}  // namespace

std::string bad_user_structure(const SearchConfig& c) {
  for (size_t i = 0; i < c.grids.size(); ++i) {
    for (int a = 0; a < 3; ++a) {
      if (c.grids[i][a] < 1) return "grids[" + std::to_string(i) + "] has a size below 1";
    }
  }
  for (size_t i = 0; i < c.imaps.size(); ++i) {
    std::string why = bad_map(c.imaps[i], "imaps[" + std::to_string(i) + "]");
    if (!why.empty()) return why;
  }
  for (size_t i = 0; i < c.omaps.size(); ++i) {
    std::string why = bad_map(c.omaps[i], "omaps[" + std::to_string(i) + "]");
    if (!why.empty()) return why;
  }
  for (size_t i = 0; i < c.fmaps.size(); ++i) {
    if (c.fmaps[i] < -1) return "fmaps[" + std::to_string(i) + "] is below -1";
  }
  return "";
}

bool user_layout_allowed(const SearchConfig& c, const BlockLayout& l) {
  for (const Dim3& m : l.imaps) {
    if (!c.imaps.empty() && !listed(c.imaps, m)) return false;
  }
  for (int f : l.fmaps) {
    if (!c.fmaps.empty() && !listed(c.fmaps, f)) return false;
  }
  return true;
}

std::vector<Dim3> user_allowed_omaps(const SearchConfig& c, std::vector<Dim3> omaps) {
  if (c.omaps.empty()) return omaps;
  omaps.erase(std::remove_if(omaps.begin(), omaps.end(),
                             [&](const Dim3& o) { return !listed(c.omaps, o); }),
              omaps.end());
  return omaps;
}

}  // namespace mj::search
