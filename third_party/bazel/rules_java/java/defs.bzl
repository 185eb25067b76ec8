"""The rules_java entry points that Bazel 4.2 itself needs, forwarded to native rules.

No Java is built here, but every build parses @bazel_tools//tools/jdk (its Java toolchains
are registered by default), and that package loads these three.
"""

def java_import(**kwargs):
    native.java_import(**kwargs)

def java_runtime(**kwargs):
    native.java_runtime(**kwargs)

def java_toolchain(**kwargs):
    native.java_toolchain(**kwargs)
