"""python -m mirage_jax cache {list,verify,clear}: listing both kinds of entries, finding and
removing a bad one (re-checking the source against the key and probing each library, not
only the checksums), and clearing only with --yes."""

import json
import os
import re
import subprocess
import sys

import pytest
from cache_test_support import (
    build_library,
    cli_env,
    filled_cache,
    handler_source,
    template_cache,
)

from mirage_jax.cache import store as cache
from mirage_jax.cli.main import main
from mirage_jax.runtime import kernel_cache

_ = (filled_cache, template_cache)


@pytest.fixture
def root(filled_cache):
    """A cache holding one search entry and two kernel entries (real, tiny libraries)."""
    return filled_cache


def keys(root, directory):
    return sorted(p.name for p in (root / directory).iterdir() if p.name != ".locks")


def run(capsys, *argv):
    status = main(["cache", *map(str, argv)])
    return status, capsys.readouterr().out


def listed(out):
    """(kind, key) of each entry line of `cache list`."""
    return sorted(re.findall(r"^  (kernel|search)\s+([0-9a-f]{32})\s", out, re.MULTILINE))


def test_list_shows_each_entry_with_kind_key_size_and_age(root, capsys):
    status, out = run(capsys, "list")
    assert status == 0
    assert out.startswith(f"cache {root}: 3 entries, ")
    expected = sorted(
        [("search", k) for k in keys(root, "searches")]
        + [("kernel", k) for k in keys(root, "kernels")]
    )
    assert listed(out) == expected and len(expected) == 3
    line = next(line for line in out.splitlines() if line.startswith("  search"))
    assert re.search(r"\d+(\.\d)? (B|KiB) +\d+s$", line), line


def test_verify_removes_a_bad_entry_and_keeps_the_rest(root, capsys):
    status, out = run(capsys, "verify")
    assert status == 0 and "3 entries checked, 0 bad" in out
    assert out.count("(compiled here)") == 2 and "(origin not recorded)" in out
    assert "Not checked: what a library's code does" in out
    bad = keys(root, "kernels")[0]
    (root / "kernels" / bad / "kernel.so").write_bytes(b"tampered")
    status, out = run(capsys, "verify")
    assert status == 1
    assert f"BAD  kernel  {bad}: its library does not match the recorded checksum; removed" in out
    assert "3 entries checked, 1 bad" in out
    assert bad not in keys(root, "kernels") and len(keys(root, "kernels")) == 1
    assert len(keys(root, "searches")) == 1
    assert run(capsys, "verify")[0] == 0


def test_verify_catches_a_search_entry_without_metadata(root, capsys):
    (key,) = keys(root, "searches")
    (root / "searches" / key / "meta.json").unlink()
    status, out = run(capsys, "verify")
    assert status == 1 and re.search(f"BAD  search  {key}: unreadable", out)
    assert keys(root, "searches") == []


def test_verify_catches_a_search_entry_whose_graphs_do_not_load(root, capsys):
    (key,) = keys(root, "searches")
    entry = root / "searches" / key
    doc = json.loads((entry / "result.json").read_text())
    doc["candidates"][0] = doc["candidates"][0].replace("16", "17", 1)  # shapes that clash
    (entry / "result.json").write_text(json.dumps(doc))
    meta = json.loads((entry / "meta.json").read_text())
    meta["sha256"] = cache.sha256_of(entry / "result.json")  # a matching checksum
    (entry / "meta.json").write_text(json.dumps(meta))
    status, out = run(capsys, "verify")
    assert status == 1 and f"BAD  search  {key}: its result does not load" in out


def kernel_entry(root, symbol):
    return next(
        root / "kernels" / k
        for k in keys(root, "kernels")
        if json.loads((root / "kernels" / k / "meta.json").read_text())["symbol"] == symbol
    )


def test_verify_probes_each_library_whatever_its_checksum_says(root, capsys, tmp_path):
    """Garbage with a matching checksum, and a library that lost its handler: `verify` used
    to say ok to both."""
    garbage, other = (
        kernel_entry(root, "mj_test_kernel_one"),
        kernel_entry(root, "mj_test_kernel_two"),
    )
    (garbage / "kernel.so").write_bytes(b"\x7fELF garbage" * 50)
    (other / "kernel.so").write_bytes(
        build_library(handler_source("mj_renamed"), tmp_path / "o.so").read_bytes()
    )
    for entry in (garbage, other):
        meta = json.loads((entry / "meta.json").read_text())
        meta["library_sha256"] = cache.sha256_of(entry / "kernel.so")
        (entry / "meta.json").write_text(json.dumps(meta))
    status, out = run(capsys, "verify")
    assert status == 1 and "3 entries checked, 2 bad" in out, out
    assert re.search(f"BAD  kernel  {garbage.name}: it does not load \\(", out), out
    assert (
        f"BAD  kernel  {other.name}: it does not export the FFI handler 'mj_test_kernel_two'" in out
    )
    assert keys(root, "kernels") == []


