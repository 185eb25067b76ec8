"""Every C/C++ file of the repository is formatted as .clang-format says (vendored code under
third_party/ excepted): `clang-format --dry-run --Werror` reports nothing. To fix a failure,
run `clang-format -i` on the files it names (the `clang-format` Python package of the test
extra provides the binary)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = {".h", ".cc", ".cu", ".cuh", ".cpp", ".hpp", ".def"}
SKIPPED_DIRS = {"third_party", "build", ".git"}


def clang_format() -> str:
    # The test extra's wheel installs it next to the interpreter running the tests.
    found = shutil.which("clang-format", path=str(Path(sys.executable).parent))
    found = found or shutil.which("clang-format")
    if found is None:
        pytest.fail("clang-format is not installed: pip install '.[test]'", pytrace=False)
    return found


def sources() -> list[Path]:
    return sorted(
        p
        for p in ROOT.rglob("*")
        if p.suffix in SUFFIXES
        and p.is_file()
        and not any(
            part in SKIPPED_DIRS or part.startswith("bazel-") for part in p.relative_to(ROOT).parts
        )
    )


def check(files: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            clang_format(),
            "--dry-run",
            "--Werror",
            f"--style=file:{ROOT / '.clang-format'}",
            *map(str, files),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_source_is_formatted():
    files = sources()
    assert any(p.name == "graph.h" for p in files)  # the walk found the sources
    result = check(files)
    names = sorted(
        {line.split(":")[0] for line in result.stderr.splitlines() if ": error:" in line}
    )
    assert result.returncode == 0, (
        f"clang-format would change {len(names)} file(s); run clang-format -i on them:\n"
        + "\n".join(names)
        + "\n"
        + result.stderr[-3000:]
    )


def test_a_misformatted_file_is_reported(tmp_path):
    bad = tmp_path / "bad.cc"
    bad.write_text("int  f( int x ){return x;}\n")
    result = check([bad])
    assert result.returncode != 0 and "bad.cc" in result.stderr
