"""The C++ core's modules and the allowed arrows between them.

A module is a folder of cc/ with its own namespace (mj::ir, mj::codegen::cpu, ...) and its
own cc_library, named after the folder ("codegen/cpu" -> //cc:codegen_cpu). MODULES maps each
module to the modules its files may include; cc/BUILD makes those the library's deps, so a
header of any other module is not in the build's view and including it fails the build, and
tests/test_cc_layering.py checks every #include line against this table (the direct arrows:
Bazel alone would also accept a module reached through another one).
"""

load("@rules_cc//cc:defs.bzl", "cc_library")
load("//third_party/bazel:gtest.bzl", "gtest_per_file")

MODULES = {
    "ir": [],
    "interp": ["ir"],
    "absexpr": ["ir"],
    "layout": ["ir"],
    "cost": ["ir", "layout"],
    "verify": ["ir", "interp"],
    "search": ["ir", "interp", "absexpr", "cost", "verify"],
    "codegen/common": ["ir"],
    "codegen/cpu": ["ir", "codegen/common", "layout"],
    "codegen/cuda": ["ir", "codegen/common", "cost"],
}

# Libraries from outside cc/ that a module uses.
EXTERNAL_DEPS = {
    "ir": ["//third_party/nlohmann_json"],
}

# cc/testing: fixtures shared by the modules' tests, built on these modules.
TESTING_DEPS = ["ir"]

def target_name(module):
    return module.replace("/", "_")

def _test_only_headers(module):
    return native.glob([module + "/*_test*.h"])

def cc_modules():
    """One cc_library per module (its folder's sources, by glob, so that a new file needs no
    BUILD edit), its test helpers, and one googletest target per *_test.cc."""
    for module, deps in MODULES.items():
        cc_library(
            name = target_name(module),
            srcs = native.glob(
                [module + "/*.cc"],
                exclude = [module + "/*_test*.cc"],
            ),
            hdrs = native.glob(
                [module + "/*.h"],
                exclude = [module + "/*_test*.h"],
            ),
            # X-macro tables, included inside declarations (cc/ir/ops.def).
            textual_hdrs = native.glob([module + "/*.def"]),
            deps = [":" + target_name(d) for d in deps] + EXTERNAL_DEPS.get(module, []),
            visibility = ["//visibility:public"],
        )
        test_deps = [":" + target_name(module), ":testing", ":ir_test_support"]
        if _test_only_headers(module):
            cc_library(
                name = target_name(module) + "_test_support",
                testonly = True,
                hdrs = _test_only_headers(module),
                deps = [":" + target_name(module), ":testing"],
            )
            test_deps.append(":" + target_name(module) + "_test_support")
        gtest_per_file(
            srcs = native.glob([module + "/*_test.cc"]),
            size = "small",
            # Generous for a shared 2-core machine; a unit test slower than this is a bug.
            timeout = "moderate",
            deps = depset(test_deps).to_list(),
        )

    cc_library(
        name = "testing",
        testonly = True,
        srcs = native.glob(["testing/*.cc"]),
        hdrs = native.glob(["testing/*.h"]),
        deps = [":" + target_name(d) for d in TESTING_DEPS],
    )

    # Every module: what a user of the whole core links.
    cc_library(
        name = "core",
        deps = [":" + target_name(m) for m in MODULES],
        visibility = ["//visibility:public"],
    )
