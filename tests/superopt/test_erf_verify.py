"""The finite-field verifier on erf and erfc. erf is not a polynomial: the fingerprint takes it
as an uninterpreted keyed function, so erf(x) equals only erf of the same value. Graphs that
agree with an erf graph nowhere, or only on some inputs, or by an identity erf does not have
(erf(2x) = 2 erf(x)) are rejected; the same erf graph written another way (operands
reordered, computed inside a block graph) is accepted. erfc is a keyed function of its own:
1 - erf(x) equals it over the reals but loses its tail in float32, so the two are not
interchangeable.

Every rejected pair is first evaluated by the float interpreter, to show the two graphs really
differ (an equivalent pair would make the rejection vacuous)."""

import numpy as np
import pytest

import mirage_jax as mj

INV_SQRT2 = 0.7071067811865476


def inputs(n: int = 2):
    g = mj.KernelGraph()
    return g, [g.new_input((4, 8), "float32") for _ in range(n)]


def erf_of_x():
    g, (x, _) = inputs()
    g.mark_output(g.erf(x))
    return g


def gelu_erf(g, x):
    """0.5·x·(1 + erf(x/√2)), GELU's exact form."""
    return g.mul(g.mul_scalar(x, 0.5), g.add_scalar(g.erf(g.mul_scalar(x, INV_SQRT2)), 1.0))


def gelu_erf_graph():
    g, (x, _) = inputs()
    g.mark_output(gelu_erf(g, x))
    return g


def gelu_tanh_graph():
    g, (x, _) = inputs()
    g.mark_output(g.gelu(x))
    return g


def x_itself():
    g, (x, _) = inputs()
    g.mark_output(g.mul_scalar(x, 1.0))
    return g


def erf_of_2x():
    g, (x, _) = inputs()
    g.mark_output(g.erf(g.mul_scalar(x, 2.0)))
    return g


def twice_erf_of_x():
    g, (x, _) = inputs()
    g.mark_output(g.mul_scalar(g.erf(x), 2.0))
    return g


def erf_of_y():
    g, (_, y) = inputs()
    g.mark_output(g.erf(y))
    return g


def erfc_of_x():
    g, (x, _) = inputs()
    g.mark_output(g.erfc(x))
    return g


def one_minus_erf_of_x():
    g, (x, _) = inputs()
    g.mark_output(g.add_scalar(g.neg(g.erf(x)), 1.0))
    return g


REJECTED = {
    "erf(x) vs x": (erf_of_x, x_itself),
    "gelu erf form vs gelu tanh form": (gelu_erf_graph, gelu_tanh_graph),
    "erf(2x) vs 2 erf(x)": (erf_of_2x, twice_erf_of_x),
    "erf(x) vs erf(y)": (erf_of_x, erf_of_y),
    "erf(x) vs erfc(x)": (erf_of_x, erfc_of_x),
}


def evaluate(graph, values):
    (y,) = graph.evaluate(values)
    return y


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_rejects_a_graph_that_is_not_erf(name, rng):
    a, b = (build() for build in REJECTED[name])
    values = [rng.standard_normal((4, 8)) for _ in range(2)]
    assert not np.allclose(evaluate(a, values), evaluate(b, values), rtol=1e-6, atol=1e-6)
    assert not mj.verify_equivalent(a, b)
    assert not mj.verify_equivalent(b, a)


def reordered_pair():
    """erf(x @ w + b) · y, and the same with every commutative operand pair swapped."""
    shapes = ((4, 8), (8, 8), (1, 8), (4, 8))

    def build(swapped: bool):
        g = mj.KernelGraph()
        x, w, b, y = (g.new_input(s, "float32") for s in shapes)
        h = g.matmul(x, w)
        s = g.add(b, h) if swapped else g.add(h, b)
        e = g.erf(s)
        g.mark_output(g.mul(y, e) if swapped else g.mul(e, y))
        return g

    return build(False), build(True)


