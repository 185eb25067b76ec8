#!/usr/bin/env bash
# The CUDA backend's checks in one go, for the first GPU and every one after it:
#
#   tests/gpu/run.sh [--quick] [--cpu-only] [--gpu-only] [--rebuild]
#
# --gpu-only skips the host steps (compile, sass, emulation: the CPU suite runs them) to spend
# a lent GPU's minutes on the GPU. STEP_TIMEOUT=SECONDS stops any one step that runs longer,
# so a hang in one step still leaves the others' results.
#
# Steps, each timed and logged to $OUT (default tests/gpu/out):
#   build        the extension (reused when the checkout already imports, else pip install -e)
#   compile      every paper μGraph's kernels through nvcc for sm_80 and sm_90a
#   sass         ptxas's code has LDSM, HMMA (bf16, TF32) and LDGSTS (needs cuobjdump)
#   emulation    the kernels run on the host (tests/runtime/cuda_host_emulation.h) against the
#                interpreter (skipped with --quick on a GPU machine: the GPU runs them)
#   gpu-sweep    small and fragment-sized kernels on the GPU against the interpreter and
#                XLA, and the command-buffer check (tests/gpu, --quick: a subset)
#   sanitizer    compute-sanitizer memcheck, racecheck and synccheck on a few kernels
#   timing       the paper programs at paper shapes, bf16 and f32, against XLA
# and one JSON ($OUT/run.json) and one markdown table ($OUT/run.md) of them all.
#
# Without a GPU the GPU steps cannot run: they are reported as NOT RUN and the script exits
# 3, loudly, unless --cpu-only says that only the host steps were wanted. Exit 1 when any
# step that ran failed. --quick fits in about 8 minutes on a 16-core GPU machine, build
# included.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"
OUT="${OUT:-tests/gpu/out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
QUICK=0 CPU_ONLY=0 GPU_ONLY=0 REBUILD=0
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --cpu-only) CPU_ONLY=1 ;;
    --gpu-only) GPU_ONLY=1 ;;
    --rebuild) REBUILD=1 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done
export PY="${PYTHON:-python}" REBUILD
STEPS="$OUT/steps.tsv"
: > "$STEPS"

# record NAME STATUS SECONDS NOTE
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$STEPS"; }

# run_step NAME COMMAND...: runs it with its output in $OUT/NAME.log
run_step() {
  local name="$1"; shift
  local start=$SECONDS
  echo "== $name: $*"
  if [ -n "${STEP_TIMEOUT:-}" ]; then
    # timeout runs programs, not shell functions: a function step runs in a child bash.
    if declare -F "$1" > /dev/null; then
      export -f "$1"
      set -- bash -c '"$@"' step "$@"
    fi
    timeout --kill-after=10 "$STEP_TIMEOUT" "$@" > "$OUT/$name.log" 2>&1
  else
    "$@" > "$OUT/$name.log" 2>&1
  fi
  local rc=$?
  local took=$((SECONDS - start))
  tail -n 5 "$OUT/$name.log"
  if [ "$rc" -eq 0 ]; then
    record "$name" passed "$took" "$name.log"
  else
    record "$name" FAILED "$took" "exit $rc, see $name.log"
  fi
  echo "== $name: exit $rc after ${took}s"
  return 0
}

not_run() { record "$1" "NOT RUN" 0 "$2"; echo "== $1: NOT RUN ($2)"; }

# ---------------------------------------------------------------- what this machine has
"$PY" -c "import jax" 2>/dev/null || {
  echo "run.sh: '$PY' cannot import jax: activate the environment that has jax[cuda] (or set PYTHON)" >&2
  exit 2
}
HAVE_GPU=0
GPU_NOTE="$("$PY" - <<'PY' 2>&1
import jax
try:
    print(jax.devices("gpu"))
except RuntimeError as e:
    raise SystemExit(f"no GPU visible to jax: {e}")
PY
)" && HAVE_GPU=1
echo "GPU: $GPU_NOTE"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
NVCC="$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)"
[ -n "$NVCC" ] && "$NVCC" --version > "$OUT/nvcc.txt" 2>&1

# ---------------------------------------------------------------- build
build() {
  if [ "$REBUILD" -eq 0 ] && "$PY" -P -c "import mirage_jax._core" 2>/dev/null; then
    echo "the checkout already imports mirage_jax._core: reusing it (--rebuild to rebuild)"
    return 0
  fi
  # Offline machines have the build and test dependencies installed: build without
  # isolation and resolve nothing when they import (the lint pins in .[test] are not
  # needed here and cannot be fetched there), else let pip fetch them.
  if "$PY" -c "import scikit_build_core, nanobind, pytest, numpy" 2>/dev/null; then
    "$PY" -m pip install --no-build-isolation --no-deps -e . -q
  else
    "$PY" -m pip install -e ".[test]" -q
  fi
}
run_step build build
if ! grep -q "^build	passed" "$STEPS"; then
  echo "run.sh: the build failed; nothing else can run" >&2
