// Target presets, host overrides and validation.
#include "cc/cost/target.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace mj::cost {
namespace {

TEST(Target, PresetsAreUsable) {
  for (const Target& t : {Target::cpu_host(), Target::a100(), Target::h100(), Target::h200()}) {
    EXPECT_NO_THROW(check_target(t)) << t.name;
  }
}

TEST(Target, CpuHostMatchesTheMeasuredMachine) {
  const Target t = Target::cpu_host();
  EXPECT_EQ(t.kind, TargetKind::kCpu);
  EXPECT_EQ(t.parallel_units(), 2);
  EXPECT_DOUBLE_EQ(t.dram_bandwidth, 21e9);
  EXPECT_DOUBLE_EQ(t.peak_flops, 120e9);
  EXPECT_DOUBLE_EQ(t.custom_call_overhead_s, 35e-6);
  EXPECT_DOUBLE_EQ(t.fma_peak_flops(), 2 * 8 * 2 * 2 * 3e9);
  EXPECT_DOUBLE_EQ(t.library_small_m_matmul_flops, 0.18 * t.fma_peak_flops());
}

TEST(Target, MeasurementsOverrideTheDefaults) {
  HostMeasurements m;
  m.read_bandwidth = 30e9;
  m.matmul_flops = 500e9;
  m.ffi_dispatch_s = 10e-6;
  m.cores = 8;
  const Target t = Target::cpu_host(m);
  EXPECT_DOUBLE_EQ(t.dram_bandwidth, 30e9);
  EXPECT_DOUBLE_EQ(t.peak_flops, 500e9);
  EXPECT_DOUBLE_EQ(t.custom_call_overhead_s, 10e-6);
  EXPECT_EQ(t.parallel_units(), 8);
  EXPECT_DOUBLE_EQ(t.fma_peak_flops(), 8 * 8 * 2 * 2 * 3e9);
  HostMeasurements only_cores;
  only_cores.cores = 4;
  EXPECT_DOUBLE_EQ(Target::cpu_host(only_cores).dram_bandwidth, 21e9);
}

TEST(Target, GpuPresetsDifferWhereTheHardwareDoes) {
  const Target a = Target::a100(), h = Target::h100(), h2 = Target::h200();
  EXPECT_EQ(a.parallel_units(), 108);
  EXPECT_EQ(h.parallel_units(), 132);
  EXPECT_LT(a.shared_memory_per_block, h.shared_memory_per_block);
  EXPECT_LT(a.tensor_core_flops, h.tensor_core_flops);
  EXPECT_LT(h.dram_bandwidth, h2.dram_bandwidth);
  EXPECT_EQ(h.sms, h2.sms);
  EXPECT_DOUBLE_EQ(h.tensor_core_flops, h2.tensor_core_flops);
  EXPECT_EQ(h.shared_memory_per_block, h2.shared_memory_per_block);
}

TEST(Target, CheckNamesTheUnusableField) {
  Target t = Target::cpu_host();
  t.dram_bandwidth = 0;
  try {
    check_target(t);
    FAIL() << "zero bandwidth accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("dram_bandwidth"), std::string::npos) << e.what();
  }
  Target g = Target::a100();
  g.sms = 0;
  EXPECT_THROW(check_target(g), std::invalid_argument);
  Target c = Target::cpu_host();
  c.cores = 0;
  EXPECT_THROW(check_target(c), std::invalid_argument);
  c = Target::cpu_host();
  c.custom_call_overhead_s = -1;
  EXPECT_THROW(check_target(c), std::invalid_argument);
  c = Target::cpu_host();
  c.library_small_m_bandwidth = -1;
  try {
    check_target(c);
    FAIL() << "negative small-M bandwidth accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("library_small_m_bandwidth"), std::string::npos);
  }
  c = Target::cpu_host();
  c.split_stream_bandwidth = std::nan("");
  try {
    check_target(c);
    FAIL() << "NaN split-stream bandwidth accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("split_stream_bandwidth"), std::string::npos);
  }
}

}  // namespace
}  // namespace mj::cost
