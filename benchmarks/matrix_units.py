"""One core's multiply-add rates by instruction: float32 FMAs on the widest vectors the CPU
has, AVX512-BF16 dot products, and AMX bfloat16 tile products, each where the CPU has it.

The generated CPU matmuls run on the AMX tiles where they exist (cc/codegen/cpu/prelude.cc,
matmul_amx) because of what this measures: on the Sapphire Rapids class machine of
2026-12-06 the tiles multiplied bfloat16 at 970 GFLOP/s a core, the FMAs 166-180 and
AVX512-BF16 81-92. A small C++ program is compiled with the kernels' flags
(`g++ -O3 -march=native`) and runs independent chains of each instruction on registers
(no memory traffic): peak rates, not a product's.

    python benchmarks/matrix_units.py [--seconds 0.5] [--json FILE] [--quick]

--quick runs each for a few milliseconds (the suite runs it) whose rates say little.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from mirage_jax.runtime import toolchain

SOURCE = r"""
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

using Vec = float __attribute__((vector_size(64)));
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// 16 independent chains hide the FMA latency; the asm keeps the operand opaque.
static double fma_rate(long rounds) {
  Vec acc[16] = {};
  Vec a, b;
  for (int i = 0; i < 16; ++i) a[i] = b[i] = 1e-9f;
  const auto t0 = Clock::now();
  for (long r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = a * b + acc[i];
    __asm__ volatile("" : "+x"(a));
  }
  const double s = seconds_since(t0);
  float sink = 0;
  for (int i = 0; i < 16; ++i) sink += acc[i][0];
  std::fprintf(stderr, "%g\n", sink);
  return 2.0 * 16 * 16 * rounds / s;
}

static double dpbf16_rate(long rounds) {
#if defined(__AVX512BF16__)
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  __m512bh a = (__m512bh)_mm512_set1_epi16(0x3000), b = a;
  const auto t0 = Clock::now();
  for (long r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    __asm__ volatile("" : "+v"(a));
  }
  const double s = seconds_since(t0);
  float sink = 0;
  for (int i = 0; i < 16; ++i) sink += _mm512_reduce_add_ps(acc[i]);
  std::fprintf(stderr, "%g\n", sink);
  return 2.0 * 32 * 16 * rounds / s;  // 32 products into 16 lanes per instruction
#else
  (void)rounds;
  return 0;
#endif
}

static double amx_rate(long rounds) {
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
  if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return -1;  // tiles refused
  struct alignas(64) {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
  } config = {};
  config.palette = 1;
  for (int t = 0; t < 8; ++t) config.rows[t] = 16, config.bytes_per_row[t] = 64;
  _tile_loadconfig(&config);
  alignas(64) static uint16_t ones[16 * 32];
  for (auto& v : ones) v = 0x3f80;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  const auto t0 = Clock::now();
  for (long r = 0; r < rounds; ++r) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  const double s = seconds_since(t0);
  alignas(64) static float sums[16 * 16];
  _tile_stored(0, sums, 64);
  _tile_release();
  std::fprintf(stderr, "%g\n", sums[0]);
  return 2.0 * 4 * 16 * 16 * 32 * rounds / s;
#else
  (void)rounds;
  return 0;
#endif
}

int main(int argc, char** argv) {
  const long scale = argc > 1 ? std::atol(argv[1]) : 1;
  std::printf("fma %.6g\n", fma_rate(2000000 * scale));
  std::printf("dpbf16 %.6g\n", dpbf16_rate(1000000 * scale));
  std::printf("amx %.6g\n", amx_rate(250000 * scale));
}
"""

UNITS = {
    "fma": "float32 FMAs",
    "dpbf16": "AVX512-BF16 dot products",
    "amx": "AMX bfloat16 tiles",
}


def measure(seconds: float) -> dict[str, float]:
    """GFLOP/s of each unit on one core; 0 where the CPU (or g++) lacks it, -1 where Linux
    refused the tile registers."""
    with tempfile.TemporaryDirectory(prefix="mj_units_") as tmp:
        source, program = Path(tmp) / "units.cc", Path(tmp) / "units"
        source.write_text(SOURCE)
        built = subprocess.run(
            [toolchain.find_gxx(), *toolchain.GXX_PROGRAM_FLAGS, str(source), "-o", str(program)],
            capture_output=True,
            text=True,
        )
        if built.returncode != 0:
            raise SystemExit(f"matrix_units: g++ failed on the probe:\n{built.stderr[-2000:]}")
        # about 0.02 s a unit at scale 1 on the 2026-12-06 machine
        scale = max(1, round(seconds / 0.02))
        done = subprocess.run(
            [str(program), str(scale)], check=True, capture_output=True, text=True
        )
    rates = {}
    for line in done.stdout.splitlines():
        name, value = line.split()
        rate = float(value)
        rates[name] = rate / 1e9 if rate > 0 else rate
    return rates


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="about how long each unit")
    parser.add_argument("--json")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if not args.seconds > 0:
        raise SystemExit(f"matrix_units: --seconds must be positive, got {args.seconds}")
    rates = measure(0.001 if args.quick else args.seconds)
    for name, what in UNITS.items():
        rate = rates[name]
        shown = (
            f"{rate:8.1f} GFLOP/s"
            if rate > 0
            else ("not on this CPU" if rate == 0 else "refused by the kernel")
        )
        print(f"{what:28s} {shown}  (one core)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rates, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
