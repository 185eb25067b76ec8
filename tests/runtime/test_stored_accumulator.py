"""A block graph that stores an accumulator its epilogue also reads (cc/search/
block_enumerator.cc: a decode step's q projection and its RoPE product cos * q, one sum, cos
applied after the loop) runs on the CPU as XLA computes the program: the product of the
finished sum, so an infinite cos gives ±inf (or NaN on a zero sum), never the NaN of
partial sums of differing sign."""

import jax
import jax.numpy as jnp
import numpy as np
from kernel_test_support import (  # noqa: F401 (session_kernel_cache is an autouse fixture)
    projection_and_rope_product,
    session_kernel_cache,
    storage_rtol,
)

import mirage_jax as mj


def test_the_stored_sum_and_its_product_match_xla():
    kg = projection_and_rope_product()
    rng = np.random.default_rng(21)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    cos = rng.standard_normal((8, 32)).astype(np.float32)
    x[2] *= 1e18  # a huge row: its sums are near float32's range, not over it
    cos[0, :4] = np.inf
    cos[1, 5] = -np.inf
    cos[3, 7] = np.nan
    x[4] = 0.0  # a zero row: inf * 0 is NaN in both
    cos[4, 9] = np.inf
    inputs = [jnp.asarray(v) for v in (x, w, cos)]
    projected, rotated = jax.jit(mj.compile(kg))(*inputs)
    x64, w64, cos64 = (np.asarray(v, np.float64) for v in (x, w, cos))
    want_q = x64 @ w64
    scale_q = np.abs(x64) @ np.abs(w64)  # the sums' rounding scale, per element
    bound = storage_rtol("float32")
    assert np.all(np.abs(np.asarray(projected) - want_q) <= bound * scale_q), "q"
    with np.errstate(invalid="ignore", over="ignore"):
        ref = (cos64 * np.asarray(projected, np.float64)).astype(np.float32)
        scale = np.abs(cos64) * scale_q
    got = np.asarray(rotated)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), "NaN in other places"
    assert np.array_equal(np.isposinf(got), np.isposinf(ref)), "+inf in other places"
    assert np.array_equal(np.isneginf(got), np.isneginf(ref)), "-inf in other places"
    finite = np.isfinite(ref)
    err = np.abs(got[finite].astype(np.float64) - cos64[finite] * want_q[finite])
    assert np.all(err <= bound * scale[finite]), "cos * q"
    (_, interpreted) = kg.evaluate(inputs)
    assert np.array_equal(np.isnan(got), np.isnan(interpreted))
