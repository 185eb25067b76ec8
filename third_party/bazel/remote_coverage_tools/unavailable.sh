#!/bin/sh
echo "bazel coverage is not supported: the coverage tools are not available offline" >&2
exit 1
