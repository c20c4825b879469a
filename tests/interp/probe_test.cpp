// Tests of the device probe's host side (src/interp/probe.cpp) that need no GPU: the sums every
// read run is checked against, the exactness the tensor-core check relies on, reading records.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "interp/probe.hpp"
#include "kernels/hopper/probe.h"

using met::interp::probe_filled_sum;

TEST_CASE("the read check's sum equals adding the filled words one by one") {
  for (std::uint64_t first : {0ull, 1ull, 7ull, 1000ull}) {
    for (std::uint64_t end : {first, first + 1, first + 2, first + 4097}) {
      std::uint64_t s = 0;
      for (std::uint64_t w = first; w < end; ++w) s += w & 0xffffffffu;
      CHECK_MESSAGE(probe_filled_sum(first, end) == s, first << ".." << end);
    }
  }
}

TEST_CASE("the read check's sum wraps words at 2^32 as the fill kernel writes them") {
  const std::uint64_t k = 1ull << 32;
  // Words 2^32 - 2, 2^32 - 1, then 0 and 1 again.
  CHECK(probe_filled_sum(k - 2, k + 2) == (k - 2) + (k - 1) + 0 + 1);
  // A whole cycle sums to 2^31 (2^32 - 1), wherever it starts.
  CHECK(probe_filled_sum(5, k + 5) == (k / 2) * (k - 1));
  // The 8 GiB default buffer: 2^31 words.
  CHECK(probe_filled_sum(0, 1ull << 31) == (1ull << 30) * ((1ull << 31) - 1));
}

TEST_CASE("the tensor-core products stay exact in fp32 at the default iterations, so the check can demand equality") {
  int worst = 0;
  for (int m = 0; m < MET_PROBE_MMA_M; ++m)
    for (int n = 0; n < MET_PROBE_MMA_N; ++n) {
      int s = 0;
      for (int k = 0; k < MET_PROBE_MMA_K; ++k) s += met_probe_a(m, k) * met_probe_b(n, k);
      worst = std::max(worst, std::abs(s));
    }
  CHECK(worst > 0);
  CHECK(static_cast<long long>(worst) * met::interp::ProbeOptions{}.mma_iters < (1ll << 24));
}

TEST_CASE("the operand values use all of [-2, 2] and differ between A and B, so a swapped or misplaced operand shows") {
  int seen[5] = {};
  int same = 0;
  for (int k = 0; k < MET_PROBE_MMA_K; ++k)
    for (int r = 0; r < MET_PROBE_MMA_M; ++r) {
      ++seen[met_probe_a(r, k) + 2];
      same += met_probe_a(r, k) == met_probe_b(r, k);
    }
  for (int v : seen) CHECK(v > 0);
  CHECK(same < MET_PROBE_MMA_M * MET_PROBE_MMA_K / 2);
}

TEST_CASE("a probe record is read only when complete and positive") {
  nlohmann::json j = {{"schema", "met-probe/1"},
                      {"device", {{"name", "NVIDIA H200"}, {"sm_count", 132}, {"compute", "9.0"}, {"memory_bytes", 150109880320.0}}},
                      {"stamp", "20261201T101500Z"},
                      {"command", "met circuit probe"},
                      {"figures", {{"read_gbs", 4300.0}, {"copy_gbs", 4100.0}, {"bf16_tflops", 820.0}}}};
  auto ok = met::interp::read_probe_record(j, "r.json");
  REQUIRE(ok.ok());
  CHECK(ok->compute_major == 9);
  CHECK(ok->compute_minor == 0);
  CHECK(ok->bf16_tflops == 820.0);
  SUBCASE("another schema") {
    j["schema"] = "met-campaign/1";
    CHECK(met::interp::read_probe_record(j, "r.json").error().message == "r.json: not a probe record (schema met-probe/1)");
  }
  SUBCASE("a missing figure") {
    j["figures"].erase("copy_gbs");
    CHECK(met::interp::read_probe_record(j, "r.json").error().message.rfind("r.json: missing or mistyped field", 0) == 0);
  }
  SUBCASE("a zero figure") {
    j["figures"]["read_gbs"] = 0.0;
    CHECK(met::interp::read_probe_record(j, "r.json").error().message == "r.json: figures must be positive");
  }
  SUBCASE("a stamp that is not UTC") {
    j["stamp"] = "2026-12-01";
    CHECK(met::interp::read_probe_record(j, "r.json").error().message.find("is not YYYYMMDDTHHMMSSZ") != std::string::npos);
  }
}
