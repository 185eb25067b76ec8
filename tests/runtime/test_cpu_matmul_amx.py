"""Products with a bfloat16 B on the AMX tile unit (cc/codegen/cpu/prelude.cc, matmul_amx):
with more than 8 rows and B read in place as bfloat16, the part of the product whose sides
are multiples of 32 runs on the tiles and the rest on the vector path; A is read in place
when bfloat16 and split into three bfloat16 parts that sum to it exactly when float32.
Shapes with every remainder (rows, columns and k not multiples of 32; k past one 256-value
chunk; more than one 256-column panel of B), loops over k that accumulate into C, and group
products, against the float64 product of the stored values; then values built to break it,
against XLA: NaN and infinity in A and B, sums that overflow float32, exact zeros, and
denormal rows (the tile unit counts them as zero, as XLA's CPU runtime does with its
denormals-are-zero mode). On a CPU without AMX the same shapes run on the vector path; the
first test says whether the tiles are used here."""

import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)

from mirage_jax.ir.product_graphs import column_split_product
from mirage_jax.runtime import compile as runtime_compile
from mirage_jax.runtime import toolchain


def test_the_tile_unit_is_used_where_the_cpu_has_it(tmp_path):
    if not {"amx_bf16", "amx_tile"} <= toolchain.cpu_flags():
        pytest.skip("this CPU has no AMX tile unit: bfloat16 products take the vector path")
    source = runtime_compile.generate_code(
        column_split_product(64, 64, 64, 1, 64, "bfloat16", "bfloat16")
    )
    # The generated kernel's own prelude, asked whether it compiled the tile path in and
    # whether Linux granted this process the tile registers.
    program = tmp_path / "amx_permitted.cc"
    program.write_text(
        source + "\nint main() {\n#if MJ_CPU_AMX\n"
        "  return mj_cpu::amx_permitted() ? 0 : 2;\n#else\n  return 3;\n#endif\n}\n"
    )
    subprocess.run(
        [
            toolchain.find_gxx(),
            *toolchain.GXX_PROGRAM_FLAGS,
            str(program),
            "-o",
            str(tmp_path / "amx_permitted"),
        ],
        check=True,
        capture_output=True,
    )
    code = subprocess.run([str(tmp_path / "amx_permitted")]).returncode
    assert code == 0, {2: "the tile registers were refused", 3: "the tile path is not compiled"}[
        code
    ]


def _reference(x, w):
    """XLA's float32 product of the bfloat16 values, rounded once to bfloat16 as the kernel
    stores it."""
    return jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32))(x, w)


def _run(m, k, n, blocks, k_tile, x, w):
    kg = column_split_product(m, k, n, blocks, k_tile, str(x.dtype), "bfloat16")
    (got,) = jax.jit(runtime_compile.compile(kg))(x, w)
    return np.asarray(got, np.float64)


@pytest.mark.parametrize(
    "m, k, n, blocks, k_tile",
    [
        (32, 32, 32, 1, 32),  # one block of 2 x 2 tiles, one k step
        (64, 256, 64, 1, 256),  # whole tiles, one 256-value chunk of k
        (70, 300, 80, 1, 300),  # every remainder: 6 rows, 16 columns, k 256 + 32 + 12
        (96, 600, 64, 1, 600),  # k in chunks of 256, 256 and 88
        (64, 512, 128, 2, 128),  # a loop over k: iterations after the first accumulate
        (40, 96, 96, 3, 32),  # three blocks of 32 columns sharing A, k tiles of one step
        (256, 1024, 1024, 8, 128),  # Llama's o_proj at prefill, as the search splits it
        (33, 40, 33, 1, 40),  # one row, one column and 8 values of k past the tiles
        (64, 64, 320, 1, 64),  # two panels of B: 256 columns and 64
    ],
)
@pytest.mark.parametrize("x_dtype", ["bfloat16", "float32"])
def test_products_match_float64(m, k, n, blocks, k_tile, x_dtype):
    rng = np.random.default_rng(m * 7 + n)
    x = jnp.asarray(rng.standard_normal((m, k)), x_dtype)
    w = jnp.asarray(rng.standard_normal((k, n)), jnp.bfloat16)
    x = x.at[1].multiply(1e4)  # a row of large values beside ordinary ones
    got = _run(m, k, n, blocks, k_tile, x, w)
    want = np.asarray(x, np.float64) @ np.asarray(w, np.float64)
    err = np.max(np.abs(got - want), axis=1) / np.max(np.abs(want), axis=1)
    # float32 sums of exact products; a bfloat16 result is also rounded once when stored
    assert np.all(err < (2.0**-8 if x_dtype == "bfloat16" else 1e-5)), err


