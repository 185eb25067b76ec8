"""A kernel whose for-loop body ends with a group matmul (one product for a group of blocks)
and then updates an accumulator that reads an input tile in place: the accumulator's loop
set no pointer to that tile and dereferenced null (a segfault, found running the cost
model's 6th RMSNorm+Linear candidate at batch 1). Run in a child process, so a crash fails
this test instead of ending the suite."""

import os
import subprocess
import sys
from pathlib import Path

import mirage_jax as mj
from mirage_jax import BlockGraph, KernelGraph

CHILD = r"""
import sys
import numpy as np
import jax
import mirage_jax as mj
sys.path.insert(0, sys.argv[1])
from test_group_matmul_then_accumulator import graph
g = graph()
rng = np.random.default_rng(0)
xs = [rng.standard_normal(t.shape).astype(np.float32) for t in g.inputs]
(got,) = jax.jit(mj.compile(g))(*xs)
(want,) = g.evaluate(xs)
err = np.linalg.norm(np.asarray(got, np.float64) - want) / np.linalg.norm(want)
print(f"error {err:.3e}")
sys.exit(0 if err < 1e-5 else 1)
"""


def graph(batch=1, hidden=256, out=512, grid=16, steps=2) -> KernelGraph:
    """rms_norm(X)·G @ W with the norm accumulated after the matmul in the loop body."""
    kg = KernelGraph()
    X = kg.new_input((batch, hidden))
    G = kg.new_input((hidden,))
    W = kg.new_input((hidden, out))
    bg = BlockGraph(grid=(grid, 1, 1), forloop_range=steps)
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=1)
    g = bg.new_input(G, imap=(-1, -1, -1), fmap=0)
    w = bg.new_input(W, imap=(1, -1, -1), fmap=0)
    rms = bg.accum_rms_last(x, eps=1e-6)
    acc = bg.accum_sum(bg.matmul(bg.mul(x, g), w))
    bg.new_output(bg.div(acc, rms), omap=(1, -1, -1))
    (Y,) = kg.customized([X, G, W], bg)
    kg.mark_output(Y)
    return kg


def test_the_generated_code_has_the_group_matmul_then_the_accumulator():
    source = mj.generate_code(graph())
    group = source.index("one product for the whole group")
    assert "row_sum_squares" in source[group:]  # the accumulator comes after it


def test_the_kernel_runs_and_matches_the_reference(tmp_path):
    done = subprocess.run(
        [sys.executable, "-P", "-c", CHILD, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, MIRAGE_JAX_CACHE=str(tmp_path)),
    )
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert done.stdout.startswith("error ")
