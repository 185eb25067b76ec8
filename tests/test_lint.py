"""The repository's habits, enforced by the test command: ruff's lint and format, mypy on
mirage_jax/ (configured in pyproject.toml), the checked-in stubs of the C++ extension
(mirage_jax/_core.pyi) matching the extension, and nothing pointing at design notes that live
outside the repository.

ruff and mypy come with the `test` extra (pip install '.[test]'); without them these tests
fail rather than skip, so that a CI that lost them cannot pass for the wrong reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nanobind.stubgen

import mirage_jax._core

REPO = Path(__file__).resolve().parents[1]
STUBS = REPO / "mirage_jax" / "_core.pyi"
TIMEOUT_S = 600


def run(*command: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *command],
        cwd=REPO,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def test_ruff_check_is_clean():
    done = run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_leaves_every_file_as_it_is():
    done = run("ruff", "format", "--check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_is_clean_on_the_package():
    done = run("mypy", "--no-incremental")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_checked_in_stubs_match_the_extension(tmp_path):
    """Regenerates mirage_jax/_core.pyi with nanobind's stubgen from the extension this test
    imports (formatted like the checked-in file) and compares. After a change to the
    bindings: python -m nanobind.stubgen -m mirage_jax._core -o mirage_jax/_core.pyi &&
    ruff format mirage_jax/_core.pyi"""
    generated = tmp_path / "_core.pyi"
    nanobind.stubgen.main(["-q", "-m", mirage_jax._core.__name__, "-o", str(generated)])
    formatted = run(
        "ruff",
        "format",
        "--stdin-filename",
        "mirage_jax/_core.pyi",
        "-",
        stdin=generated.read_text(),
    )
    assert formatted.returncode == 0, formatted.stderr
    assert formatted.stdout == STUBS.read_text(), (
        "mirage_jax/_core.pyi does not match the extension; regenerate it (see this test's "
        "docstring)"
    )


# Design notes kept outside the repository must not be cited from it.
_OUTSIDE_NOTES = re.compile(r"DESIGN\.md|DESIGN §")
_SKIPPED_DIRS = {".git", "build", "third_party", "__pycache__", ".pytest_cache", ".hypothesis"}


def test_nothing_cites_design_notes_outside_the_repository():
    cited = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("bazel-")]
        if Path(root) == REPO / "cc":
            # cc/'s citations go with the C++ half of this change; check cc/ too once it is in
            dirs[:] = []
            continue
        for name in files:
            if not name.endswith((".py", ".md", ".toml", ".txt", ".cfg", ".yaml")):
                continue
            path = Path(root) / name
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if _OUTSIDE_NOTES.search(line) and path != Path(__file__):
                    cited.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert cited == []
