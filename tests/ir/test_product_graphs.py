"""mirage_jax.ir.product_graphs: the column-split product is x @ w for every grid and tile
height that divides its shape (through the reference interpreter, against numpy), and a grid
or tile height that does not divide it is refused by name."""

import numpy as np
import pytest

from mirage_jax.ir.product_graphs import column_split_product


@pytest.mark.parametrize("blocks, k_tile", [(1, 64), (2, 16), (6, 8), (48, 1)])
def test_the_product_is_x_times_w(blocks, k_tile):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 64)), rng.standard_normal((64, 48))
    kg = column_split_product(3, 64, 48, blocks, k_tile)
    (y,) = kg.evaluate([x, w])
    np.testing.assert_allclose(y, x @ w, rtol=1e-12, atol=1e-12)
    assert [t.dtype for t in kg.inputs] == ["float32", "float32"]


def test_dtypes_are_the_inputs():
    kg = column_split_product(2, 32, 16, 2, 8, w_dtype="bfloat16")
    assert [t.dtype for t in kg.inputs] == ["float32", "bfloat16"]


@pytest.mark.parametrize("blocks, k_tile", [(5, 8), (2, 24), (0, 8), (2, 0)])
def test_a_grid_or_tile_that_does_not_divide_is_refused(blocks, k_tile):
    with pytest.raises(ValueError, match=f"{blocks} blocks and tiles of {k_tile} do not divide"):
        column_split_product(3, 64, 48, blocks, k_tile)