def test_verify_checks_each_source_against_its_key(root, capsys):
    entry = kernel_entry(root, "mj_test_kernel_one")
    (entry / "kernel.cc").write_text(handler_source("mj_test_kernel_one", "// edited"))
    meta = json.loads((entry / "meta.json").read_text())
    meta["source_sha256"] = cache.sha256_of(entry / "kernel.cc")
    (entry / "meta.json").write_text(json.dumps(meta))
    status, out = run(capsys, "verify")
    assert status == 1
    assert (
        f"BAD  kernel  {entry.name}: its key is not the hash of its source, compiler, flags "
        f"and versions; removed" in out
    )


def test_verify_reports_and_removes_an_entry_of_the_wrong_shape(root, capsys):
    entry = kernel_entry(root, "mj_test_kernel_one")
    cache.remove_entry(entry)
    entry.write_text("a file where the entry's directory should be")
    status, out = run(capsys, "verify")
    assert status == 1 and f"BAD  kernel  {entry.name}: it is not a directory; removed" in out
    assert not entry.exists()


def test_clear_without_yes_only_says_what_it_would_remove(root, capsys):
    before = keys(root, "kernels") + keys(root, "searches")
    status, out = run(capsys, "clear")
    assert status == 0
    assert "would remove 3 entries" in out and "run again with --yes" in out
    assert listed(out) == listed(run(capsys, "list")[1])
    assert keys(root, "kernels") + keys(root, "searches") == before


def test_clear_with_yes_removes_everything_it_owns(root, capsys):
    (root / "unrelated.txt").write_text("not ours")
    status, out = run(capsys, "clear", "--yes")
    assert status == 0 and "removed 3 entries" in out
    assert sorted(p.name for p in root.iterdir()) == ["unrelated.txt"]
    assert run(capsys, "list")[1].startswith(f"cache {root}: 0 entries")


def test_the_command_line_reads_the_cache_root_from_the_environment(root, tmp_path):
    done = subprocess.run(
        [sys.executable, "-P", "-m", "mirage_jax", "cache", "list"],
        env=cli_env(root),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert len(listed(done.stdout)) == 3
    empty = subprocess.run(
        [sys.executable, "-P", "-m", "mirage_jax", "cache", "list"],
        env=cli_env(tmp_path / "none"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert empty.stdout.startswith(f"cache {tmp_path / 'none'}: 0 entries")


def test_cuda_kernel_entries_are_listed_and_verified(root, capsys, monkeypatch, tmp_path):
    from mirage_jax.runtime import backends, toolchain

    # a stand-in for nvcc's library: the probe only loads it and finds its handler
    stand_in = build_library(handler_source("mj_cuda_stand_in"), tmp_path / "cuda.so")

    def fake_nvcc(source, library, archs):
        library.write_bytes(stand_in.read_bytes())

    monkeypatch.setattr(toolchain, "compile_cuda_library", fake_nvcc)
    # its version too (part of the key), so that the test needs no nvcc
    monkeypatch.setattr(toolchain, "toolkit_version", lambda: "13.0.88")
    monkeypatch.setenv(toolchain.ARCH_ENV, "80")
    library = kernel_cache.library_for("// cuda kernel", backends.CUDA, symbol="mj_cuda_stand_in")
    (key,) = keys(root, "cuda_kernels")
    status, out = run(capsys, "list")
    assert status == 0 and out.startswith(f"cache {root}: 4 entries, ")
    assert re.search(rf"^  cuda_kernel\s+{key}\s", out, re.MULTILINE), out
    library.write_bytes(b"tampered")
    status, out = run(capsys, "verify")
    assert "4 entries checked, 1 bad" in out, out
    assert keys(root, "cuda_kernels") == []


def test_cuda_arch_option_sets_the_architectures_or_names_a_bad_value(root, capsys, monkeypatch):
    from mirage_jax.runtime import toolchain

    monkeypatch.delenv(toolchain.ARCH_ENV, raising=False)
    assert main(["--cuda-arch", "80,90a", "cache", "list"]) == 0
    assert os.environ[toolchain.ARCH_ENV] == "80,90a"
    assert toolchain.target_archs() == ("80", "90a")
    with pytest.raises(SystemExit) as exit_info:
        main(["--cuda-arch", "eighty", "cache", "list"])
    assert exit_info.value.code == 2
    assert "--cuda-arch" in capsys.readouterr().err
