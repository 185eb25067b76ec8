"""A bad kernel cache entry heals, whatever its shape: the lookup deletes it, rebuilds it from
source and warns once; a library that would crash its loader is caught by the probe, so the
process survives. Each probe happens once per change of the library's bytes."""

import json
import shutil
import warnings

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
from mirage_jax.cache import store
from mirage_jax.ir.paper_graphs import ntrans
from mirage_jax.runtime import kernel_cache, library_probe
from mirage_jax.runtime.toolchain import KernelCompileError

SYMBOL = "mj_heal_handler"
SOURCE = handler_source(SYMBOL)


@pytest.fixture
def probes(monkeypatch):
    calls = []
    real = library_probe.probe

    def counting(library, symbol, *args, **kwargs):
        calls.append(library)
        return real(library, symbol, *args, **kwargs)

    monkeypatch.setattr(library_probe, "probe", counting)
    return calls


def fix_checksum(entry):
    """Makes meta.json agree with whatever kernel.so now is: a checksum proves nothing."""
    meta = json.loads((entry / "meta.json").read_text())
    meta["library_sha256"] = store.sha256_of(entry / "kernel.so")
    (entry / "meta.json").write_text(json.dumps(meta))


def replace_library(entry, data):
    """New bytes under the library's name (a new file: a process that mapped the old one
    keeps it)."""
    (entry / "kernel.so").unlink()
    (entry / "kernel.so").write_bytes(data)


def truncated(entry, tmp_path):
    replace_library(entry, (entry / "kernel.so").read_bytes()[:8000])
    fix_checksum(entry)


def garbage(entry, tmp_path):
    replace_library(entry, b"\x7fELF" + bytes(range(256)) * 64)
    fix_checksum(entry)


def without_the_handler(entry, tmp_path):
    other = build_library(handler_source("mj_someone_else"), tmp_path / "other.so")
    replace_library(entry, other.read_bytes())
    fix_checksum(entry)


def a_file_for_the_entry(entry, tmp_path):
    shutil.rmtree(entry)
    entry.write_text("not an entry")


def a_directory_for_the_library(entry, tmp_path):
    (entry / "kernel.so").unlink()
    (entry / "kernel.so").mkdir()
    (entry / "kernel.so" / "x").write_text("x")


def no_meta(entry, tmp_path):
    (entry / "meta.json").unlink()


def meta_of_the_wrong_type(entry, tmp_path):
    (entry / "meta.json").write_text('["kernel"]')


def a_link_for_the_library(entry, tmp_path):
    elsewhere = tmp_path / "elsewhere.so"
    elsewhere.write_bytes((entry / "kernel.so").read_bytes())
    (entry / "kernel.so").unlink()
    (entry / "kernel.so").symlink_to(elsewhere)


