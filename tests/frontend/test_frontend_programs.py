"""The frontend on the benchmark programs (benchmarks/programs.py, small shapes),
in float32 and bfloat16: every region found converts to a kernel graph, and the graph,
run by the float64 interpreter, computes what jax computes for the region's nodes. (The
programs run end to end under mj.optimize in tests/test_benchmarks_quick.py.)"""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mirage_jax.frontend import partition, region_to_graph
from mirage_jax.frontend.flat import run_nodes
from mirage_jax.superopt import float_check as _float_check

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
try:
    import programs
finally:
    sys.path.remove(str(BENCHMARKS))

# Regions per program: what a reader of the program expects (norms, matmuls with their
# prologues and epilogues, attention between the GQA reshapes). Decode attention is two: its
# scores read K as stored (as a matmul with the keys last for the softmax, K would be copied
# at every call), which leaves P @ V a matmul of its own.
EXPECTED_REGIONS = {
    "rmsnorm_linear_bs8": 1,
    "rmsnorm_linear_bs1": 1,
    "gated_mlp": 1,
    "gqa_decode": 2,
    "gqa_prefill": 1,
    "qknorm_gqa": 3,
    "lora": 1,
    "ntrans": 1,
}


def normwise(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("program", programs.PROGRAMS, ids=lambda p: p.name)
def test_every_region_of_the_program_converts_and_computes_the_same(program, dtype):
    args = [a.astype(dtype) for a in program.inputs(quick=True)]
    part = partition(jax.make_jaxpr(program.fn)(*args))
    assert len(part.regions) == EXPECTED_REGIONS[program.name], part.regions
    # the regions' values, from the flattened program run by jax
    env = dict(part.program.consts)
    env.update(zip(part.program.invars, args))
    run_nodes(part.program.nodes, env)
    for region in part.regions:
        values = [env[v] for v in region.inputs]
        rg = region_to_graph(region)  # raises RegionNotSupported, naming the op, if not
        want = region.evaluate(*values)
        got = rg.finish_outputs(
            rg.graph.evaluate(rg.prepare_inputs([np.asarray(v, np.float32) for v in values]))
        )
        for g, w in zip(got, want):
            assert g.shape == w.shape
            # jax rounds each bfloat16 intermediate, the interpreter none: the float check's
            # tolerance for the dtype
            assert normwise(g, w) < _float_check.tolerance([dtype]), (program.name, region)
    flat = part.program.evaluate(*args)
    for a, b in zip(flat, jax.tree_util.tree_leaves(jax.jit(program.fn)(*args))):
        assert normwise(a, b) < _float_check.tolerance([dtype])  # op by op vs fused
    assert all(jnp.dtype(v.dtype) == jnp.dtype(dtype) for r in part.regions for v in r.outputs)
