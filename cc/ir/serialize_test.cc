// The JSON form of kernel graphs: lossless round trips (same text, same hash), and errors that
// name the place and the problem for documents that are not graphs.
#include "cc/ir/serialize.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cc/ir/hash.h"
#include "cc/ir/ir_error_matchers_for_test.h"
#include "cc/ir/print.h"

namespace mj::ir {
namespace {

KernelGraph every_kernel_op() {
  KernelGraph g;
  const int a = g.new_input({2, 4, 8}, DType::kBF16);
  const int b = g.new_input({8, 8}, DType::kF16);
  int t = g.matmul(a, b);
  for (int k = 0; k < kNumOpKinds; ++k) {
    if (is_unary_elementwise(OpKind(k))) t = g.unary(OpKind(k), t, 1.0 / 3);
  }
  t = g.binary(OpKind::kDiv, g.binary(OpKind::kSub, t, a), a);
  t = g.concat(g.reduce(t, -1, ReduceKind::kMean), g.reduce(t, 2, ReduceKind::kMax), -1);
  g.mark_output(g.rms_norm(t, 1e-300));
  g.mark_output(a);
  return g;
}

KernelGraph online_softmax() {
  KernelGraph g;
  const int q = g.new_input({4, 16}, DType::kF32);
  const int k = g.new_input({16, 32}, DType::kF32);
  const int v = g.new_input({32, 16}, DType::kBF16);
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 4);
  const int tq = bg->new_input({4, 16}, DType::kF32, {0, -1, -1}, -1);
  const int tk = bg->new_input({16, 32}, DType::kF32, {-1, -1, -1}, 1);
  const int tv = bg->new_input({32, 16}, DType::kBF16, {-1, -1, -1}, 0);
  const int s = bg->matmul(tq, tk);
  bg->new_output(
      bg->binary(OpKind::kDiv, bg->accum_exp_matmul(s, tv), bg->accum(OpKind::kAccumExpSumLast, s)),
      {0, -1, -1}, DType::kF16);
  bg->new_output(bg->accum(OpKind::kAccumRmsLast, s, 2.5e-7), {0, -1, -1}, DType::kF32);
  for (int out : g.customized({q, k, v}, bg)) g.mark_output(out);
  return g;
}

void expect_round_trip(const KernelGraph& g) {
  const std::string text = kernel_graph_to_json(g);
  const KernelGraph again = kernel_graph_from_json(text);
  EXPECT_EQ(kernel_graph_to_json(again), text);
  EXPECT_EQ(graph_hash(again), graph_hash(g));
  EXPECT_EQ(to_string(again), to_string(g));
}

TEST(Serialize, RoundTripsAreLossless) {
  expect_round_trip(every_kernel_op());
  expect_round_trip(online_softmax());
  expect_round_trip(KernelGraph());
}

TEST(Serialize, DocumentLayout) {
  const std::string text = kernel_graph_to_json(online_softmax());
  EXPECT_EQ(text.rfind(R"({"format":"mirage_jax.kernel_graph","version":1,"ops":[)", 0), 0u);
  EXPECT_NE(text.find(R"({"kind":"input","outputs":[0],"shape":[4,16],"dtype":"float32"})"),
            std::string::npos);
  EXPECT_NE(text.find(R"("grid":[2,1,1],"forloop_range":4)"), std::string::npos);
  EXPECT_NE(text.find(R"({"kind":"input","outputs":[1],"shape":[16,32],"dtype":"float32",)"
                      R"("imap":[-1,-1,-1],"fmap":1})"),
            std::string::npos);
  EXPECT_NE(text.find(R"("kind":"accum_rms_last","inputs":[3],"outputs":[7],"scalar":2.5e-07})"),
            std::string::npos);
  EXPECT_NE(text.find(R"({"kind":"output","inputs":[6],"omap":[0,-1,-1],"dtype":"float16"})"),
            std::string::npos);
}

std::string doc(const std::string& ops) {
  return R"({"format": "mirage_jax.kernel_graph", "version": 1, "ops": [)" + ops + "]}";
}
const std::string kInput =
    R"({"kind": "input", "outputs": [0], "shape": [4, 8], "dtype": "float32"})";

TEST(Serialize, MalformedDocumentsNameThePlace) {
  EXPECT_IR_ERROR(kernel_graph_from_json("{not json"), "from_json: not valid JSON", "line 1");
  EXPECT_IR_ERROR(kernel_graph_from_json("[1]"), "from_json: the document must be a JSON object");
  EXPECT_IR_ERROR(kernel_graph_from_json(R"({"format": "x"})"), "has format 'x'");
  EXPECT_IR_ERROR(kernel_graph_from_json(R"({"format": "mirage_jax.kernel_graph", "version": 2})"),
                  "has version 2; this reader supports version 1");
  EXPECT_IR_ERROR(kernel_graph_from_json(doc(kInput).insert(1, R"("b": 1, "a": 2, )")),
                  "the document has unexpected 'a', 'b'");
  EXPECT_IR_ERROR(kernel_graph_from_json(doc(R"({"kind": "accum_sum"})")),
                  "ops[0] has unknown kind 'accum_sum' for a KernelGraph");
  EXPECT_IR_ERROR(kernel_graph_from_json(doc(R"({"kind": "input", "outputs": [0]})")),
                  "ops[0] (input) is missing 'dtype', 'shape'");
  EXPECT_IR_ERROR(kernel_graph_from_json(doc(R"({"kind": "input", "outputs": [0], "shape": [4, "8"],
                                     "dtype": "float32"})")),
                  "ops[0] (input): new_input: argument 'shape[1]' must be an integer, got str '8'");
  EXPECT_IR_ERROR(kernel_graph_from_json(doc(R"({"kind": "input", "outputs": [0], "shape": [4, 0],
                                     "dtype": "float32"})")),
                  "ops[0] (input): new_input", "[4, 0]");
  EXPECT_IR_ERROR(kernel_graph_from_json(doc(kInput + R"(, {"kind": "exp", "inputs": [1],
                                                            "outputs": [1]})")),
                  "ops[1] (exp) uses tensor id 1, which no earlier op of this graph defines");
  EXPECT_IR_ERROR(kernel_graph_from_json(doc(kInput + R"(, {"kind": "exp", "inputs": [0, 0],
                                                            "outputs": [1]})")),
                  "ops[1] (exp) has 2 inputs, expected 1");
  EXPECT_IR_ERROR(kernel_graph_from_json(doc(kInput + R"(, {"kind": "exp", "inputs": [true],
                                                            "outputs": [1]})")),
                  "'inputs' must be a list of integer tensor ids, got [True]");
  EXPECT_IR_ERROR(kernel_graph_from_json(doc(kInput + R"(, {"kind": "exp", "inputs": [0],
                                                            "outputs": [0]})")),
                  "ops[1] (exp) redefines tensor id 0");
  EXPECT_IR_ERROR(kernel_graph_from_json(doc(kInput + R"(, {"kind": "reduce", "inputs": [0],
                                                            "outputs": [1], "dim": 1,
                                                            "reduce_kind": "prod"})")),
                  "ops[1] (reduce): reduce: argument 'kind': unknown value 'prod'");
  EXPECT_IR_ERROR(
      kernel_graph_from_json(doc(kInput + R"(, {"kind": "customized", "inputs": [0],
                                                 "outputs": [1], "block_graph": {"grid": [2, 1],
                                                 "forloop_range": 1, "ops": []}})")),
      "ops[1] (customized).block_graph: BlockGraph: argument 'grid' must have 3 entries",
      "got 2: (2, 1)");
}

}  // namespace
}  // namespace mj::ir
