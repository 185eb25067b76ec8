"""A padded batch through mj.optimize with generated kernels kept: the padding query rows
are fully masked (finfo.min, as batched-prompt pipelines build masks), and the result has
no NaN where jax.jit has none and matches it elsewhere. Before the adversarial float check,
an unstabilized softmax kernel could be kept here and gave NaN rows (0/0)."""

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
    max_block_ops=5,
    max_grid_axes=2,
    max_grids=2,
    max_forloop_ranges=1,
    time_budget_s=20,
    max_verified=4,
)


def attention(q, k, v, mask):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(HEAD_DIM) + mask
    return jax.nn.softmax(s, axis=-1) @ v


def padding_mask(dtype):
    """Keys past a prompt's length are masked, and so are whole query rows of padding (the
    fully masked rows that gave NaN)."""
    valid = np.arange(LEN)[None, :] < np.array(LENGTHS)[:, None]  # [batch, len]
    keep = valid[:, None, :, None] & valid[:, None, None, :]  # [batch, 1, q, k]
    return jnp.asarray(np.where(keep, 0.0, float(jnp.finfo(dtype).min)), dtype)


@pytest.mark.parametrize("scale", [1.0, 64.0])  # 64: logits in the thousands
def test_padded_batch_attention_has_no_nan_where_jit_has_none(scale, monkeypatch, tmp_path):
    monkeypatch.setenv("MIRAGE_JAX_KEEP_KERNELS", "1")
    rng = np.random.default_rng(0)
    shape = (BATCH, HEADS, LEN, HEAD_DIM)
    q, k, v = (jnp.asarray(rng.standard_normal(shape) * s, jnp.float32) for s in (scale, scale, 1))
    mask = padding_mask("float32")
    f = mj.optimize(attention, config=CONFIG, cache_dir=tmp_path)
    got = np.asarray(f(q, k, v, mask))
    want = np.asarray(jax.jit(attention)(q, k, v, mask))
    assert np.isfinite(want).all()
    assert f.uses_kernels(q, k, v, mask), f.explain(q, k, v, mask)
    assert np.isfinite(got).all(), np.argwhere(~np.isfinite(got))[:4]
    verdict = fc.check_outputs([got], [want], ["float32"])
    assert verdict, verdict.detail
