"""One cc_test per googletest source file, so that a new *_test.cc needs no BUILD edit."""

load("@rules_cc//cc:defs.bzl", "cc_test")

def gtest_per_file(srcs, deps = [], **kwargs):
    """Declares a cc_test for each file in srcs, named after its path without ".cc".

    A file cc/ir/graph_test.cc in package //cc becomes the target //cc:ir/graph_test.
    """
    for src in srcs:
        cc_test(
            name = src[:-len(".cc")],
            srcs = [src],
            deps = deps + ["//third_party/bazel:gtest_main"],
            # One small static binary per test: nothing shared to rebuild as a .so.
            linkstatic = True,
            **kwargs
        )
