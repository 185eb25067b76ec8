#include "cc/codegen/cuda/emit_matmul.h"

#include "cc/ir/error.h"

namespace mj::codegen::cuda {

using ir::DType;
using ir::IrError;
using ir::Op;
using ir::OpKind;
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

void default_store(const Emit& e, const MatmulCall& call, const std::string& value,
                   const std::vector<std::string>& idx) {
  if (call.store) {
    call.store(value, idx);
  } else {
    e.w.line(store_element(e, call.c, idx, value));
  }
}

// Each thread owns one column j of up to 8 consecutive rows: B's element is loaded once per
// k and reused for every row (A's element is the same for the whole warp, a broadcast), so
// a GEMV-like tile (few rows, the decode and small-batch shapes) costs about one shared-memory
// load per FMA instead of two. When those cells leave threads idle, `split` adjacent lanes
// share one cell, each summing every split-th k, and a shuffle tree adds their parts.
void emit_fma(const Emit& e, const MatmulOperand& a, const MatmulOperand& b,
              const MatmulCall& call) {
  const Shape& c_shape = e.bg.tensor(call.c).shape;
  const int rank = int(c_shape.size());
  const int64_t m = c_shape[rank - 2], k = a.shape.back();
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
  const std::string j = idx[rank - 1];
  e.w.line("const int i0 = " + idx[rank - 2] + " * " + str(rows) + ";");
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
  std::vector<std::string> cell = batch;
  cell.push_back("i0 + r");
  cell.push_back(j);
  if (call.accumulate) e.w.line("acc[r] += " + read_element(e, call.c, cell) + ";");
  default_store(e, call, "acc[r]", cell);
  e.w.close();
  e.w.close();
  e.w.close();
}

// The warp tiles of C for the op's plan: the loop over them and the names it declares.
struct WarpTiling {
  int64_t m, n, k, mt, ntw, batches;
  int nt;
  std::vector<std::string> batch;  // C's batch index
};

WarpTiling warp_tiling(const MatmulPlan& mm, const Shape& c_shape, int64_t k) {
  const int rank = int(c_shape.size());
  WarpTiling t;
  t.m = c_shape[rank - 2];
  t.n = c_shape[rank - 1];
  t.k = k;
  t.nt = mm.n_tiles;
  t.mt = (t.m + 15) / 16;
  t.ntw = (t.n + 8 * t.nt - 1) / (8 * t.nt);
  t.batches = element_count(batch_of(c_shape));
  if (t.batches * t.mt * t.ntw != mm.warp_tiles) {
    throw IrError("cuda codegen: the plan's warp tiles do not match the matmul's shape");
  }
  return t;
}

// Opens the loop over the calling warp's tiles, declaring mb (C's batch), r0 (first row) and
// n0 (first column) of the tile. Persistent accumulators deal the tiles statically, w-th
// tile of warp v being v + w * warps, so registers indexed by w stay with their tile.
// Returns the number of blocks opened.
int open_warp_tiles(const Emit& e, const MatmulPlan& mm, WarpTiling& t, bool persistent) {
  const int warps = e.plan.threads / 32;
  int opened = 1;
  if (persistent) {
    e.w.line("#pragma unroll");
    e.w.open("for (int w = 0; w < " + str(mm.tiles_per_warp) + "; ++w)");
    e.w.line("const int tile = (threadIdx.x >> 5) + w * " + str(warps) + ";");
    if (mm.warp_tiles % warps != 0 || mm.warp_tiles / warps != mm.tiles_per_warp) {
      e.w.open("if (tile < " + str(mm.warp_tiles) + ")");
      opened = 2;
    }
  } else {
    e.w.open("for (int tile = threadIdx.x >> 5; tile < " + str(mm.warp_tiles) +
             "; tile += " + str(warps) + ")");
  }
  e.w.line("[[maybe_unused]] const int mb = tile / " + str(t.mt * t.ntw) + ";");
  e.w.line("const int r0 = tile / " + str(t.ntw) + " % " + str(t.mt) + " * 16;");
  e.w.line("const int n0 = tile % " + str(t.ntw) + " * " + str(8 * t.nt) + ";");
  return opened;
}

std::vector<std::string> declare_batch(const Emit& e, const Shape& c_shape) {
  const Shape c_batch = batch_of(c_shape);
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
  return batch;
}

std::string accumulator_name(int op) { return "mm" + std::to_string(op); }

// The register of C's fragment element x (0..3) of n-subtile j.
std::string d_reg(const MatmulCall& call, bool persistent, int j, int x) {
  if (persistent) {
    return accumulator_name(call.op) + "[w][" + std::to_string(j) + "][" + std::to_string(x) + "]";
  }
  return "d" + std::to_string(j) + "_" + std::to_string(x);
}

// Row and column of fragment element x of n-subtile j (mma.m16n8 C/D layout).
std::pair<std::string, std::string> d_cell(int j, int x) {
  const std::string row = x < 2 ? "ra" : "rb";
  std::string col = "n0 + " + std::to_string(8 * j) + " + 2 * q";
  if (x & 1) col += " + 1";
  return {row, col};
}

std::string both(const std::string& x, const std::string& y) {
  return x.empty() ? y : y.empty() ? x : x + " && " + y;
}

std::string guard(const std::string& cond, const std::string& value) {
  return cond.empty() ? value : "(" + cond + " ? " + value + " : 0.0f)";
}

void emit_mma(const Emit& e, const MatmulOperand& a, const MatmulOperand& b,
              const MatmulCall& call) {
  const MatmulPlan& mm = e.plan.matmuls.at(call.op);
  const bool tf32 = mm.path == MatmulPath::kMmaTf32;
  const bool persistent = mm.registers;
  const Shape& c_shape = e.bg.tensor(call.c).shape;
  WarpTiling t = warp_tiling(mm, c_shape, a.shape.back());
  const int64_t m = t.m, n = t.n, k = t.k;
  const int64_t kstep = tf32 ? 8 : 16;
  e.w.line("const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;");
  const int opened = open_warp_tiles(e, mm, t, persistent);
  const std::vector<std::string> batch = declare_batch(e, c_shape);
  e.w.line("[[maybe_unused]] const int ra = r0 + g, rb = ra + 8;");
  auto row_ok = [&](const std::string& r) { return m % 16 ? r + " < " + str(m) : std::string(); };
  auto col_ok = [&](const std::string& c) { return n % 8 ? c + " < " + str(n) : std::string(); };
  auto k_ok = [&](const std::string& kk) {
    return k % kstep ? kk + " < " + str(k) : std::string();
  };
  auto cell_index = [&](const std::string& r, const std::string& c) {
    std::vector<std::string> idx = batch;
    idx.push_back(r);
    idx.push_back(c);
    return idx;
  };
  // C's fragments: local, or the persistent registers (rescaled first when asked).
  if (!persistent) {
    for (int j = 0; j < t.nt; ++j) {
      for (int x = 0; x < 4; ++x) {
        const auto [r, c] = d_cell(j, x);
        e.w.line("float " + d_reg(call, false, j, x) + " = " +
                 (call.accumulate
                      ? guard(both(row_ok(r), col_ok(c)), read_element(e, call.c, cell_index(r, c)))
                      : "0.0f") +
                 ";");
      }
    }
  } else if (!call.row_scale.empty()) {
    const Shape& s_rows = call.row_scale_shape;
    auto scale_of = [&](const std::string& r) {
      std::vector<std::string> rows = batch;
      rows.push_back(m % 16 ? "min(" + r + ", " + str(m - 1) + ")" : r);
      return call.row_scale + "[" +
             linear_index(broadcast_index(s_rows, rows), dense_strides(s_rows), s_rows) + "]";
    };
    e.w.line("const float scale_a = " + scale_of("ra") + ", scale_b = " + scale_of("rb") + ";");
    for (int j = 0; j < t.nt; ++j) {
      for (int x = 0; x < 4; ++x) {
        e.w.line(d_reg(call, true, j, x) + " *= " + (x < 2 ? "scale_a;" : "scale_b;"));
      }
    }
  }
  e.w.open("for (int k0 = 0; k0 < " + str(k) + "; k0 += " + str(kstep) + ")");
  // The first k of this lane's fragment elements, and the second (+ half a k step).
  e.w.line(tf32 ? "[[maybe_unused]] const int ka = k0 + q, kb = ka + 4;"
                : "[[maybe_unused]] const int ka = k0 + 2 * q, kb = ka + 8;");
  // ---- A's fragment
  e.w.line("uint32_t a0, a1, a2, a3;");
  if (mm.ldmatrix_a) {
    // Lane l names row l % 16 of the 16-row tile, at column (l / 16) * 16 bytes: matrices
    // (rows 0-7, 8-15) x (first, second 16 bytes of the k step) = a0, a1, a2, a3.
    const std::string lr =
        m % 16 ? "min(r0 + (lane & 15), " + str(m - 1) + ")" : "r0 + (lane & 15)";
    const std::string lc = "k0 + (lane >> 4) * " + str(tf32 ? 4 : 8);
    e.w.line("mj_cuda::ldsm_x4(a0, a1, a2, a3, " +
             a.address(operand_index(a.shape, batch, lr, lc)) + ");");
    if (tf32)
      e.w.line(
          "a0 = mj_cuda::tf32_bits(a0); a1 = mj_cuda::tf32_bits(a1); "
          "a2 = mj_cuda::tf32_bits(a2); a3 = mj_cuda::tf32_bits(a3);");
  } else {
    auto a_at = [&](const std::string& r, const std::string& kk) {
      return guard(both(row_ok(r), k_ok(kk)), a.read(operand_index(a.shape, batch, r, kk)));
    };
    if (tf32) {
      e.w.line("a0 = mj_cuda::to_tf32(" + a_at("ra", "ka") + ");");
      e.w.line("a1 = mj_cuda::to_tf32(" + a_at("rb", "ka") + ");");
      e.w.line("a2 = mj_cuda::to_tf32(" + a_at("ra", "kb") + ");");
      e.w.line("a3 = mj_cuda::to_tf32(" + a_at("rb", "kb") + ");");
    } else {
      // Register x holds two elements, the first in its low half (PTX ISA fragment layouts).
      const std::string pack = std::string("mj_cuda::pack2<") + element_type(a.dtype) + ">";
      e.w.line("a0 = " + pack + "(" + a_at("ra", "ka") + ", " + a_at("ra", "ka + 1") + ");");
      e.w.line("a1 = " + pack + "(" + a_at("rb", "ka") + ", " + a_at("rb", "ka + 1") + ");");
      e.w.line("a2 = " + pack + "(" + a_at("ra", "kb") + ", " + a_at("ra", "kb + 1") + ");");
      e.w.line("a3 = " + pack + "(" + a_at("rb", "kb") + ", " + a_at("rb", "kb + 1") + ");");
    }
  }
  // ---- B's fragments and the products, per n-subtile
  const std::string mma = tf32
                              ? std::string("mj_cuda::mma_m16n8k8_tf32")
                              : std::string("mj_cuda::mma_m16n8k16<") + element_type(a.dtype) + ">";
  for (int j = 0; j < t.nt; ++j) {
    const std::string bj = "b" + std::to_string(j);
    if (mm.ldmatrix_b) {
      // Transposed 8x8 matrices: lanes 0-7 name rows k0..k0+7, lanes 8-15 rows k0+8..k0+15
      // of subtile j's 8 columns; x4 also takes subtile j + 1's from lanes 16-31.
      if (j % 2 == 1 && t.nt > 1) continue;  // loaded with subtile j - 1
      const std::string col = "n0 + " + str(8 * j);
      if (t.nt > 1) {
        const std::string next = "b" + std::to_string(j + 1);
        e.w.line("uint32_t " + bj + "_0, " + bj + "_1, " + next + "_0, " + next + "_1;");
        e.w.line("mj_cuda::ldsm_x4_trans(" + bj + "_0, " + bj + "_1, " + next + "_0, " + next +
                 "_1, " +
                 b.address(operand_index(b.shape, batch, "k0 + (lane & 15)",
                                         col + " + (lane >> 4) * 8")) +
                 ");");
      } else {
        e.w.line("uint32_t " + bj + "_0, " + bj + "_1;");
        e.w.line("mj_cuda::ldsm_x2_trans(" + bj + "_0, " + bj + "_1, " +
                 b.address(operand_index(b.shape, batch, "k0 + (lane & 15)", col)) + ");");
      }
      continue;
    }
    const std::string cn = "n0 + " + str(8 * j) + " + g";
    auto b_at = [&](const std::string& kk) {
      return guard(both(k_ok(kk), col_ok(cn)), b.read(operand_index(b.shape, batch, kk, cn)));
    };
    if (tf32) {
      e.w.line("const uint32_t " + bj + "_0 = mj_cuda::to_tf32(" + b_at("ka") + "), " + bj +
               "_1 = mj_cuda::to_tf32(" + b_at("kb") + ");");
    } else {
      const std::string pack = std::string("mj_cuda::pack2<") + element_type(a.dtype) + ">";
      e.w.line("const uint32_t " + bj + "_0 = " + pack + "(" + b_at("ka") + ", " + b_at("ka + 1") +
               "), " + bj + "_1 = " + pack + "(" + b_at("kb") + ", " + b_at("kb + 1") + ");");
    }
  }
  for (int j = 0; j < t.nt; ++j) {
    const std::string bj = "b" + std::to_string(j);
    e.w.line(mma + "(" + d_reg(call, persistent, j, 0) + ", " + d_reg(call, persistent, j, 1) +
             ", " + d_reg(call, persistent, j, 2) + ", " + d_reg(call, persistent, j, 3) +
             ", a0, a1, a2, a3, " + bj + "_0, " + bj + "_1);");
  }
  e.w.close();
  if (!persistent) {
    for (int j = 0; j < t.nt; ++j) {
      for (int x = 0; x < 4; ++x) {
        const auto [r, c] = d_cell(j, x);
        const std::string cond = both(row_ok(r), col_ok(c));
        e.w.open(cond.empty() ? std::string() : "if (" + cond + ")");
        default_store(e, call, d_reg(call, false, j, x), cell_index(r, c));
        e.w.close();
      }
    }
  }
  for (int i = 0; i < opened; ++i) e.w.close();
}

bool is_matmul_like(const Op& op) {
  return op.kind == OpKind::kMatmul || op.kind == OpKind::kAccumExpMatmul;
}

// The accumulator tensor a persistent op's registers belong to.
int accumulator_of(const Emit& e, int o) {
  const Op& op = e.bg.ops()[o];
  return op.kind == OpKind::kAccumExpMatmul ? op.outputs.at(0) : e.plan.matmul_adds_into[o];
}

}  // namespace