def fused_gelu_pair():
    """GELU(x @ w) in its erf form at kernel level, and the same computed in one customized
    op (erf at block level, blocks of two rows)."""
    ref = mj.KernelGraph()
    X, W = ref.new_input((4, 8), "float32"), ref.new_input((8, 8), "float32")
    ref.mark_output(gelu_erf(ref, ref.matmul(X, W)))

    fused = mj.KernelGraph()
    X, W = fused.new_input((4, 8), "float32"), fused.new_input((8, 8), "float32")
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=1)
    x = bg.new_input(X, imap=(0, -1, -1), fmap=-1)
    w = bg.new_input(W, imap=(-1, -1, -1), fmap=-1)
    bg.new_output(gelu_erf(bg, bg.matmul(x, w)), omap=(0, -1, -1))
    (y,) = fused.customized([X, W], bg)
    fused.mark_output(y)
    return ref, fused


ACCEPTED = {
    "operands reordered": reordered_pair,
    "fused into a block graph": fused_gelu_pair,
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepts_the_same_erf_graph_written_another_way(name):
    a, b = ACCEPTED[name]()
    result = mj.verify_equivalent(a, b)
    assert result, result
    assert mj.verify_equivalent(b, a)


def test_erfc_is_not_traded_for_one_minus_erf():
    """Equal over the reals; in float32 1 - erf(x) is 0 where erfc(x) is still 1e-37."""
    a, b = erfc_of_x(), one_minus_erf_of_x()
    x = np.full((4, 8), 9.0, np.float32)
    (ya,), (yb,) = a.evaluate([x, x], dtype="float32"), b.evaluate([x, x], dtype="float32")
    assert ya.min() > 0 and not yb.any()
    assert not mj.verify_equivalent(a, b)
    assert not mj.verify_equivalent(b, a)


def test_a_wrong_constant_inside_erf_is_rejected():
    """erf(x / √2) against erf of x times the float32 just below 1/√2."""
    a = gelu_erf_graph()
    below = float(np.nextafter(np.float32(INV_SQRT2), np.float32(0)))
    g, (x, _) = inputs()
    g.mark_output(
        g.mul(
            g.mul_scalar(x, 0.5),
            g.add_scalar(g.erf(g.mul_scalar(x, below)), 1.0),
        )
    )
    assert not mj.verify_equivalent(a, g)


def test_the_one_op_gelu_erf_is_its_erfc_formula_and_nothing_else(rng):
    """gelu_erf verifies against 0.5·x·erfc(-x/√2) written out, and is rejected against the
    tanh GELU, the formula with 1 + erf (which loses erfc's tail), and the formula of another
    constant; each rejected pair differs in floats."""
    g, (x, _) = inputs()
    g.mark_output(g.gelu_erf(x))
    written, (x2, _) = inputs()
    written.mark_output(
        written.mul(written.mul_scalar(x2, 0.5), written.erfc(written.mul_scalar(x2, -INV_SQRT2)))
    )
    result = mj.verify_equivalent(g, written)
    assert result, result
    assert mj.verify_equivalent(written, g)
    other, (x3, _) = inputs()
    other.mark_output(other.mul(other.mul_scalar(x3, 0.5), other.erfc(other.mul_scalar(x3, -0.7))))
    values = [rng.standard_normal((4, 8)) * 3 for _ in range(2)]
    for wrong in (gelu_tanh_graph(), gelu_erf_graph(), other):
        assert not mj.verify_equivalent(g, wrong)
        assert not mj.verify_equivalent(wrong, g)
    for wrong in (gelu_tanh_graph(), other):
        assert not np.allclose(evaluate(g, values), evaluate(wrong, values), rtol=1e-6, atol=1e-6)
    # -9: erfc's tail, 0.5·x·erfc(9/√2) about -5e-19, where 1 + erf(-9/√2) is 0
    x9 = np.full((4, 8), -9.0)
    assert evaluate(g, [x9, x9]).min() < 0 and not evaluate(gelu_erf_graph(), [x9, x9]).any()
