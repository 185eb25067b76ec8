"""The finite-field verifier on select (jnp.where(mask, x, c) with a 0/1 mask). select is a
keyed function of x, the mask and c in the fingerprint, so it equals only the same select of
the same values: the arithmetic form x·m + c·(1 - m), equal to it on finite x and a 0/1 mask,
is rejected (a NaN or inf of x under a 0 of the mask reaches its result), as are another
fill, the operands swapped and another mask. The same select written another way (inside a
block graph, after a fused matmul, inside a masked softmax) is accepted.

Every rejected pair is first evaluated by the float interpreter, to show the two graphs really
differ on a 0/1 mask (an equivalent pair would make the rejection vacuous)."""

import numpy as np
import pytest

import mirage_jax as mj

FILL = float(np.finfo(np.float32).min)


def inputs(n: int = 3):
    g = mj.KernelGraph()
    return g, [g.new_input((4, 8), "float32") for _ in range(n)]


def select_x():
    g, (x, m, _) = inputs()
    g.mark_output(g.select(x, m, FILL))
    return g


def arithmetic_form():
    """x·m + c·(1 - m): select's value wherever x is finite and m is 0 or 1."""
    g, (x, m, _) = inputs()
    g.mark_output(g.add(g.mul(x, m), g.mul_scalar(g.add_scalar(g.neg(m), 1.0), FILL)))
    return g


def other_fill():
    g, (x, m, _) = inputs()
    g.mark_output(g.select(x, m, -1e9))
    return g


def swapped():
    g, (x, m, _) = inputs()
    g.mark_output(g.select(m, x, FILL))
    return g


def other_mask():
    g, (x, _, m2) = inputs()
    g.mark_output(g.select(x, m2, FILL))
    return g


def x_itself():
    g, (x, _, _) = inputs()
    g.mark_output(g.mul_scalar(x, 1.0))
    return g


REJECTED = {
    "select vs x·m + c·(1 - m)": (select_x, arithmetic_form),
    "another fill": (select_x, other_fill),
    "x and mask swapped": (select_x, swapped),
    "another mask": (select_x, other_mask),
    "select vs x": (select_x, x_itself),
}


def special_values(rng):
    """x with NaN and ±inf, a 0/1 mask that is 0 wherever x is not finite, a second mask."""
    x = rng.standard_normal((4, 8))
    m = (rng.random((4, 8)) < 0.5).astype(np.float64)
    x[0, 0], x[1, 3], x[2, 5] = np.nan, np.inf, -np.inf
    m[0, 0] = m[1, 3] = m[2, 5] = 0.0
    m[3, :] = 0.0  # a fully masked row
    return [x, m, 1.0 - m]


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_rejects_a_graph_that_is_not_the_select(name, rng):
    a, b = (build() for build in REJECTED[name])
    values = special_values(rng)
    (ya,), (yb,) = a.evaluate(values), b.evaluate(values)
    assert not np.array_equal(ya, yb, equal_nan=True)
    assert not mj.verify_equivalent(a, b)
    assert not mj.verify_equivalent(b, a)


def test_select_is_exact_on_nan_and_inf_under_the_mask(rng):
    values = special_values(rng)
    (y,) = select_x().evaluate(values)
    np.testing.assert_array_equal(y, np.where(values[1] != 0, values[0], FILL))
    assert np.isfinite(y).all()
    (z,) = arithmetic_form().evaluate(values)
    assert not np.isfinite(z).all()  # what the select exists to avoid


def fused_pair():
    """select(x @ w, m) at kernel level, and the same in one customized op (blocks of two rows,
    the mask tiled like the product)."""
    ref = mj.KernelGraph()
    X, W, M = (ref.new_input(s, "float32") for s in ((4, 8), (8, 8), (4, 8)))
    ref.mark_output(ref.select(ref.matmul(X, W), M, FILL))

    fused = mj.KernelGraph()
    X, W, M = (fused.new_input(s, "float32") for s in ((4, 8), (8, 8), (4, 8)))
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=1)
    x = bg.new_input(X, imap=(0, -1, -1), fmap=-1)
    w = bg.new_input(W, imap=(-1, -1, -1), fmap=-1)
    m = bg.new_input(M, imap=(0, -1, -1), fmap=-1)
    bg.new_output(bg.select(bg.matmul(x, w), m, FILL), omap=(0, -1, -1))
    (y,) = fused.customized([X, W, M], bg)
    fused.mark_output(y)
    return ref, fused


def masked_softmax(g, s, m):
    t = g.select(s, m, FILL)
    e = g.exp(g.sub(t, g.reduce(t, -1, "max")))
    return g.div(e, g.reduce(e, -1, "sum"))


def softmax_pair():
    """A masked, stabilized softmax at kernel level, and the same in one customized op."""
    ref = mj.KernelGraph()
    S, M = ref.new_input((4, 8), "float32"), ref.new_input((4, 8), "float32")
    ref.mark_output(masked_softmax(ref, S, M))

    fused = mj.KernelGraph()
    S, M = fused.new_input((4, 8), "float32"), fused.new_input((4, 8), "float32")
    bg = mj.BlockGraph(grid=(4, 1, 1), forloop_range=1)
    s = bg.new_input(S, imap=(0, -1, -1), fmap=-1)
    m = bg.new_input(M, imap=(0, -1, -1), fmap=-1)
    bg.new_output(masked_softmax(bg, s, m), omap=(0, -1, -1))
    (y,) = fused.customized([S, M], bg)
    fused.mark_output(y)
    return ref, fused


ACCEPTED = {"fused into a block graph": fused_pair, "a masked softmax fused": softmax_pair}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepts_the_same_select_written_another_way(name):
    a, b = ACCEPTED[name]()
    result = mj.verify_equivalent(a, b)
    assert result, result
    assert mj.verify_equivalent(b, a)


def test_a_fill_that_is_not_finite_is_refused():
    g, (x, m, _) = inputs()
    with pytest.raises(ValueError, match=r"select.*finite"):
        g.select(x, m, -np.inf)
