"""Runs the C++ core's googletest suite through Bazel, so that `pytest` alone covers both.

Without bazel on PATH the test is skipped, unless MIRAGE_JAX_REQUIRE_BAZEL=1 (CI sets it), in
which case a missing bazel is a failure: a CI that silently skipped the C++ tests would pass
for the wrong reason.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# Cold builds of the whole core on two shared cores take minutes; a hang should still end.
TIMEOUT_S = 1800
LOG_TAIL_LINES = 80


def _bazel():
    bazel = shutil.which("bazel")
    if bazel is None:
        if os.environ.get("MIRAGE_JAX_REQUIRE_BAZEL") == "1":
            pytest.fail(
                "MIRAGE_JAX_REQUIRE_BAZEL=1 but `bazel` is not on PATH "
                "(on Debian: apt-get install bazel-bootstrap libgtest-dev)"
            )
        pytest.skip("bazel is not on PATH (set MIRAGE_JAX_REQUIRE_BAZEL=1 to require it)")
    return bazel


def test_bazel_cc_tests():
    bazel = _bazel()
    if not (REPO_ROOT / "WORKSPACE").is_file():
        pytest.fail(f"no Bazel WORKSPACE at {REPO_ROOT}: run pytest from a source checkout")
    # No --batch: a batch client would kill a server another build is using. The server
    # exits on its own when idle (startup --max_idle_secs in .bazelrc).
    command = [
        bazel,
        "test",
        "//cc/...",
        "--jobs=2",
        "--color=no",
        "--curses=no",
    ]
    try:
        result = subprocess.run(
            command,
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(
            f"`{' '.join(command)}` ran past {TIMEOUT_S} s:\n{_tail(err.output)}", pytrace=False
        )
    if result.returncode != 0:
        pytest.fail(
            f"`{' '.join(command)}` exited {result.returncode}; last lines:\n"
            f"{_tail(result.stdout)}",
            pytrace=False,
        )


def _tail(log):
    if isinstance(log, bytes):
        log = log.decode(errors="replace")
    lines = (log or "").splitlines()
    return "\n".join(lines[-LOG_TAIL_LINES:])
