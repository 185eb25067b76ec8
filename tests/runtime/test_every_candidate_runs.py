"""Every verified candidate of a search compiles, runs and computes its reference, not only
the cost model's best few that superoptimize compiles. A crash in generated code that only
a lower-ranked candidate reaches (a null tile pointer after a group matmul: the 8th
RMSNorm+Linear candidate at batch 1) is one change of the cost model away from the user's
process. Each program runs in a child process, so a crash fails its case, not the suite."""

import json
import os
import subprocess
import sys

import pytest

CHILD = r"""
import json, sys
import numpy as np
import jax
import mirage_jax as mj
from mirage_jax.ir import paper_graphs as pg
from mirage_jax.runtime import compile as _compile

name = sys.argv[1]
builders = {
    "rmsnorm_linear_bs1": lambda: pg.rmsnorm_linear(batch=1, hidden=512, out_features=768),
    "rmsnorm_linear_bs8": lambda: pg.rmsnorm_linear(batch=8, hidden=512, out_features=768),
    "gated_mlp": lambda: pg.gated_mlp(batch=8, hidden=512, intermediate=768),
}
ref = builders[name]()[0]
config = mj.SearchConfig(
    time_budget_s=30, preset="mlp", max_kernel_ops=1, max_block_ops=5, threads=2
)
candidates = mj.search(ref, config, progress=False).candidates
_compile.prebuild(candidates)  # one g++ per core
rng = np.random.default_rng(0)
xs = [rng.standard_normal(t.shape).astype(np.float32) for t in ref.inputs]
want = ref.evaluate(xs)
for c in candidates:
    got = jax.jit(mj.compile(c))(*xs)
    err = max(
        float(np.linalg.norm(np.asarray(g, np.float64) - w) / np.linalg.norm(w))
        for g, w in zip(got, want)
    )
    groups = "one product for the whole group" in mj.generate_code(c)
    print(json.dumps({"hash": c.hash(), "error": err, "group_matmul": groups}), flush=True)
"""


def run_candidates(name, cache):
    done = subprocess.run(
        [sys.executable, "-P", "-c", CHILD, name],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, MIRAGE_JAX_CACHE=str(cache)),
    )
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done, rows


@pytest.mark.parametrize("name", ["rmsnorm_linear_bs1", "rmsnorm_linear_bs8", "gated_mlp"])
def test_every_candidate_runs_and_matches_the_reference(name, tmp_path):
    done, rows = run_candidates(name, tmp_path)
    assert done.returncode == 0, (
        f"the child died ({done.returncode}) after {len(rows)} candidates ran: "
        f"{done.stderr[-2000:]}"
    )
    assert len(rows) >= 5
    bad = [r for r in rows if not r["error"] < 1e-5]
    assert not bad, bad
    if name == "rmsnorm_linear_bs1":  # the case that reached the group-matmul crash
        assert any(r["group_matmul"] for r in rows)