fi

PYTEST=("$PY" -P -m pytest -q -rs -p no:cacheprovider)
if [ "$GPU_ONLY" -eq 1 ]; then
  for step in compile sass emulation; do not_run "$step" "--gpu-only: the CPU suite runs it"; done
elif [ -z "$NVCC" ]; then
  not_run compile "nvcc not found (install the CUDA toolkit: a pip-only install has no nvcc)"
  not_run sass "nvcc not found"
else
  run_step compile "${PYTEST[@]}" tests/runtime/test_codegen_cuda.py -k "compiles or broken or bad_arch"
  run_step sass "${PYTEST[@]}" tests/runtime/test_codegen_cuda.py -k sass
  if grep -q "skipped" "$OUT/sass.log"; then
    sed -i 's/^sass\tpassed\t\([0-9]*\)\t.*/sass\tNOT RUN\t\1\tcuobjdump or nvdisasm missing (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)/' "$STEPS"
  fi
fi
if [ "$GPU_ONLY" -eq 1 ]; then
  :
elif [ "$QUICK" -eq 1 ] && [ "$HAVE_GPU" -eq 1 ]; then
  not_run emulation "--quick on a GPU machine: the GPU runs the kernels themselves"
else
  run_step emulation "${PYTEST[@]}" tests/runtime/test_codegen_cuda.py -k emulated
fi

# ---------------------------------------------------------------- the GPU
if [ "$HAVE_GPU" -eq 0 ]; then
  for step in gpu-sweep sanitizer timing; do not_run "$step" "no GPU visible to jax"; done
else
  if [ "$QUICK" -eq 1 ]; then
    run_step gpu-sweep "${PYTEST[@]}" tests/gpu -k "small or fragment or command_buffer or tf32"
  else
    run_step gpu-sweep "${PYTEST[@]}" tests/gpu --durations=15
  fi
  export SANITIZER="$(command -v compute-sanitizer || { [ -n "$NVCC" ] && [ -x "$(dirname "$NVCC")/compute-sanitizer" ] && echo "$(dirname "$NVCC")/compute-sanitizer"; } || true)"
  if [ -z "$SANITIZER" ]; then
    record sanitizer FAILED 0 "compute-sanitizer not found (it comes with the CUDA toolkit)"
  else
    sanitize() {
      local rc=0
      for tool in memcheck racecheck synccheck; do
        echo "-- $tool"
        "$SANITIZER" --tool "$tool" --kernel-name kns=mj_cuda_ --error-exitcode 9 \
          "$PY" tests/gpu/sanitize_kernels.py || rc=1
      done
      return $rc
    }
    run_step sanitizer sanitize
  fi
  RUNS=50; [ "$QUICK" -eq 1 ] && RUNS=10
  run_step timing "$PY" tests/gpu/paper_timing.py --out "$OUT" --runs "$RUNS"
fi

# ---------------------------------------------------------------- one JSON, one table
"$PY" - "$OUT" "$QUICK" "$GPU_NOTE" <<'PY'
import json, sys
from pathlib import Path
out, quick, gpu = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
steps = []
for line in (out / "steps.tsv").read_text().splitlines():
    name, status, seconds, note = line.split("\t", 3)
    steps.append(dict(step=name, status=status, seconds=int(seconds), note=note))
timing = out / "paper_timing.json"
result = dict(quick=quick, gpu=gpu, steps=steps,
              timing=json.loads(timing.read_text()) if timing.exists() else None)
(out / "run.json").write_text(json.dumps(result, indent=1))
lines = ["| step | status | seconds | note |", "|---|---|---:|---|"]
lines += [f"| {s['step']} | {s['status']} | {s['seconds']} | {s['note']} |" for s in steps]
table = "\n".join(lines) + "\n"
if (out / "paper_timing.md").exists():
    table += "\n" + (out / "paper_timing.md").read_text()
(out / "run.md").write_text(table)
print(table)
PY

if grep -q "	FAILED	" "$STEPS"; then
  echo "run.sh: FAILED steps (see $OUT/run.md)" >&2
  exit 1
fi
if grep -q "	NOT RUN	" "$STEPS" && [ "$CPU_ONLY" -eq 0 ]; then
  echo "run.sh: steps NOT RUN on this machine (see $OUT/run.md); --cpu-only if only the host steps were wanted" >&2
  exit 3
fi
echo "run.sh: all steps passed (tables in $OUT/run.md, $OUT/run.json)"
