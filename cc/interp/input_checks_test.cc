// Inputs that do not match the graph are rejected with an IrError naming the input and both
// shapes; the float64/float32 entry points compiled in float_interp.cc behave like the
// templates.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "cc/interp/float_interp.h"
#include "cc/interp/interp.h"
#include "cc/interp/interp_test_support.h"
#include "cc/ir/graph.h"

namespace mj::interp {

using ir::BlockGraph;
using ir::DType;
using ir::IrError;
using ir::KernelGraph;
using ir::OpKind;
using ir::Shape;

namespace {

using interp_testing::cast_tensor;
using interp_testing::random_tensor;

KernelGraph two_input_graph() {
  KernelGraph g;
  const int a = g.new_input({2, 3}, DType::kF32);
  const int b = g.new_input({3, 4}, DType::kF32);
  g.mark_output(g.matmul(a, b));
  return g;
}

// Runs fn, which must throw IrError, and returns its message.
template <class Fn>
std::string ir_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const IrError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no IrError thrown";
  return "";
}

TEST(InputChecks, WrongShapeNamesTheInputAndBothShapes) {
  const KernelGraph g = two_input_graph();
  std::mt19937 rng(1);
  const auto a = random_tensor({2, 3}, rng), wrong_b = random_tensor({4, 3}, rng);
  const std::string msg = ir_error_of([&] { interpret_f64(g, {a, wrong_b}); });
  EXPECT_NE(msg.find("input 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3, 4]"), std::string::npos) << msg;
}

TEST(InputChecks, WrongInputCount) {
  const KernelGraph g = two_input_graph();
  std::mt19937 rng(2);
  const std::string msg =
      ir_error_of([&] { interpret_f32(g, {cast_tensor<float>(random_tensor({2, 3}, rng))}); });
  EXPECT_NE(msg.find("2 inputs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 were given"), std::string::npos) << msg;
}

TEST(InputChecks, DataSizeMustMatchShape) {
  const KernelGraph g = two_input_graph();
  std::mt19937 rng(3);
  auto b = random_tensor({3, 4}, rng);
  b.data.pop_back();
  const std::string msg = ir_error_of([&] { interpret_f64(g, {random_tensor({2, 3}, rng), b}); });
  EXPECT_NE(msg.find("input 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("11 values"), std::string::npos) << msg;
}

TEST(InputChecks, BlockGraphInputsAreKernelShapes) {
  BlockGraph bg({2, 1, 1}, 1);
  const int x = bg.new_input({4, 6}, DType::kF32, {0, -1, -1}, -1);
  bg.new_output(bg.unary(OpKind::kExp, x), {0, -1, -1}, DType::kF32);
  std::mt19937 rng(4);
  // The tile shape [2, 6] is not what a caller passes: it passes the kernel tensor.
  const std::string msg =
      ir_error_of([&] { interpret_block_graph_f64(bg, {random_tensor({2, 6}, rng)}); });
  EXPECT_NE(msg.find("input 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 6]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4, 6]"), std::string::npos) << msg;
  EXPECT_EQ(
      interpret_block_graph_f32(bg, {cast_tensor<float>(random_tensor({4, 6}, rng))}).at(0).shape,
      (Shape{4, 6}));
}

TEST(FloatEntryPoints, MatchTheTemplates) {
  const KernelGraph g = two_input_graph();
  std::mt19937 rng(5);
  const std::vector<DenseTensor<double>> in = {random_tensor({2, 3}, rng),
                                               random_tensor({3, 4}, rng)};
  EXPECT_EQ(interpret_f64(g, in).at(0).data, interpret(g, in, FloatDomain<double>{}).at(0).data);
  const std::vector<DenseTensor<float>> in32 = {cast_tensor<float>(in[0]),
                                                cast_tensor<float>(in[1])};
  EXPECT_EQ(interpret_f32(g, in32).at(0).data, interpret(g, in32, FloatDomain<float>{}).at(0).data);
}

}  // namespace
}  // namespace mj::interp
