"""The examples at small sizes, as a user runs them: quickstart optimizes and checks a real
function, the Flax decoder decodes the same tokens with and without optimize, and the
deployment script serves from an imported cache without searching or compiling.

The Flax test fills a kernel cache that the deployment test's build side reuses (the same
model at the same shapes), so the model is searched once in this module."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("model_cache")


def run_example(name, *args, cwd, env=None, timeout=600):
    """Runs examples/<name> with -P from `cwd` (not the checkout, so that it imports the
    installed package)."""
    return subprocess.run(
        [sys.executable, "-P", str(EXAMPLES / name), *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_quickstart_optimizes_checks_and_times(tmp_path):
    done = run_example(
        "quickstart.py",
        "--small",
        "--runs",
        "10",
        "--cache-dir",
        str(tmp_path / "cache"),
        cwd=tmp_path,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "rmsnorm_linear(x[8,512], g[512], w[512,768])" in out
    # the regions, the μGraph chosen and how it was verified
    # the kernel runs, or it beat XLA on its region but not the whole call by the decision's
    # margin (a loaded machine), and the function runs as jax.jit
    assert re.search(
        r"^1 region\(s\), ([01] run as generated kernels|1 with a kernel that beat XLA on the "
        r"region alone)",
        out,
        re.MULTILINE,
    ), out
    assert "primitives: mul reduce_sum" in out and "dot_general" in out
    # the graph that runs: chosen as a clear win, or a marginal one the whole program kept;
    # with no kernel (a loaded machine; or XLA under 20 µs from the bound, not searched, as on
    # a fast one), the reason
    if "0 run as generated kernels" in out:
        reasons = ("no candidate beat XLA", "not clearly faster with it", "not searched: XLA takes")
        assert any(reason in out for reason in reasons), out
    else:
        assert "kernel graph" in out, out
    if "chosen: candidate" in out or "runner-up graph:" in out:
        assert "customized(" in out and "block graph grid=" in out
        assert re.search(
            r"verification: equivalent to the original by finite-field "
            r"fingerprints",
            out,
        )
    # the check against jax.jit on new data, with its number
    error = float(re.search(r"normwise error (\S+) \(tolerance", out).group(1))
    assert 0 <= error <= 1e-4 and "): ok" in out
    t_jit = float(re.search(r"jax\.jit\s+([\d.]+) ms", out).group(1))
    t_mj, speedup = map(
        float, re.search(r"mj\.optimize\s+([\d.]+) ms\s+speedup ([\d.]+)x", out).groups()
    )
    assert t_jit > 0 and t_mj > 0 and speedup == pytest.approx(t_jit / t_mj, rel=0.02)


def test_flax_decoder_same_tokens_with_and_without_optimize(model_cache, capsys):
    sys.path.insert(0, str(EXAMPLES))
    try:
        import flax_inference
    finally:
        sys.path.remove(str(EXAMPLES))
    result = flax_inference.run(
        flax_inference.SMALL, new_tokens=4, cache_dir=model_cache, repeats=1
    )
    out = capsys.readouterr().out
    assert result["same_tokens"], out
    tokens = result["tokens_optimized"]
    assert tokens.shape == (2, 4) and tokens.dtype.kind == "i"
    assert ((tokens >= 0) & (tokens < flax_inference.SMALL.vocab)).all()
    np.testing.assert_array_equal(tokens, result["tokens_jit"])
    assert result["logit_err"] < 1e-4
    # one RMSNorm region per norm at least: 2 layers x 2 norms + the final one
    assert result["regions"] >= 5, out
    assert result["ms_per_token_jit"] > 0 and result["ms_per_token_optimized"] > 0
    assert f"mj.optimize  tokens {tokens.tolist()}" in out and "same tokens: yes" in out


def test_flax_decoder_greedy_decoding_is_the_argmax(model_cache):
    """The decoding loop itself: each generated token is the argmax of the logits at the
    previous position, computed here with plain jax from the buffer the loop built."""
    import jax
    import jax.numpy as jnp

    sys.path.insert(0, str(EXAMPLES))
    try:
        import flax_inference
    finally:
        sys.path.remove(str(EXAMPLES))
    cfg = flax_inference.SMALL
    forward, params, prompt = flax_inference.build(cfg)
    tokens, _ = flax_inference.greedy_decode(jax.jit(forward), params, prompt, 3, cfg.max_len)
    p = prompt.shape[1]
    buffer = (
        jnp.zeros((2, cfg.max_len), jnp.int32).at[:, :p].set(prompt).at[:, p : p + 3].set(tokens)
    )
    logits = forward(params, buffer)
    for i in range(3):
        np.testing.assert_array_equal(tokens[:, i], np.argmax(logits[:, p + i - 1], axis=-1))


def test_deploy_serves_from_the_imported_cache_without_search_or_compile(model_cache, tmp_path):
    done = run_example(
        "deploy_gpu.py",
        "demo",
        "--small",
        "--tokens",
        "4",
        "--build-cache",
        str(model_cache),
        cwd=tmp_path,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "no GPU visible to jax" in out or "GPU visible to jax" in out
    exported = int(re.search(r"exported (\d+) entries to", out).group(1))
    imported = int(re.search(r"imported (\d+) entries from", out).group(1))
    assert exported == imported > 0 and "0 refused" in out
    assert re.search(
        r"first call [\d.]+ s: (\d+) regions, \d+ as kernels; \1 needed no "
        r"search, 0 cache entries added",
        out,
    ), out
    assert "no search and no compile" in out
    assert "build and serve produced the same tokens: yes" in out
