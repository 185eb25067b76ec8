"""The probe: a library is loaded by a child process before this one loads it. A crash, a
missing handler or garbage is reported there, and ffi_targets never loads such a library."""

import json
import os
import subprocess
import sys

import pytest
from cache_test_support import build_library, handler_source, injected_source, markers

from mirage_jax.runtime import ffi_targets, library_probe
from mirage_jax.runtime.library_probe import KernelLoadError


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return build_library(
        handler_source("mj_probe_handler"), tmp_path_factory.mktemp("probe") / "kernel.so"
    )


def truncated(library, path):
    """The first half of `library`: a valid ELF header whose segments run past the end of
    the file, the shape that kills a loader with SIGBUS."""
    path.write_bytes(library.read_bytes()[: library.stat().st_size // 2])
    return path


def test_a_sound_library_passes_and_the_pass_is_recorded(library, tmp_path):
    copy = tmp_path / "kernel.so"
    copy.write_bytes(library.read_bytes())
    assert library_probe.probe(copy, "mj_probe_handler") is None
    assert library_probe.ensure_probed(copy, "mj_probe_handler") is None
    record = json.loads((tmp_path / "probe.json").read_text())
    assert record["symbol"] == "mj_probe_handler"
    assert library_probe.recorded(copy, "mj_probe_handler", record["library_sha256"])
    assert not library_probe.recorded(copy, "mj_other", record["library_sha256"])


def test_a_missing_handler_is_named(library):
    assert library_probe.probe(library, "mj_not_there") == (
        "it does not export the FFI handler 'mj_not_there'"
    )


def test_garbage_does_not_load(tmp_path):
    garbage = tmp_path / "kernel.so"
    garbage.write_bytes(b"\x7fELF but not really" * 100)
    problem = library_probe.probe(garbage, "mj_probe_handler")
    assert problem is not None and problem.startswith("it does not load (")


def test_a_truncated_library_kills_the_child_not_this_process(library, tmp_path):
    cut = truncated(library, tmp_path / "kernel.so")
    # what loading it here would have done
    direct = subprocess.run(
        [sys.executable, "-I", "-S", "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", cut],
        capture_output=True,
        timeout=120,
    )
    assert direct.returncode != 0
    problem = library_probe.probe(cut, "mj_probe_handler")
    assert problem is not None
    if direct.returncode < 0:  # SIGBUS on Linux
        assert problem.startswith("loading it killed the process (SIG"), problem


def test_a_hanging_constructor_times_out(tmp_path):
    slow = build_library(
        handler_source(
            "mj_slow_handler",
            "#include <unistd.h>\n__attribute__((constructor)) static void slow() { sleep(30); }",
        ),
        tmp_path / "slow.so",
    )
    assert library_probe.probe(slow, "mj_slow_handler", timeout_s=1) == (
        "loading it did not finish within 1 s"
    )


def test_register_target_never_loads_a_library_that_fails_the_probe(tmp_path):
    """A library whose constructor leaves a marker and that lacks the handler asked for: the
    probe's child ran the constructor; this process did not, and raised."""
    marker_dir = tmp_path / "markers"
    marker_dir.mkdir()
    evil = build_library(injected_source("mj_evil_handler", marker_dir), tmp_path / "evil.so")
    with pytest.raises(KernelLoadError, match="does not export the FFI handler 'mj_wanted'"):
        ffi_targets.register_target("mj_wanted", evil, "cpu")
    assert not ffi_targets.is_registered("mj_wanted")
    ran = markers(marker_dir)
    assert ran and f"ran-in-{os.getpid()}" not in ran

    cut = truncated(evil, tmp_path / "cut.so")
    with pytest.raises(KernelLoadError, match="was not loaded: "):
        ffi_targets.register_target("mj_evil_handler", cut, "cpu")
    assert f"ran-in-{os.getpid()}" not in markers(marker_dir)
