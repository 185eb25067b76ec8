"""The kernel library cache (mirage_jax.runtime): hits skip g++, corrupt entries are rebuilt
with a warning, concurrent builders compile a key once, and a missing g++ is named. (Entries
of every other bad shape: test_kernel_heal.py.)"""

import json
import threading
import time

import jax
import pytest
from cache_test_support import (  # noqa: F401 (fresh_cache, compiler_calls: fixtures)
    build_library,
    compiler_calls,
    fresh_cache,
    handler_source,
    kernels_of,
)
from kernel_test_support import assert_close, random_inputs, storage_rtol

import mirage_jax as mj
from mirage_jax.cache import store as cache
from mirage_jax.ir.paper_graphs import ntrans
from mirage_jax.runtime import kernel_cache, toolchain
from mirage_jax.runtime.toolchain import KernelCompileError


@pytest.fixture
def fake_compiler(monkeypatch, tmp_path):
    """Replaces g++ with a copier of one prebuilt library exporting the handler 'mj_b',
    slow enough to overlap threads; returns the list of its calls."""
    calls = []
    prebuilt = build_library(handler_source("mj_b"), tmp_path / "prebuilt.so")

    def fake(source, library, include=None):
        calls.append(source)
        time.sleep(0.2)
        library.write_bytes(prebuilt.read_bytes())

    monkeypatch.setattr(toolchain, "compile_cpu_library", fake)
    return calls


def test_cache_root_is_the_environment_variable_or_home_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path / "here"))
    assert cache.cache_root() == tmp_path / "here"
    monkeypatch.delenv("MIRAGE_JAX_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache.cache_root() == tmp_path / ".cache" / "mirage_jax"


def test_key_covers_source_and_compiler_flags(monkeypatch):
    key = kernel_cache.library_key("int x;")
    assert kernel_cache.library_key("int x;") == key
    assert kernel_cache.library_key("int y;") != key
    monkeypatch.setattr(toolchain, "GXX_FLAGS", (*toolchain.GXX_FLAGS, "-DSOMETHING"))
    assert kernel_cache.library_key("int x;") != key


def test_key_covers_the_instruction_sets_march_native_compiles_for(monkeypatch):
    # A library built where the CPU has AVX-512 or AMX must not be found on one without.
    key = kernel_cache.library_key("int x;")
    assert kernel_cache.library_key("int x;") == key
    monkeypatch.setattr(toolchain, "native_isa", lambda: "another-cpu")
    assert kernel_cache.library_key("int x;") != key


def test_the_instruction_set_digest_follows_the_cpus_flags(monkeypatch):
    monkeypatch.setattr(toolchain, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    avx2 = toolchain.native_isa()
    monkeypatch.setattr(toolchain, "cpu_flags", lambda: frozenset({"fma", "avx2"}))
    assert toolchain.native_isa() == avx2  # a set: the order /proc/cpuinfo lists them in
    monkeypatch.setattr(toolchain, "cpu_flags", lambda: frozenset({"avx2", "fma", "amx_bf16"}))
    assert toolchain.native_isa() not in (avx2, "unknown")
    monkeypatch.setattr(toolchain, "cpu_flags", lambda: frozenset())
    assert toolchain.native_isa() == "unknown"


def test_second_compile_of_a_graph_reuses_the_cached_library(fresh_cache, compiler_calls):
    _, fused = ntrans(batch=4, hidden=8, row_tile=2)
    inputs = random_inputs(fused)
    first = jax.jit(mj.compile(fused))(*inputs)
    assert len(compiler_calls) == 1
    _, rebuilt = ntrans(batch=4, hidden=8, row_tile=2)  # an equal graph, a new object
    second = jax.jit(mj.compile(rebuilt))(*inputs)
    assert len(compiler_calls) == 1
    assert_close(second[0], first[0], 0.0, "cached kernel")
    (entry,) = [p for p in (fresh_cache / "kernels").iterdir() if p.name != ".locks"]
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["built_with"]["flags"] == list(toolchain.GXX_FLAGS)
    assert (entry / "kernel.cc").read_text() == mj.generate_code(fused)
    assert meta["source_sha256"] == cache.sha256_of(entry / "kernel.cc")
    assert meta["library_sha256"] == cache.sha256_of(entry / "kernel.so")
    assert meta["symbol"] in mj.generate_code(fused)


def test_corrupt_library_is_rebuilt_with_a_warning(fresh_cache, compiler_calls):
    # A graph no other test compiles, so its library is not loaded in this process yet
    # (overwriting a loaded library in place would pull the code from under it).
    _, fused = ntrans(batch=6, hidden=4, row_tile=3)
    ((symbol, source),) = kernels_of(fused)
    library = kernel_cache.library_for(source, symbol=symbol)
    assert len(compiler_calls) == 1
    with open(library, "r+b") as handle:
        handle.seek(100)
        handle.write(b"\xde\xad\xbe\xef" * 16)
    with pytest.warns(RuntimeWarning, match="was bad .*does not match the recorded checksum"):
        f = mj.compile(fused)
    assert len(compiler_calls) == 2
    inputs = random_inputs(fused, seed=3)
    assert_close(
        jax.jit(f)(*inputs)[0], fused.evaluate(inputs)[0], storage_rtol("float32"), "rebuilt kernel"
    )


def test_entry_without_metadata_is_rebuilt(fresh_cache, fake_compiler):
    library = kernel_cache.library_for("// source A", symbol="mj_b")
    (library.parent / "meta.json").unlink()
    with pytest.warns(RuntimeWarning, match="was bad .*meta.json is missing"):
        again = kernel_cache.library_for("// source A", symbol="mj_b")
    assert again == library
    assert len(fake_compiler) == 2
    assert kernel_cache.entry_problem(library.parent) is None


def test_concurrent_builders_compile_a_key_once(fresh_cache, fake_compiler):
    results = []
    threads = [
        threading.Thread(
            target=lambda: results.append(kernel_cache.library_for("// B", symbol="mj_b"))
        )
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fake_compiler) == 1
    assert len(set(results)) == 1 and len(results) == 4
    leftovers = [
        p.name
        for p in (fresh_cache / "kernels").iterdir()
        if p.name not in (".locks", kernel_cache.library_key("// B"))
    ]
    assert leftovers == []


def test_compiler_errors_carry_the_diagnostics_and_leave_no_entry(fresh_cache):
    with pytest.raises(KernelCompileError, match=r"g\+\+ failed .*\n.*error"):
        kernel_cache.library_for("this is not C++;\n", symbol="mj_none")
    assert [p.name for p in (fresh_cache / "kernels").iterdir()] == [".locks"]


def test_missing_compiler_is_named(fresh_cache, monkeypatch, tmp_path):
    _, fused = ntrans(batch=2, hidden=4, row_tile=1)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(KernelCompileError, match=r"g\+\+ was not found on PATH"):
        mj.compile(fused)
