#!/usr/bin/env bash
# The GPU checks in one go, on a GPU machine with jax[cuda] and the CUDA toolkit (nvcc):
# builds and installs mirage_jax, runs tests/gpu (every generated kernel against the
# interpreter and XLA on the GPU), then the GPU benchmark. Logs go to $OUT (default
# tests/gpu/out). Exits non-zero when the tests fail; the benchmark still runs.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-tests/gpu/out}"
mkdir -p "$OUT"

python - <<'PY' || { echo "run.sh: jax sees no GPU; nothing to run" >&2; exit 2; }
import sys
import jax
try:
    print("GPU:", jax.devices("gpu"))
except RuntimeError as e:
    sys.exit(f"run.sh: {e}")
PY
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] \
  || { echo "run.sh: nvcc not found (install the CUDA toolkit)" >&2; exit 2; }
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true

# Offline machines have the build dependencies installed already: build without isolation
# when they are importable, else let pip fetch them.
if python -c "import scikit_build_core, nanobind" 2>/dev/null; then
  pip install --no-build-isolation -e . -q || exit 3
else
  pip install -e . -q || exit 3
fi
python -c "import pytest" 2>/dev/null || pip install -q pytest || exit 3

python -P -m pytest -q -rs tests/gpu --durations=15 2>&1 | tee "$OUT/tests_gpu.txt"
tests=${PIPESTATUS[0]}

python benchmarks/run.py --backend cuda --out "$OUT/benchmarks" 2>&1 | tee "$OUT/benchmarks.txt"
bench=${PIPESTATUS[0]}

echo "run.sh: tests/gpu exit $tests, benchmark exit $bench (logs in $OUT)"
[ "$tests" -eq 0 ] && [ "$bench" -eq 0 ]
