"""The GPU machine's scripts import and say plainly that no GPU is there: a lent GPU's
minutes are not spent finding an import error (sanitize_kernels.py once imported a helper
from a module it could not reach and failed under all three sanitizer tools)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jax
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _has_gpu() -> bool:
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


@pytest.mark.skipif(_has_gpu(), reason="a GPU is visible: tests/gpu runs these scripts")
@pytest.mark.parametrize(
    "script, args",
    [("sanitize_kernels.py", []), ("paper_timing.py", ["--out", "unused", "--runs", "1"])],
)
def test_the_gpu_scripts_import_and_exit_2_without_a_gpu(script, args, tmp_path):
    done = subprocess.run(
        [sys.executable, "-P", str(ROOT / "tests" / "gpu" / script), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "no GPU visible to jax" in done.stderr


def test_run_sh_parses_its_options():
    done = subprocess.run(
        ["bash", str(ROOT / "tests" / "gpu" / "run.sh"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert "--gpu-only" in done.stdout and "STEP_TIMEOUT" in done.stdout