MatmulOperand tensor_operand(const Emit& e, int t, int op, bool as_a) {
  const MatmulPlan& mm = e.plan.matmuls.at(op);
  MatmulOperand operand{
      e.bg.tensor(t).shape, e.bg.tensor(t).dtype,
      [&e, t](const std::vector<std::string>& idx) { return read_element(e, t, idx); }, nullptr};
  if (as_a ? mm.ldmatrix_a : mm.ldmatrix_b) {
    operand.address = [&e, t](const std::vector<std::string>& idx) {
      return element_address(e, t, idx);
    };
  }
  return operand;
}

void emit_matmul(const Emit& e, const MatmulOperand& a, const MatmulOperand& b,
                 const MatmulCall& call) {
  e.w.open("");
  if (e.plan.matmuls.at(call.op).path == MatmulPath::kFma) {
    emit_fma(e, a, b, call);
  } else {
    emit_mma(e, a, b, call);
  }
  e.w.close();
}

void emit_register_accumulators(const Emit& e) {
  for (size_t o = 0; o < e.bg.ops().size(); ++o) {
    const MatmulPlan& mm = e.plan.matmuls[o];
    if (!is_matmul_like(e.bg.ops()[o]) || !mm.registers) continue;
    e.w.line("float " + accumulator_name(int(o)) + "[" + str(mm.tiles_per_warp) + "][" +
             str(mm.n_tiles) + "][4] = {};");
  }
}

