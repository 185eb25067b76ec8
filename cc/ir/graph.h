#pragma once
// The μGraph IR (docs/ir-semantics.md): a kernel graph is a DAG of ops over whole tensors; a
// customized op holds a block graph that every block of a grid runs on its own tiles.
// Builders validate every rule at construction and throw IrError, so a graph object that
// exists is valid. Tensors are named "t<id>" in messages and printouts.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cc/ir/dtype.h"
#include "cc/ir/error.h"
#include "cc/ir/op_kind.h"

namespace mj::ir {

constexpr int kMaxRank = 5;  // a grouped-query decode product is [B, S, K, G, H]
using Shape = std::vector<int64_t>;
using Dim3 = std::array<int, 3>;  // grid axes x, y, z

std::string shape_str(const Shape& s);  // "[8, 4096]"

// Where a block-graph tensor lives relative to the for-loop.
enum class Phase : uint8_t {
  kInvariant,  // from inputs with fmap = -1 only: usable in the body and in the epilogue
  kBody,       // recomputed every iteration
  kEpilogue,   // after the loop, from accumulators
};
const char* phase_name(Phase p);

struct Tensor {
  Shape shape;
  DType dtype = DType::kF32;
  int producer = -1;                // index of the op that defines it
  int output_index = 0;             // which output of that op
  Phase phase = Phase::kInvariant;  // block graphs only
};

class BlockGraph;

struct Op {
  OpKind kind;
  std::vector<int> inputs;   // tensor ids
  std::vector<int> outputs;  // tensor ids (kOutput has none)
  double scalar = 0.0;       // mul_scalar/add_scalar constant, rms_norm / accum_rms_last eps
  int dim = -1;              // reduce, concat (non-negative, normalized)
  ReduceKind reduce = ReduceKind::kSum;
  // block level kInput / kOutput
  Dim3 imap{-1, -1, -1};  // kInput: tensor dim split along each grid axis, -1 = replicated
  int fmap = -1;          // kInput: tensor dim split over the for-loop, -1 = loop-invariant
  Dim3 omap{-1, -1, -1};  // kOutput: tensor dim each grid axis stores along
  int io_index = -1;      // kInput/kOutput: position among the graph's inputs/outputs
  // kernel level kCustomized
  std::shared_ptr<const BlockGraph> block_graph;
};

// Shared by both levels: tensors, ops, and the ops whose rules do not depend on the level.
// Every builder returns the new tensor id.
class Graph {
 public:
  Graph() = default;
  // Declared so that the virtual destructor does not silently turn moves into copies.
  Graph(const Graph&) = default;
  Graph(Graph&&) = default;
  Graph& operator=(const Graph&) = default;
  Graph& operator=(Graph&&) = default;
  virtual ~Graph() = default;

  int unary(OpKind kind, int x, double scalar = 0.0);
  int binary(OpKind kind, int a, int b, double scalar = 0.0);  // scalar: select's fill
  int matmul(int a, int b);
  int reduce(int x, int dim, ReduceKind kind);  // dim may be negative (python style)
  int rms_norm(int x, double eps);
  int concat(int a, int b, int dim);  // dim may be negative

  const std::vector<Tensor>& tensors() const { return tensors_; }
  const std::vector<Op>& ops() const { return ops_; }
  const Tensor& tensor(int id) const;  // throws IrError for an unknown id
  const std::vector<int>& input_ids() const { return inputs_; }
  const std::vector<int>& output_ids() const { return outputs_; }

 protected:
  // Appends op with outputs of the given shapes; returns the first output id.
  int add_op(Op op, const std::vector<Shape>& out_shapes, DType dtype);
  // Block graphs check and record phases; kernel graphs accept anything.
  virtual Phase combine_phases(const Op& /*op*/) const { return Phase::kInvariant; }
  void check_id(int id, const char* op_name) const;
  std::string tname(int id) const { return "t" + std::to_string(id); }

  std::vector<Tensor> tensors_;
  std::vector<Op> ops_;
  std::vector<int> inputs_;   // kInput output tensor ids, in order
  std::vector<int> outputs_;  // tensors marked/stored as outputs, in order
};

class KernelGraph : public Graph {
 public:
  int new_input(const Shape& shape, DType dtype);
  // `inputs` are kernel tensors in the block graph's input order; their shapes and dtypes
  // must match what the block graph's inputs were declared from. Returns the output ids.
  std::vector<int> customized(const std::vector<int>& inputs, std::shared_ptr<const BlockGraph> bg);
  void mark_output(int t);
};

class BlockGraph : public Graph {
 public:
  // grid entries >= 1, forloop_range >= 1
  BlockGraph(Dim3 grid, int forloop_range);

  // A tile of a kernel tensor of `kernel_shape`: for each grid axis a with grid[a] > 1,
  // imap[a] (-1 or a dim) is split into grid[a] parts; fmap (-1 or a dim) into forloop_range
  // parts. Axes with grid[a] == 1 must have imap[a] == -1. A dim is split by at most one
  // grid axis. Every split must divide exactly.
  int new_input(const Shape& kernel_shape, DType dtype, Dim3 imap, int fmap);
  // kAccumSum, kAccumSumLast, kAccumMeanLast, kAccumRmsLast (scalar = eps), kAccumMaxLast,
  // kAccumExpSumLast. The input must not be in the epilogue.
  int accum(OpKind kind, int x, double scalar = 0.0);
  int accum_exp_matmul(int s, int v);
  // Stores t (epilogue or invariant; body only when forloop_range == 1). Each grid axis with
  // grid[a] > 1 must name a distinct dim of t; -1 there would need a cross-block reduction.
  void new_output(int t, Dim3 omap, DType dtype);

  const Dim3& grid() const { return grid_; }
  int forloop_range() const { return forloop_range_; }
  int64_t num_blocks() const { return int64_t(grid_[0]) * grid_[1] * grid_[2]; }
  // The kernel-level shape/dtype of input i and output i.
  const Shape& kernel_input_shape(int i) const { return kernel_in_shapes_.at(i); }
  DType kernel_input_dtype(int i) const { return kernel_in_dtypes_.at(i); }
  const Shape& kernel_output_shape(int i) const { return kernel_out_shapes_.at(i); }
  DType kernel_output_dtype(int i) const { return kernel_out_dtypes_.at(i); }
  int num_inputs() const { return int(inputs_.size()); }
  int num_outputs() const { return int(outputs_.size()); }

 protected:
  Phase combine_phases(const Op& op) const override;

 private:
  Dim3 grid_;
  int forloop_range_;
  std::vector<Shape> kernel_in_shapes_, kernel_out_shapes_;
  std::vector<DType> kernel_in_dtypes_, kernel_out_dtypes_;
};

}  // namespace mj::ir
