// IndexLoops merges neighbouring dims that every tensor holds contiguously into one loop, and
// keeps apart the dims where a broadcast or a smaller operand breaks that.
#include "cc/codegen/cpu/index_loops.h"

#include <gtest/gtest.h>

#include <string>

namespace mj::codegen::cpu {
namespace {

struct Emitted {
  std::string text, result, operand;
};

Emitted emit(const ir::Shape& result, const ir::Shape& operand) {
  common::CodeWriter w;
  Emitted e;
  {
    IndexLoops loops(w, result, {operand}, "e");
    e.result = loops.result_offset();
    e.operand = loops.operand_offset(0);
  }
  e.text = w.str();
  return e;
}

TEST(IndexLoops, MergesDimsEveryTensorHoldsContiguously) {
  // A mask [256, 1, 1] broadcast along the last two dims of [256, 4, 4]: one loop of 16.
  const Emitted e = emit({256, 4, 4}, {256, 1, 1});
  EXPECT_NE(e.text.find("e0 < 256"), std::string::npos) << e.text;
  EXPECT_NE(e.text.find("e1 < 16"), std::string::npos) << e.text;
  EXPECT_EQ(e.text.find("e2"), std::string::npos) << e.text;
  EXPECT_EQ(e.result, "e0 * 16 + e1");
  EXPECT_EQ(e.operand, "e0");
}

TEST(IndexLoops, KeepsDimsABroadcastSeparates) {
  // [4, 1, 8] against [4, 6, 8]: stride 0 along the middle dim only, so nothing merges.
  const Emitted e = emit({4, 6, 8}, {4, 1, 8});
  EXPECT_NE(e.text.find("e0 < 4"), std::string::npos) << e.text;
  EXPECT_NE(e.text.find("e1 < 6"), std::string::npos) << e.text;
  EXPECT_NE(e.text.find("e2 < 8"), std::string::npos) << e.text;
  EXPECT_EQ(e.result, "e0 * 48 + e1 * 8 + e2");
  EXPECT_EQ(e.operand, "e0 * 8 + e2");
}

TEST(IndexLoops, SizeOneDimsAreSkippedBeforeMerging) {
  // [2, 1, 3, 5] with a trailing-dims operand [3, 5]: the size-1 dim has no loop, and the
  // last two dims merge (both hold them contiguously) while the leading one stays apart.
  const Emitted e = emit({2, 1, 3, 5}, {3, 5});
  EXPECT_EQ(e.result, "e0 * 15 + e1");
  EXPECT_EQ(e.operand, "e1");
  EXPECT_NE(e.text.find("e1 < 15"), std::string::npos) << e.text;
}

TEST(IndexLoops, LeavesTheDimsAskedForToTheCaller) {
  // Decode's P @ V over [keys 6, heads 4, dim 8], the keys and the dim left to the caller:
  // one loop over the heads, and each tensor's strides along the two left dims.
  common::CodeWriter w;
  std::vector<int64_t> keys, dims;
  std::string result, p, v;
  {
    IndexLoops loops(w, {6, 4, 8}, {{6, 4, 1}, {6, 4, 8}}, "e", {0, 2});
    result = loops.result_offset();
    p = loops.operand_offset(0);
    v = loops.operand_offset(1);
    keys = loops.left_strides(0);
    dims = loops.left_strides(1);
  }
  const std::string text = w.str();
  EXPECT_NE(text.find("e0 < 4"), std::string::npos) << text;
  EXPECT_EQ(text.find("e1"), std::string::npos) << text;
  EXPECT_EQ(result, "e0 * 8");
  EXPECT_EQ(p, "e0");
  EXPECT_EQ(v, "e0 * 8");
  EXPECT_EQ(keys, (std::vector<int64_t>{32, 4, 32}));
  EXPECT_EQ(dims, (std::vector<int64_t>{1, 0, 1}));
}

}  // namespace
}  // namespace mj::codegen::cpu
