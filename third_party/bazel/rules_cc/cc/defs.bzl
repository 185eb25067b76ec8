"""The rules_cc entry points, forwarded to the rules built into Bazel 4.2.

Bazel's own tool packages (@bazel_tools//tools/cpp, //tools/jdk, the generated
@local_config_cc) load cc_binary, cc_library, cc_toolchain and cc_toolchain_suite from
here; this project's BUILD files load cc_library and cc_test.
"""

def cc_binary(**kwargs):
    native.cc_binary(**kwargs)

def cc_library(**kwargs):
    native.cc_library(**kwargs)

def cc_test(**kwargs):
    native.cc_test(**kwargs)

def cc_toolchain(**kwargs):
    native.cc_toolchain(**kwargs)

def cc_toolchain_suite(**kwargs):
    native.cc_toolchain_suite(**kwargs)