def test_a_float32_a_keeps_all_its_bits():
    # Each x has 24 significant bits that a bfloat16 or two would cut off: only all three
    # parts of the split give the exact products (one part: errors of 2^-9, two: 2^-17).
    m, k, n = 64, 64, 64
    rng = np.random.default_rng(3)
    x = (1 + rng.integers(1, 2**23, (m, k)) * 2.0**-23).astype(np.float32)  # in [1, 2)
    x *= rng.choice([-1.0, 1.0], (m, k)).astype(np.float32)
    w = np.zeros((k, n), np.float32)
    w[np.arange(k), np.arange(n)] = 1.0  # the identity: the product is x itself, exactly
    got = _run(m, k, n, 1, k, jnp.asarray(x), jnp.asarray(w, jnp.bfloat16))
    np.testing.assert_array_equal(got, x.astype(np.float64))


@pytest.mark.parametrize("x_dtype", [jnp.bfloat16, jnp.float32])
def test_nonfinite_and_extreme_values_as_xla(x_dtype):
    m, k, n = 64, 96, 64
    rng = np.random.default_rng(5)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    x[0, 3] = np.nan  # row 0: NaN everywhere
    x[2, :] = 0.0  # row 2: exact zeros (NaN in column 9, zero times infinity)
    x[3, 7] = np.inf  # row 3: +inf or -inf by w's sign, NaN where w is 0
    w[7, 5] = 0.0
    w[11, 9] = np.inf  # column 9: inf from every row with a nonzero x[:, 11]
    x[4, :] = 3e38  # row 4: products near float32's largest or past it, sums overflow
    w[:, 20] = 1.0
    x[5, :] = 1e-39  # row 5: bfloat16 denormals, times 2^100
    w[:, 30] = 2.0**100
    # Rounded on the host: a conversion by XLA would flush the denormals before the product.
    x[8, :] = 0.5  # row 8: a float32 A with zero parts, times column 9's infinity: infinite
    # row 6: NaNs whose payload lies in the low bits, which a bfloat16 cut would make infinity
    x[6, 0::2].view(np.uint32)[:] = 0x7F800001 + np.arange(48, dtype=np.uint32)
    with np.errstate(invalid="ignore"):  # numpy's cast of those NaNs to bfloat16 warns
        x, w = jnp.asarray(x.astype(x_dtype)), jnp.asarray(w.astype(jnp.bfloat16))
    assert 0 < float(x[5, 0]) < float(jnp.finfo(jnp.bfloat16).tiny)
    got = _run(m, k, n, 1, k, x, w)
    want = np.asarray(_reference(x, w), np.float64)
    finite, nan, infinite = np.isfinite(want), np.isnan(want), np.isinf(want)
    assert np.all(np.isnan(got[nan])) and np.all(np.isfinite(got[finite]))
    assert got[8, 9] == np.inf
    # Where sums overflow (row 4), infinite as XLA's, or NaN where products overflowed both
    # ways: the tile unit rounds each product before adding it, XLA's FMAs add it exact.
    # Every other infinity is XLA's.
    overflow = np.zeros_like(infinite)
    overflow[4] = infinite[4]
    np.testing.assert_array_equal(got[infinite & ~overflow], want[infinite & ~overflow])
    assert np.all((got[overflow] == want[overflow]) | np.isnan(got[overflow]))
    assert got[4, 20] == np.inf  # 96 products of 3e38, each finite: the sum overflows
    assert np.all(got[2][finite[2]] == 0.0)
    np.testing.assert_array_equal(got[5], want[5])  # denormals as zero, as XLA's are
    scale = np.max(np.abs(np.where(finite, want, 0.0)), axis=1, keepdims=True)
    scale = np.where(scale > 0, scale, 1.0)
    error = np.abs(np.where(finite, got, 0.0) - np.where(finite, want, 0.0))
    assert np.all(error <= (2.0**-8 if x_dtype == jnp.bfloat16 else 1e-5) * scale)
