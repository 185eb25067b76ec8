#include "cc/codegen/cuda/emit_matmul.h"

namespace mj::codegen::cuda {

using ir::DType;
using ir::Shape;

namespace {

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

// Index of a matmul operand: its batch index broadcast from C's, then (row, col).
std::vector<std::string> operand_index(const Shape& operand,
                                       const std::vector<std::string>& c_batch,
                                       const std::string& row, const std::string& col) {
  std::vector<std::string> idx = broadcast_index(batch_of(operand), c_batch);
  idx.push_back(row);
  idx.push_back(col);
  return idx;
}

// Each thread owns one column j of up to 8 consecutive rows: B's element is loaded once per
// k and reused for every row (A's element is the same for the whole warp, a broadcast), so
// a GEMV-like tile (few rows, the decode and small-batch shapes) costs about one shared-memory
// load per FMA instead of two. When those cells leave threads idle, `split` adjacent lanes
// share one cell, each summing every split-th k, and a shuffle tree adds their parts.
void emit_fma(const Emit& e, const MatmulOperand& a, const MatmulOperand& b, const std::string& c,
              const Shape& c_shape, bool accumulate, const StoreFn& store) {
  const int rank = int(c_shape.size());
  const int64_t m = c_shape[rank - 2], n = c_shape[rank - 1], k = a.shape.back();
  int64_t rows = 1;
  for (int64_t r = 8; r >= 1; --r) {
    if (m % r == 0) {
      rows = r;
      break;
    }
  }
  Shape groups = c_shape;
  groups[rank - 2] = m / rows;
  const int64_t cells = element_count(groups);
  int64_t split = 1;
  while (split < 32 && cells * split * 2 <= e.plan.threads && split * 2 <= k) split *= 2;
  const int64_t slots = (cells * split + e.plan.threads - 1) / e.plan.threads * e.plan.threads;
  // Every thread runs the same number of rounds, so whole warps meet at the shuffles.
  e.w.open("for (int slot = threadIdx.x; slot < " + str(slots) +
           "; slot += " + str(e.plan.threads) + ")");
  e.w.line("const int part = slot % " + str(split) + ";");
  e.w.line("const bool live = slot < " + str(cells * split) + ";");
  e.w.line("const int cell = live ? slot / " + str(split) + " : 0;");
  std::vector<std::string> idx;
  const std::vector<int64_t> strides = dense_strides(groups);
  for (int d = 0; d < rank; ++d) {
    if (groups[d] == 1) {
      idx.push_back("0");
      continue;
    }
    const std::string v = "c" + std::to_string(d);
    e.w.line("[[maybe_unused]] const int " + v + " = cell / " + str(strides[d]) + " % " +
             str(groups[d]) + ";");
    idx.push_back(v);
  }
  const std::vector<std::string> batch(idx.begin(), idx.end() - 2);
  const Shape c_batch(c_shape.begin(), c_shape.end() - 2);
  const std::string j = idx[rank - 1];
  e.w.line("const int i0 = " + idx[rank - 2] + " * " + str(rows) + ";");
  const std::string flat = "(" + linear_index(batch, dense_strides(c_batch), c_batch) + ") * " +
                           str(m * n) + " + (i0 + r) * " + str(n) + " + " + j;
  e.w.line("float acc[" + str(rows) + "] = {};");
  e.w.open("if (live)");
  e.w.open("for (int kk = part; kk < " + str(k) + "; kk += " + str(split) + ")");
  e.w.line("const float bk = " + b.read(operand_index(b.shape, batch, "kk", j)) + ";");
  e.w.line("#pragma unroll");
  e.w.line("for (int r = 0; r < " + str(rows) + "; ++r) acc[r] = fmaf(" +
           a.read(operand_index(a.shape, batch, "i0 + r", "kk")) + ", bk, acc[r]);");
  e.w.close();
  e.w.close();
  if (split > 1) {
    e.w.line("#pragma unroll");
    e.w.open("for (int r = 0; r < " + str(rows) + "; ++r)");
    e.w.line("for (int o = " + str(split / 2) +
             "; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);");
    e.w.close();
  }
  e.w.open("if (live && part == 0)");
  e.w.line("#pragma unroll");
  e.w.open("for (int r = 0; r < " + str(rows) + "; ++r)");
  if (accumulate) e.w.line("acc[r] += " + c + "[" + flat + "];");
  std::vector<std::string> cell = batch;
  cell.push_back("i0 + r");
  cell.push_back(j);
  store("acc[r]", cell, flat);
  e.w.close();
  e.w.close();
  e.w.close();
}

void emit_mma(const Emit& e, const MatmulOperand& a, const MatmulOperand& b, const std::string& c,
              const Shape& c_shape, bool accumulate, const StoreFn& store) {
  const int rank = int(c_shape.size());
  const int64_t m = c_shape[rank - 2], n = c_shape[rank - 1], k = a.shape.back();
  const int64_t mt = (m + 15) / 16, nt = (n + 7) / 8;
  const Shape c_batch = batch_of(c_shape);
  const int64_t batches = element_count(c_batch);
  const char* type = a.dtype == DType::kBF16 ? "__nv_bfloat16" : "__half";
  e.w.line("const int g = (threadIdx.x & 31) >> 2, q = threadIdx.x & 3;");
  e.w.open("for (int tile = threadIdx.x >> 5; tile < " + str(batches * mt * nt) +
           "; tile += " + str(e.plan.threads / 32) + ")");
  e.w.line("[[maybe_unused]] const int mb = tile / " + str(mt * nt) + ";");
  e.w.line("const int ra = tile / " + str(nt) + " % " + str(mt) + " * 16 + g, rb = ra + 8;");
  e.w.line("const int cn = tile % " + str(nt) + " * 8 + g, cc = cn - g + 2 * q;");
  // C's batch index from mb.
  std::vector<std::string> batch;
  const std::vector<int64_t> bstrides = dense_strides(c_batch);
  for (size_t d = 0; d < c_batch.size(); ++d) {
    if (c_batch[d] == 1) {
      batch.push_back("0");
      continue;
    }
    const std::string v = "mb" + std::to_string(d);
    e.w.line("const int " + v + " = mb / " + str(bstrides[d]) + " % " + str(c_batch[d]) + ";");
    batch.push_back(v);
  }
  auto guard = [](const std::string& cond, const std::string& value) {
    return cond.empty() ? value : "(" + cond + " ? " + value + " : 0.0f)";
  };
  auto both = [](const std::string& x, const std::string& y) {
    return x.empty() ? y : y.empty() ? x : x + " && " + y;
  };
  auto row_ok = [&](const std::string& r) { return m % 16 ? r + " < " + str(m) : std::string(); };
  auto col_ok = [&](const std::string& col) {
    return n % 8 ? col + " < " + str(n) : std::string();
  };
  auto k_ok = [&](const std::string& kk) { return k % 16 ? kk + " < " + str(k) : std::string(); };
  auto a_at = [&](const std::string& r, const std::string& kk) {
    return guard(both(row_ok(r), k_ok(kk)), a.read(operand_index(a.shape, batch, r, kk)));
  };
  auto b_at = [&](const std::string& kk, const std::string& col) {
    return guard(both(k_ok(kk), col_ok(col)), b.read(operand_index(b.shape, batch, kk, col)));
  };
  const std::string c_flat = "mb * " + str(m * n) + " + ";
  auto c_at = [&](const std::string& r, const std::string& col) {
    return c_flat + r + " * " + str(n) + " + " + col;
  };
  const std::string cells[4][2] = {{"ra", "cc"}, {"ra", "cc + 1"}, {"rb", "cc"}, {"rb", "cc + 1"}};
  for (int x = 0; x < 4; ++x) {
    const std::string& r = cells[x][0];
    const std::string& col = cells[x][1];
    e.w.line(
        "float d" + std::to_string(x) + " = " +
        (accumulate ? guard(both(row_ok(r), col_ok(col)), c + "[" + c_at(r, col) + "]") : "0.0f") +
        ";");
  }
  e.w.open("for (int k0 = 0; k0 < " + str(k) + "; k0 += 16)");
  e.w.line("const int ka = k0 + 2 * q, kb = ka + 8;");
  const std::string pack = std::string("mj_cuda::pack2<") + type + ">";
  // Register x holds two elements, the first in its low half (PTX ISA fragment layouts).
  auto reg = [&](const std::string& name, const std::string& lo, const std::string& hi) {
    e.w.line("const uint32_t " + name + " = " + pack + "(" + lo + ", " + hi + ");");
  };
  reg("a0", a_at("ra", "ka"), a_at("ra", "ka + 1"));
  reg("a1", a_at("rb", "ka"), a_at("rb", "ka + 1"));
  reg("a2", a_at("ra", "kb"), a_at("ra", "kb + 1"));
  reg("a3", a_at("rb", "kb"), a_at("rb", "kb + 1"));
  reg("b0", b_at("ka", "cn"), b_at("ka + 1", "cn"));
  reg("b1", b_at("kb", "cn"), b_at("kb + 1", "cn"));
  e.w.line(std::string("mj_cuda::mma_m16n8k16<") + type +
           ">(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1);");
  e.w.close();
  for (int x = 0; x < 4; ++x) {
    const std::string& r = cells[x][0];
    const std::string& col = cells[x][1];
    const std::string cond = both(row_ok(r), col_ok(col));
    e.w.open(cond.empty() ? std::string() : "if (" + cond + ")");
    std::vector<std::string> idx = batch;
    idx.push_back(r);
    idx.push_back(col);
    store("d" + std::to_string(x), idx, c_at(r, col));
    e.w.close();
  }
  e.w.close();
}

bool is_16bit(DType d) { return d == DType::kBF16 || d == DType::kF16; }

}  // namespace

MatmulOperand tensor_operand(const Emit& e, int t) {
  return {e.bg.tensor(t).shape, e.bg.tensor(t).dtype,
          [&e, t](const std::vector<std::string>& idx) { return read_element(e, t, idx); }};
}

void emit_matmul(const Emit& e, const MatmulOperand& a, const MatmulOperand& b,
                 const std::string& c, const Shape& c_shape, bool accumulate,
                 const StoreFn& store_or_null) {
  const StoreFn store =
      store_or_null ? store_or_null
                    : StoreFn([&e, c](const std::string& value, const std::vector<std::string>&,
                                      const std::string& flat) {
                        e.w.line(c + "[" + flat + "] = " + value + ";");
                      });
  e.w.open("");
  if (is_16bit(a.dtype) && a.dtype == b.dtype) {
    // Tensor cores on sm_80+: operands rounded to their 16-bit dtype (exact for input tiles),
    // products exact, sums in f32.
    e.w.raw("#if MJ_CUDA_MMA\n");
    emit_mma(e, a, b, c, c_shape, accumulate, store);
    e.w.raw("#else\n");
    emit_fma(e, a, b, c, c_shape, accumulate, store);
    e.w.raw("#endif\n");
  } else {
    emit_fma(e, a, b, c, c_shape, accumulate, store);
  }
  e.w.close();
}

}  // namespace mj::codegen::cuda
