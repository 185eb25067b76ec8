"""The C++ core's layering: every #include "cc/..." line follows the allowed arrows of
cc/modules.bzl (the table cc/BUILD builds its per-module libraries from), every source folder
is a module, and every file's namespace is its folder's (cc/codegen/cpu -> mj::codegen::cpu).

Bazel already fails a build that includes a header of a module outside a library's
dependencies; this test also catches a module reached only through another one, which
Bazel's layering_check would (it needs clang; the toolchain here is gcc)."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CC = ROOT / "cc"
INCLUDE = re.compile(r'^\s*#\s*include\s+"(cc/[^"]+)"', re.M)
NAMESPACE = re.compile(r"^namespace (mj(?:::\w+)*) \{", re.M)
# Folders of cc/ that are not modules of the core library.
TESTING, PYTHON = "testing", "python"


def bzl_constants(path: Path) -> dict:
    """The top-level constant assignments of a .bzl file (Starlark literals are Python's)."""
    constants = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = node.targets[0]
            if isinstance(name, ast.Name) and name.id.isupper():
                constants[name.id] = ast.literal_eval(node.value)
    return constants


def module_of(path: str) -> str:
    """cc/codegen/cpu/generate.cc -> "codegen/cpu"."""
    return str(Path(path).relative_to("cc").parent)


def is_test_file(path: str) -> bool:
    return "_test" in Path(path).name


def allowed_modules(module: str, test_file: bool, modules: dict, testing_deps: list) -> set:
    if module == PYTHON:
        return set(modules) | {PYTHON}
    if module == TESTING:
        return {TESTING, *testing_deps}
    allowed = {module, *modules[module]}
    if test_file:
        allowed |= {TESTING, "ir"}  # the shared fixtures, and ir's error matchers
    return allowed


def layering_violations(files: dict, modules: dict, testing_deps: list) -> list[str]:
    """Problems with `files` (repository path -> text) against the allowed arrows."""
    problems = []
    known = set(modules) | {TESTING, PYTHON}
    for path, text in sorted(files.items()):
        module = module_of(path)
        if module not in known:
            problems.append(
                f"{path}: cc/{module} is not a module of cc/modules.bzl, so nothing builds it"
            )
            continue
        allowed = allowed_modules(module, is_test_file(path), modules, testing_deps)
        for included in INCLUDE.findall(text):
            target = module_of(included)
            if included not in files:
                problems.append(f"{path}: includes {included}, which does not exist")
            elif target not in allowed:
                problems.append(
                    f"{path}: includes {included}, but cc/{module} may include "
                    f"only {', '.join(sorted(allowed))}"
                )
            elif is_test_file(included) and not is_test_file(path):
                problems.append(f"{path}: includes the test helper {included}")
        if not is_test_file(path):
            want = "mj::" + module.replace("/", "::")
            for namespace in NAMESPACE.findall(text):
                if namespace != want:
                    problems.append(f"{path}: namespace {namespace}, expected {want}")
    return problems


def repository_files() -> dict:
    return {
        str(p.relative_to(ROOT)): p.read_text()
        for p in sorted(CC.rglob("*"))
        if p.suffix in (".h", ".cc", ".def")
    }


@pytest.fixture(scope="module")
def table():
    constants = bzl_constants(CC / "modules.bzl")
    return constants["MODULES"], constants["TESTING_DEPS"]


def test_includes_follow_the_allowed_arrows(table):
    modules, testing_deps = table
    assert layering_violations(repository_files(), modules, testing_deps) == []


def test_the_arrows_have_no_cycle(table):
    modules, _ = table
    done: set = set()

    def visit(module, path):
        assert module not in path, f"cycle: {' -> '.join(path + [module])}"
        if module not in done:
            for dep in modules[module]:
                assert dep in modules, f"{module} depends on unknown module {dep}"
                visit(dep, path + [module])
            done.add(module)

    for module in modules:
        visit(module, [])


def test_violations_are_reported(table):
    modules, testing_deps = table
    files = {
        "cc/ir/graph.h": '#include "cc/search/search.h"\nnamespace mj::ir {\n',
        "cc/search/search.h": '#include "cc/ir/graph.h"\nnamespace mj::search {\n',
        "cc/codegen/cuda/generate.cc": '#include "cc/codegen/cpu/prelude.h"\n',
        "cc/codegen/cpu/prelude.h": "namespace mj::codegen {\n",
        "cc/verify/verify.cc": '#include "cc/verify/nowhere.h"\n'
        '#include "cc/verify/verify_test_graphs.h"\n',
        "cc/verify/verify_test_graphs.h": "",
        "cc/frontend/rules.cc": "",
        "cc/search/search_test.cc": '#include "cc/testing/rmsnorm_linear.h"\n',
        "cc/testing/rmsnorm_linear.h": '#include "cc/search/search.h"\nnamespace mj::testing {\n',
    }
    problems = "\n".join(layering_violations(files, modules, testing_deps))
    assert "cc/ir/graph.h: includes cc/search/search.h" in problems
    assert "cc/codegen/cuda/generate.cc: includes cc/codegen/cpu/prelude.h" in problems
    assert "cc/codegen/cpu/prelude.h: namespace mj::codegen, expected mj::codegen::cpu" in problems
    assert "cc/verify/nowhere.h, which does not exist" in problems
    assert "cc/verify/verify.cc: includes the test helper" in problems
    assert "cc/frontend is not a module" in problems
    assert "cc/testing/rmsnorm_linear.h: includes cc/search/search.h" in problems
    assert "cc/search/search_test.cc" not in problems  # tests may use the shared fixtures
    assert "cc/search/search.h" not in problems.replace("includes cc/search/search.h", "")