def a_link_for_the_entry(entry, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(entry, elsewhere)
    shutil.rmtree(entry)
    entry.symlink_to(elsewhere, target_is_directory=True)


def another_source_with_its_checksum(entry, tmp_path):
    (entry / "kernel.cc").write_text(handler_source(SYMBOL, "// changed"))
    meta = json.loads((entry / "meta.json").read_text())
    meta["source_sha256"] = store.sha256_of(entry / "kernel.cc")
    (entry / "meta.json").write_text(json.dumps(meta))


SHAPES = {
    f.__name__: f
    for f in (
        truncated,
        garbage,
        without_the_handler,
        a_file_for_the_entry,
        a_directory_for_the_library,
        no_meta,
        meta_of_the_wrong_type,
        a_link_for_the_library,
        a_link_for_the_entry,
        another_source_with_its_checksum,
    )
}
WHY = {
    "truncated": "loading it killed the process",
    "garbage": "it does not load",
    "without_the_handler": f"it does not export the FFI handler '{SYMBOL}'",
    "a_file_for_the_entry": "it is not a directory",
    "a_directory_for_the_library": "its kernel.so is missing or not a regular file",
    "no_meta": "its meta.json is missing or not a regular file",
    "meta_of_the_wrong_type": "its meta.json is not a JSON object",
    "a_link_for_the_library": "its kernel.so is missing or not a regular file",
    "a_link_for_the_entry": "it is not a directory",
    "another_source_with_its_checksum": "its key is not the hash of its source",
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_bad_entry_is_deleted_and_rebuilt_with_one_warning(
    fresh_cache, compiler_calls, tmp_path, shape
):
    library = kernel_cache.library_for(SOURCE, symbol=SYMBOL)
    entry = library.parent
    SHAPES[shape](entry, tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = kernel_cache.library_for(SOURCE, symbol=SYMBOL)
    messages = [str(w.message) for w in caught if "mirage_jax" in str(w.message)]
    assert len(messages) == 1, messages
    assert f"kernel library {entry} was bad (" in messages[0]
    assert WHY[shape] in messages[0], messages[0]
    assert messages[0].endswith("deleted it and rebuilt it from source")
    assert again == library and len(compiler_calls) == 2
    assert kernel_cache.entry_problem(entry) is None and not entry.is_symlink()
    assert library_probe.probe(library, SYMBOL) is None
    # healed for good: the next lookup is silent and compiler_calls nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel_cache.library_for(SOURCE, symbol=SYMBOL)
    assert len(compiler_calls) == 2


def test_damaged_cache_directories_heal_too(fresh_cache, compiler_calls):
    (fresh_cache / "kernels").parent.mkdir(parents=True)
    (fresh_cache / "kernels").write_text("a file where the kernels directory should be")
    kernel_cache.library_for(SOURCE, symbol=SYMBOL)
    store.remove_entry(fresh_cache / "kernels" / ".locks")
    (fresh_cache / "kernels" / ".locks").write_text("a file where the locks should be")
    store.remove_entry(fresh_cache / "kernels" / kernel_cache.library_key(SOURCE))
    kernel_cache.library_for(SOURCE, symbol=SYMBOL)
    assert len(compiler_calls) == 2


def test_a_truncated_library_with_a_matching_checksum_is_healed_in_process(
    fresh_cache, compiler_calls, tmp_path
):
    """The case that killed the process with SIGBUS: the library is caught by the probe,
    rebuilt, loaded, and the kernel is right."""
    _, fused = ntrans(batch=10, hidden=4, row_tile=5)
    ((symbol, source),) = kernels_of(fused)
    entry = kernel_cache.library_for(source, symbol=symbol).parent
    truncated(entry, tmp_path)
    with pytest.warns(RuntimeWarning, match="was bad \\(loading it killed the process"):
        f = mj.compile(fused)
    assert len(compiler_calls) == 2
    inputs = random_inputs(fused, seed=5)
    assert_close(
        jax.jit(f)(*inputs)[0], fused.evaluate(inputs)[0], storage_rtol("float32"), "healed kernel"
    )


def test_without_a_compiler_a_bad_entry_is_an_error_naming_both(fresh_cache, monkeypatch, tmp_path):
    library = kernel_cache.library_for(SOURCE, symbol=SYMBOL)
    garbage(library.parent, tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(KernelCompileError, match=r"g\+\+ was not found.*the cached one was bad"):
        kernel_cache.library_for(SOURCE, symbol=SYMBOL)
    assert not library.parent.exists()


def test_a_library_is_probed_once_per_change_of_its_bytes(fresh_cache, probes, tmp_path):
    library = kernel_cache.library_for(SOURCE, symbol=SYMBOL)
    assert len(probes) == 1  # the library just built
    kernel_cache.library_for(SOURCE, symbol=SYMBOL)
    kernel_cache.library_for(SOURCE, symbol=SYMBOL)
    assert len(probes) == 1
    # other bytes, still a sound library of this handler (a rebuild elsewhere, an import)
    other = build_library(handler_source(SYMBOL, "// other build"), tmp_path / "o.so")
    replace_library(library.parent, other.read_bytes())
    fix_checksum(library.parent)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel_cache.library_for(SOURCE, symbol=SYMBOL)
    assert len(probes) == 2
    kernel_cache.library_for(SOURCE, symbol=SYMBOL)
    assert len(probes) == 2
