"""Decisions that hold: three processes optimizing one function on one cache, started at once,
make the same choices (each region's, and the whole program's); only one of them times or
searches, the others wait for its stored verdicts and follow them; a fourth started afterwards
times nothing. `cache list` shows the verdicts."""

import json
import subprocess
import sys

from cache_test_support import cli_env
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)

from mirage_jax.cache import store
from mirage_jax.superopt import verdict_cache

CHILD = r"""
import json, re
import jax, jax.numpy as jnp, numpy as np
import mirage_jax as mj
from mirage_jax.runtime import profile
from mirage_jax.superopt import search as _search

counts = {"region timing": 0, "program timing": 0, "search": 0, "estimate": 0}
real_times, real_search = profile.median_times, _search.search

def times(functions, *args, **kwargs):
    if "xla estimate" in functions:  # the function budget's estimate of the region
        counts["estimate"] += 1
    else:
        counts["program timing" if "rewritten" in functions else "region timing"] += 1
    return real_times(functions, *args, **kwargs)

def search(*args, **kwargs):
    counts["search"] += 1
    return real_search(*args, **kwargs)

profile.median_times, _search.search = times, search
profile.BUDGET_S = 0.2
# This region gains a few µs: searched whatever the machine's speed, as the test needs.
from mirage_jax.rewrite import budget
budget.MIN_GAIN_S = 0.0

def rmsnorm_linear(x, g, w):
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    return (x * jax.lax.rsqrt(ms + 1e-6) * g) @ w

rng = np.random.default_rng(0)
x = jnp.asarray(rng.standard_normal((8, 256)), jnp.float32)
g = jnp.asarray(rng.standard_normal(256), jnp.float32)
w = jnp.asarray(rng.standard_normal((256, 64)), jnp.float32)
f = mj.optimize(rmsnorm_linear)
got, want = np.asarray(f(x, g, w)), np.asarray(jax.jit(rmsnorm_linear)(x, g, w))
choices = []
for r in f.regions(x, g, w):
    line = re.search(r"chosen: (candidate \w+|[^\n(]*)", r.report)
    choices.append([r.chosen, line.group(1).strip() if line else ""])
print(json.dumps({
    "choices": choices,
    "uses_kernels": f.uses_kernels(x, g, w),
    "counts": counts,
    "error": float(np.max(np.abs(got - want)) / np.max(np.abs(want))),
    "loaded": ["verdict: loaded from the verdict cache" in r.report for r in f.regions(x, g, w)],
}))
"""


def test_three_processes_on_one_cache_make_the_same_choices(session_kernel_cache):
    # The session's cache: the function is test_optimize's, whose search and kernels may be
    # there already. Its other tests run with verdicts off, so none is stored there but ours.
    store.remove_entry(session_kernel_cache / verdict_cache.DIRECTORY)
    env = {**cli_env(session_kernel_cache), "MIRAGE_JAX_VERDICTS": "1"}
    env.pop("MIRAGE_JAX_KEEP_KERNELS", None)
    # All three at once: the first to take a verdict's lock measures, the others wait for it
    # and follow its verdict, exactly as a process started later does.
    children = [
        subprocess.Popen(
            [sys.executable, "-P", "-c", CHILD],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    runs = []
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-3000:]
        runs.append(json.loads(out.strip().splitlines()[-1]))
    # One process searched (unless the cache had it) and timed the region; the others did
    # neither. The whole program is timed by whichever first takes its lock (it needs the
    # region's verdict first), once.
    counts = [run["counts"] for run in runs]
    measured = [run for run in runs if run["counts"]["region timing"]]
    assert len(measured) == 1, counts
    (first,) = measured
    assert sum(c["program timing"] > 0 for c in counts) <= 1, counts
    assert sum(c["estimate"] for c in counts) <= 1, counts  # measured once, by any of them
    assert all(c["search"] == 0 for run, c in zip(runs, counts) if run is not first), counts
    assert first["choices"] and not any(first["loaded"])
    for run in runs:
        assert run["choices"] == first["choices"]
        assert run["uses_kernels"] == first["uses_kernels"]
        assert run is first or all(run["loaded"])
    assert all(run["error"] < 1e-5 for run in runs)
    # and a process started afterwards times and searches nothing at all
    later = subprocess.run(
        [sys.executable, "-P", "-c", CHILD], env=env, capture_output=True, text=True, timeout=600
    )
    assert later.returncode == 0, later.stderr[-3000:]
    last = json.loads(later.stdout.strip().splitlines()[-1])
    assert last["counts"] == {"region timing": 0, "program timing": 0, "search": 0, "estimate": 0}
    assert last["choices"] == first["choices"] and last["uses_kernels"] == first["uses_kernels"]

    listed = subprocess.run(
        [sys.executable, "-P", "-m", "mirage_jax", "cache", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr
    print(listed.stdout)
    verdicts = listed.stdout.split("verdicts (scope,")[1].splitlines()[1:]
    scopes = [line.split()[0] for line in verdicts]
    assert scopes.count("region") == len(first["choices"])
    if any(c[0] == "kernel" for c in first["choices"]):
        assert scopes.count("program") == 1
    assert all("rounds" in line and "x [" in line for line in verdicts)
