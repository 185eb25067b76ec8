"""Attention masked with jnp.where, as Flax's dot_product_attention and GPT-2 write it:
`jnp.where(mask, scores, finfo.min)` with a boolean mask made outside. The select stays in
the attention's region (the mask enters the kernel as 0/1 floats), and it is exact: the keys
of padding positions hold NaN (garbage a batched pipeline leaves there), so their scores are
NaN, and the select replaces them, in the kernel as in jax.jit; an arithmetic form of the mask
would spread the NaN. Padding query rows are fully masked (uniform weights, as jax.jit).

Kernels are kept whatever the timing ($MIRAGE_JAX_KEEP_KERNELS=1), so the generated kernel is
what runs."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)

import mirage_jax as mj
from mirage_jax.superopt import float_check as fc

BATCH, HEADS, LEN, HEAD_DIM = 2, 2, 8, 8
LENGTHS = (8, 5)  # the second prompt is padded on the right
CONFIG = mj.SearchConfig(
    preset="attention",
    max_kernel_ops=1,
    max_block_ops=6,
    max_grid_axes=2,
    max_grids=2,
    max_forloop_ranges=1,
    time_budget_s=20,
    max_verified=4,
)


def keep_where_true(q, k, v, keep):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(HEAD_DIM)
    s = jnp.where(keep, s, jnp.finfo(s.dtype).min)
    return jax.nn.softmax(s, axis=-1) @ v


def fill_where_true(q, k, v, keep):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(HEAD_DIM)
    s = jnp.where(~keep, -1e9, s)
    return jax.nn.softmax(s, axis=-1) @ v


def padded_batch(scale):
    """q, k, v and the boolean mask [batch, 1, q, k]; the keys of padding positions are NaN."""
    rng = np.random.default_rng(0)
    shape = (BATCH, HEADS, LEN, HEAD_DIM)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) * s for s in (scale, scale, 1))
    valid = np.arange(LEN)[None, :] < np.array(LENGTHS)[:, None]  # [batch, len]
    for b, n in enumerate(LENGTHS):
        k[b, :, n:, :] = np.nan
    keep = valid[:, None, :, None] & valid[:, None, None, :]
    return [jnp.asarray(a) for a in (q, k, v)] + [jnp.asarray(keep)]


@pytest.fixture(scope="module")
def cache_of(tmp_path_factory):
    """One cache per function: both scales search the same shapes, so the second reuses the
    first's search (the kernel still runs on its own data)."""
    dirs: dict = {}
    return lambda fn: dirs.setdefault(fn.__name__, tmp_path_factory.mktemp(fn.__name__))


@pytest.mark.parametrize("scale", [1.0, 64.0])  # 64: logits in the thousands
@pytest.mark.parametrize("fn", [keep_where_true, fill_where_true], ids=lambda f: f.__name__)
def test_where_masked_attention_runs_as_a_kernel_and_matches_jit(fn, scale, monkeypatch, cache_of):
    monkeypatch.setenv("MIRAGE_JAX_KEEP_KERNELS", "1")
    args = padded_batch(scale)
    want = np.asarray(jax.jit(fn)(*args))
    assert np.isfinite(want).all()
    f = mj.optimize(fn, config=CONFIG, cache_dir=cache_of(fn))
    got = np.asarray(f(*args))
    report = f.explain(*args)
    assert f.uses_kernels(*args), report
    assert "select_n" in report.split("primitives:")[1].splitlines()[0], report
    assert np.isfinite(got).all(), np.argwhere(~np.isfinite(got))[:4]
    verdict = fc.check_outputs([got], [want], ["float32"])
    assert verdict, verdict.detail


def test_a_mask_computed_from_an_infinite_fill_stays_plain_jax(tmp_path):
    """jnp.where(mask, s, -inf): kernels hold finite constants, so the select is left to
    XLA (and the answer is jax.jit's)."""

    def fn(q, k, v, keep):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k)
        return jax.nn.softmax(jnp.where(keep, s, -jnp.inf), axis=-1) @ v

    args = padded_batch(1.0)
    f = mj.optimize(fn, config=CONFIG, cache_dir=tmp_path)
    got, want = np.asarray(f(*args)), np.asarray(jax.jit(fn)(*args))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert "finite constants" in f.explain(*args)
