"""Helpers of the cache tests: caches holding real, tiny kernel libraries (g++ builds each in
a fraction of a second), archives taken apart and put back together as an attacker would,
and a library whose constructor leaves a marker file."""

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from search_test_support import CONFIG, Searches, graphs

import mirage_jax
from mirage_jax.cache import manifest as manifest_format
from mirage_jax.cache import signing, store
from mirage_jax.runtime import backends, kernel_cache, toolchain
from mirage_jax.superopt import search_cache

SYMBOLS = ("mj_test_kernel_one", "mj_test_kernel_two")


def cli_env(cache: Path) -> dict[str, str]:
    """The environment of a `python -P -m mirage_jax` child using `cache`: it imports the
    mirage_jax this process imported (an installed one, or a checkout built in place)."""
    package_parent = str(Path(mirage_jax.__file__).resolve().parents[1])
    path = [package_parent, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return {**os.environ, "MIRAGE_JAX_CACHE": str(cache), "PYTHONPATH": os.pathsep.join(path)}


def handler_source(symbol: str, extra: str = "") -> str:
    """A stand-in kernel: a C++ unit exporting `symbol` as the generated ones do."""
    return (
        f"// stand-in kernel {symbol}\n{extra}\n"
        f'extern "C" __attribute__((visibility("default"))) int {symbol}(void) {{ return 1; }}\n'
    )


def kernels_of(graph) -> list[tuple[str, str]]:
    """(handler symbol, CPU source) of each customized op of `graph`, generated as compile
    does, without building or loading anything."""
    return [
        backends.CPU.generate(op.block_graph._core, {})
        for op in graph.ops
        if op.block_graph is not None
    ]


def injected_source(symbol: str, marker_dir: Path) -> str:
    """A working stand-in kernel whose constructor writes marker_dir/ran-in-<pid>: what an
    attacker's library does when it is loaded, kernels still working."""
    constructor = f"""#include <cstdio>
#include <unistd.h>
__attribute__((constructor)) static void mj_injected() {{
  char path[4096];
  std::snprintf(path, sizeof path, "%s/ran-in-%d", "{marker_dir}", (int)getpid());
  if (std::FILE* f = std::fopen(path, "w")) {{ std::fputs("injected", f); std::fclose(f); }}
}}"""
    return handler_source(symbol, constructor)


def build_library(source: str, library: Path) -> Path:
    """g++ `source` into the shared library `library` (the flags of the real kernels that
    matter here: shared, PIC, hidden by default)."""
    unit = library.with_suffix(".cc")
    unit.write_text(source)
    subprocess.run(
        ["g++", "-O1", "-shared", "-fPIC", "-fvisibility=hidden", str(unit), "-o", str(library)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return library


def markers(marker_dir: Path) -> list[str]:
    return sorted(p.name for p in marker_dir.iterdir()) if marker_dir.exists() else []


def fill_cache(root: Path) -> None:
    """One search entry and two kernel entries (real g++, real tiny libraries)."""
    search_cache.cached_search(graphs()[0], CONFIG, "cpu", Searches())
    for symbol in SYMBOLS:
        kernel_cache.library_for(handler_source(symbol), symbol=symbol)


@pytest.fixture(scope="session")
def template_cache(tmp_path_factory):
    """A filled cache, built once per session; copy it, do not change it."""
    root = tmp_path_factory.mktemp("template") / "cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MIRAGE_JAX_CACHE", str(root))
        fill_cache(root)
    return root


@pytest.fixture
def filled_cache(template_cache, tmp_path, monkeypatch):
    """A private copy of template_cache, which is the cache of the test."""
    root = tmp_path / "cache"
    shutil.copytree(template_cache, root, symlinks=True)
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(root))
    return root


@pytest.fixture(scope="session")
def keys(tmp_path_factory):
    """(private, public) key files of the publisher, and (private, public) of someone else."""
    directory = tmp_path_factory.mktemp("keys")
    made = {}
    for who in ("ours", "theirs"):
        private, public = directory / f"{who}.key", directory / f"{who}.pub"
        signing.generate_keys(private, public)
        made[who] = (private, public)
    return made


def entry_keys(root: Path, directory: str) -> list[str]:
    return sorted(p.name for p in (root / directory).iterdir() if not p.name.startswith("."))


def exported_files(root: Path) -> dict[str, bytes]:
    """{relative path: bytes} of every file an archive carries (locks, staging, this
    machine's records and its compilers' precompiled headers excluded)."""
    local = {"origin.json", "probe.json"}
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and p.name not in local
        and p.relative_to(root).parts[0] not in store.MACHINE_DIRECTORIES
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
    }


def read_members(archive: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(archive) as tar:
        return [(m, tar.extractfile(m).read() if m.isreg() else b"") for m in tar.getmembers()]


def write_members(archive: Path, members) -> Path:
    """A gzipped ustar archive of (TarInfo or name, bytes) pairs, in order."""
    with tarfile.open(archive, "w:gz", format=tarfile.USTAR_FORMAT) as tar:
        for info, data in members:
            if isinstance(info, str):
                info = tarfile.TarInfo(info)
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return archive


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tamper(
    archive: Path,
    out: Path,
    *,
    replace=None,
    manifest=None,
    signature="keep",
    sign_with: Path | None = None,
    extra=(),
):
    """A copy of `archive` as someone altered it: members' bytes replaced ({name: bytes}),
    the manifest edited (a function of its JSON document), extra members appended
    ((name or TarInfo, bytes) pairs), and the signature kept as it was ("keep"), dropped
    ("drop"), or made anew with `sign_with` ("resign")."""
    replace = replace or {}
    members = read_members(archive)
    manifest_data = next(d for m, d in members if m.name == manifest_format.NAME)
    if manifest is not None:
        doc = json.loads(manifest_data)
        manifest(doc)
        manifest_data = json.dumps(doc, indent=1).encode()
    result = [(manifest_format.NAME, manifest_data)]
    old_signature = [d for m, d in members if m.name == manifest_format.SIGNATURE]
    if signature == "keep" and old_signature:
        result.append((manifest_format.SIGNATURE, old_signature[0]))
    elif signature == "resign":
        result.append((manifest_format.SIGNATURE, signing.sign(manifest_data, sign_with)))
    for member, data in members:
        if member.name not in (manifest_format.NAME, manifest_format.SIGNATURE):
            result.append((member.name, replace.get(member.name, data)))
    return write_members(out, [*result, *extra])


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    """An empty MIRAGE_JAX_CACHE of the test's own."""
    path = tmp_path / "cache"
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(path))
    return path


@pytest.fixture
def compiler_calls(monkeypatch):
    """Counts calls of the real compiler (g++ still runs)."""
    calls = []
    real = toolchain.compile_cpu_library

    def counting(source, library, include=None):
        calls.append(source)
        real(source, library, include)

    monkeypatch.setattr(toolchain, "compile_cpu_library", counting)
    return calls
