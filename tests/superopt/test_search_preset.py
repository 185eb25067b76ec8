"""The "auto" preset (SearchConfig's default): the search's candidate sets chosen from the
graph's structure (mirage_jax/superopt/config.py, preset_for)."""

import pytest

import mirage_jax as mj
from mirage_jax.ir import paper_graphs as pg
from mirage_jax.superopt.config import preset_for


@pytest.mark.parametrize(
    "build, preset",
    [
        (
            lambda: pg.rmsnorm_linear(batch=4, hidden=16, out_features=8, col_tile=4, k_tile=4),
            "mlp",
        ),
        (pg.gated_mlp, "mlp"),
        (pg.ntrans, "mlp"),
        (pg.lora, "lora"),
        (pg.gqa_decode, "attention"),
        (pg.qknorm_gqa, "attention"),
    ],
)
def test_the_graph_picks_its_preset(build, preset):
    reference, _ = build()
    assert preset_for(reference) == preset
    assert mj.SearchConfig().for_graph(reference).preset == preset
    # A preset the user names is kept.
    assert mj.SearchConfig(preset="mlp").for_graph(reference).preset == "mlp"


def test_a_chain_of_matmuls_without_a_sum_is_not_lora():
    g = mj.KernelGraph()
    x, a, b = g.new_input((8, 16)), g.new_input((16, 4)), g.new_input((4, 8))
    g.mark_output(g.matmul(g.matmul(x, a), b))
    assert preset_for(g) == "mlp"


def test_an_unresolved_auto_preset_never_reaches_the_core():
    with pytest.raises(ValueError, match="for_graph"):
        mj.SearchConfig()._to_core()


def test_the_default_config_finds_loras_one_kernel_form_that_mlp_cannot():
    reference, fused = pg.lora(tokens=8, d_in=16, d_out=32, rank=4, col_tile=8)
    limits = dict(threads=2, max_kernel_ops=1, max_block_ops=4, time_budget_s=60)
    found = mj.search(reference, mj.SearchConfig(**limits), progress=False)
    assert found.reason == ""
    assert fused.hash() in {g.hash() for g in found}
    as_mlp = mj.search(reference, mj.SearchConfig(preset="mlp", **limits), progress=False)
    assert as_mlp.reason == ""
    assert fused.hash() not in {g.hash() for g in as_mlp}