void emit_register_accumulators_spill(const Emit& e) {
  for (size_t o = 0; o < e.bg.ops().size(); ++o) {
    const Op& op = e.bg.ops()[o];
    const MatmulPlan& mm = e.plan.matmuls[o];
    if (!is_matmul_like(op) || !mm.registers) continue;
    const int c = accumulator_of(e, int(o));
    const Shape& c_shape = e.bg.tensor(c).shape;
    const Shape& b_shape = e.bg.tensor(op.inputs.at(1)).shape;
    WarpTiling t = warp_tiling(mm, c_shape, b_shape[b_shape.size() - 2]);
    MatmulCall call;
    call.op = int(o);
    call.c = c;
    e.w.open("");
    e.w.line("const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;");
    const int opened = open_warp_tiles(e, mm, t, /*persistent=*/true);
    const std::vector<std::string> batch = declare_batch(e, c_shape);
    e.w.line("[[maybe_unused]] const int ra = r0 + g, rb = ra + 8;");
    for (int j = 0; j < t.nt; ++j) {
      for (int x = 0; x < 4; ++x) {
        const auto [r, col] = d_cell(j, x);
        std::string cond;
        if (t.m % 16) cond = r + " < " + str(t.m);
        if (t.n % 8) cond = both(cond, col + " < " + str(t.n));
        std::vector<std::string> idx = batch;
        idx.push_back(r);
        idx.push_back(col);
        e.w.open(cond.empty() ? std::string() : "if (" + cond + ")");
        e.w.line(store_element(e, c, idx, d_reg(call, true, j, x)));
        e.w.close();
      }
    }
    for (int i = 0; i < opened; ++i) e.w.close();
    e.w.close();
  }
}

}  // namespace mj::codegen::cuda
