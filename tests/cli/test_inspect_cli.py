"""python -m mirage_jax inspect MODULE:FUNCTION: example arguments from --arg specs, from
--args MODULE:CALLABLE, or from the function's example_args attribute; what it prints is
Optimized.explain for them; bad usage exits with status 2 and names the problem."""

import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)
from optimize_test_support import inputs, kernels_always_win, rmsnorm_linear  # noqa: F401

from mirage_jax.cli import main as cli
from mirage_jax.cli.inspect import parse_spec


def with_attribute(x, g, w):
    return rmsnorm_linear(x, g, w)


with_attribute.example_args = inputs


def test_inspect_explains_a_function_for_shapes_given_on_the_command_line(
    kernels_always_win, capsys
):
    status = cli.main(
        [
            "inspect",
            "optimize_test_support:rmsnorm_linear",
            "--arg",
            "f32[8,256]",
            "--arg",
            "f32[256]",
            "--arg",
            "f32[256, 64]",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    assert "float32[8, 256]" in out and "float32[256, 64]" in out
    assert "1 region(s), 1 run as generated kernels" in out
    assert "ms = jnp.mean(x * x, axis=-1, keepdims=True)" in out  # the source lines
    assert "chosen graph:" in out and "verification:" in out and "speedup over XLA" in out


def test_inspect_takes_arguments_from_a_callable_or_the_attribute(kernels_always_win, capsys):
    assert cli.main(["inspect", "optimize_test_support:rmsnorm_linear", "--args", ":inputs"]) == 0
    from_callable = capsys.readouterr().out
    assert cli.main(["inspect", "test_inspect_cli:with_attribute"]) == 0
    from_attribute = capsys.readouterr().out
    for out in (from_callable, from_attribute):
        assert "float32[8, 256]" in out and "run as generated kernels" in out


def test_inspect_names_bad_usage(capsys):
    assert cli.main(["inspect", "optimize_test_support:rmsnorm_linear", "--arg", "f32[8;256]"]) == 2
    assert "expected DTYPE[D0,D1,...]" in capsys.readouterr().err
    assert cli.main(["inspect", "optimize_test_support:rmsnorm_linear"]) == 2
    assert "no example arguments" in capsys.readouterr().err
    assert cli.main(["inspect", "optimize_test_support:no_such_function", "--arg", "f32[1]"]) == 2
    assert "has no attribute 'no_such_function'" in capsys.readouterr().err
    assert cli.main(["inspect", "rmsnorm_linear"]) == 2
    assert "expected MODULE:FUNCTION" in capsys.readouterr().err
    assert parse_spec("bf16[]") == ((), jnp.dtype(jnp.bfloat16))
    assert parse_spec("float32[2, 3]") == ((2, 3), np.dtype(np.float32))


def test_python_dash_m_inspect_runs_in_a_fresh_process(session_kernel_cache):
    """End to end, cheaply: every region is below --min-region-flops, so nothing is
    searched; the region is still listed with its source lines and the reason."""
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # No empty PYTHONPATH entry (it would mean the working directory, the checkout, whose
    # mirage_jax/ has no compiled extension), and run from the tests folder.
    path = [tests] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {
        **os.environ,
        "MIRAGE_JAX_CACHE": str(session_kernel_cache),
        "PYTHONPATH": os.pathsep.join(path),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "mirage_jax",
            "inspect",
            "optimize_test_support:rmsnorm_linear",
            "--args",
            ":inputs",
            "--min-region-flops",
            "1e12",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tests,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "xla (270360 flops < min_region_flops 1e+12)" in done.stdout
    assert "return (x * jax.lax.rsqrt(ms + 1e-6) * g) @ w" in done.stdout
