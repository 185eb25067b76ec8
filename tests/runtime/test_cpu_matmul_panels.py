"""The generated CPU matmul's orders (cc/codegen/cpu/prelude.cc): up to 8 rows stream B
once, the columns past the last whole vector in a partial one; more rows pack 128 x 16
strips of B and run 6-row register panels over them; fewer columns than half a vector (or
than a vector, past 8 rows) read each row of A once into per-column dot products. Shapes
with every remainder (rows not a multiple of 6, columns not of 16, k tiles past 128 and not
a multiple of it), in one block and in several that share A (a group product), compiled and
run, against a float64 reference. A bfloat16 operand is read in place and widened as it is
loaded (mj_cpu::Bf16): the same shapes with a bfloat16 weight, and with bfloat16 on both
sides. The streaming order walks B 8 rows per stored panel at any row count, and rows of B
of 8 KB or more ask for lines along their rows ahead of them, not in the next tile."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)

from mirage_jax.ir.product_graphs import column_split_product
from mirage_jax.runtime import compile as runtime_compile


@pytest.mark.parametrize(
    "m, k, n, blocks, k_tile",
    [
        (4, 64, 48, 1, 64),  # streaming order
        (8, 300, 40, 2, 150),  # streaming order, the last rows a panel of their own
        (13, 300, 37, 1, 300),  # packed: 2 panels of 6 + 1 row, 2 strips + 5 columns, k 128+128+44
        (64, 256, 96, 2, 128),  # packed, two blocks sharing A
        (9, 130, 33, 1, 130),
        # tiles read whole (no loop), their rows prefetched ahead within the tile
        (1, 1024, 64, 4, 1024),  # a vector of columns at 1 row (the row panels take it)
        (1, 1024, 176, 4, 1024),  # 44 columns: 2 vectors and a partial one of 12
        (3, 640, 88, 2, 64),  # 44 columns walked along k: the partial vector prefetched
        # fewer columns than a vector: each row of A read once into per-column dot products
        (4, 300, 4, 1, 300),
        (70, 200, 5, 1, 200),  # a weight times a few activations as columns (E @ x^T)
        (3, 1100, 1, 1, 550),  # one column, k in tiles of 550
        (3, 6500, 1, 1, 6500),  # one column: a k chunk of 6144 and a rest
        # 4 columns: a k chunk of 1536 and a rest of 564 (past the last pair of vectors that
        # the column's two accumulators take in turn, and past the last vector)
        (5, 2100, 4, 1, 2100),
        # 2 columns, 4 accumulators each: with 8-float vectors one vector is left over past
        # the stepped loop, with 16-float ones 8 scalars are
        (6, 136, 2, 1, 136),
        (8, 64, 12, 2, 64),  # two blocks of 6 columns
        (20, 96, 8, 1, 96),  # one vector of columns (AVX2)
        # 6 rows or more (the panels of one row chunk hold all of C's rows), B walked 8 rows
        # per stored panel (mj_cpu::kKChunk): k tiles of whole chunks and of chunks and a rest
        (8, 192, 64, 2, 96),
        (6, 300, 40, 2, 100),
        (7, 60, 35, 1, 20),
        (8, 2048, 64, 8, 256),  # 8 blocks of 8 columns, grouped: one product for the group
        # rows of B of 8 KB or more walked 16 and 8 rows a step: each line fetches the one
        # 512 bytes along its row (past the tile's last column too); 4 rows a step, and
        # rows of 4-8 KB, the next tile
        (8, 64, 4224, 2, 16),
        (3, 96, 2080, 1, 8),
        (2, 64, 2080, 1, 4),
        (8, 64, 2112, 2, 16),
    ],
)
@pytest.mark.parametrize(
    "x_dtype, w_dtype",
    [("float32", "float32"), ("float32", "bfloat16"), ("bfloat16", "bfloat16")],
)
def test_generated_matmul_matches_float64(m, k, n, blocks, k_tile, x_dtype, w_dtype):
    kg = column_split_product(m, k, n, blocks, k_tile, x_dtype, w_dtype)
    rng = np.random.default_rng(m * 1000 + n)
    x = jnp.asarray(rng.standard_normal((m, k)), x_dtype)
    w = jnp.asarray(rng.standard_normal((k, n)), w_dtype)
    x = x.at[0].multiply(1e4)  # a row of large values next to ordinary ones
    # the weight tile is read where it lies (widened on load when bfloat16), not copied
    assert ("mj_cpu::Bf16" in runtime_compile.generate_code(kg)) == (w_dtype == "bfloat16")
    fn = jax.jit(runtime_compile.compile(kg))
    (got,) = fn(x, w)
    # the products of the values as stored, summed in float64
    want = np.asarray(x, np.float64) @ np.asarray(w, np.float64)
    err = np.max(np.abs(np.asarray(got, np.float64) - want), axis=1) / np.max(np.abs(want), axis=1)
    # float32 sums; a bfloat16 result is also rounded once when stored (half of its 2^-7 ulp)
    tolerance = 1e-5 if got.dtype == jnp.float32 else 2.0**-8
    assert np.all(err < tolerance), (got.dtype, err)
