#include "interp/probe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <functional>
#include <vector>

#include "core/numfmt.hpp"
#include "interp/cuda_driver.hpp"
#include "kernels/hopper/probe.h"

namespace met::interp {

namespace {

using u64 = std::uint64_t;
constexpr double kGB = 1e9;
constexpr double kTera = 1e12;
constexpr double kGiB = 1073741824.0;
constexpr u64 kWord = 16;                 // the streaming kernels move 16-byte words
constexpr u64 kSlackBytes = 1ull << 30;   // left free beside the probe's buffers
constexpr int kMmaCheckIters = 3;         // the exact check's launch: every sum below 2^10
constexpr double kMmaTolerance = 1e-5;    // relative, for the timed launches' sums (below 2^22)
constexpr int kMmaWarpgroups[] = {1, 2, MET_PROBE_MMA_MAX_WARPGROUPS};

// The sum of the 32-bit words [0, n) that metprobe_fill writes (word w holds w mod 2^32), mod 2^64.
u64 filled_sum_below(u64 n) {
  const u64 cycles = n >> 32, r = n & 0xffffffffu;
  const u64 cycle_sum = (u64{1} << 31) * 0xffffffffu;  // 0 + 1 + ... + (2^32 - 1)
  return cycles * cycle_sum + r * (r - 1) / 2;         // r (r - 1) < 2^64 and even
}

struct Summary {
  double median = 0, p10 = 0, p90 = 0, min = 0;
};
Summary summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) { return ms[static_cast<std::size_t>(std::lround(q * static_cast<double>(ms.size() - 1)))]; };
  return {at(0.5), at(0.1), at(0.9), ms.front()};
}

// The device, its context, the loaded probe image and everything allocated, released in reverse.
struct Gpu {
  const cu::Api* api = nullptr;
  cu::Device dev = 0;
  cu::Context ctx = nullptr;
  cu::Module mod = nullptr;
  cu::Stream stream = nullptr;
  cu::Event ev0 = nullptr, ev1 = nullptr;
  std::vector<cu::DevicePtr> allocs;
  int sms = 0;

  Gpu() = default;
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;
  ~Gpu() {
    if (!api) return;
    if (ctx) api->CtxSetCurrent(ctx);  // best effort: a destructor cannot report
    for (auto p : allocs) api->MemFree(p);
    if (ev0) api->EventDestroy(ev0);
    if (ev1) api->EventDestroy(ev1);
    if (stream) api->StreamDestroy(stream);
    if (mod) api->ModuleUnload(mod);
    if (ctx) api->DevicePrimaryCtxRelease(dev);
  }

  Expected<cu::DevicePtr> alloc(u64 bytes) {
    cu::DevicePtr p = 0;
    MET_CU(*api, MemAlloc(&p, bytes));
    allocs.push_back(p);
    return p;
  }
  Expected<cu::Function> function(const char* name) {
    cu::Function f = nullptr;
    MET_CU(*api, ModuleGetFunction(&f, mod, name));
    return f;
  }
  Expected<void> launch(cu::Function f, unsigned grid, unsigned block, unsigned smem, std::vector<void*> args) {
    MET_CU(*api, LaunchKernel(f, grid, 1, 1, block, 1, 1, smem, stream, args.data(), nullptr));
    return {};
  }
  // Blocks of `threads` that fit on one SM with `smem` bytes of dynamic shared memory.
  Expected<int> blocks_per_sm(cu::Function f, int threads, unsigned smem) {
    int n = 0;
    MET_CU(*api, OccupancyMaxActiveBlocksPerMultiprocessor(&n, f, threads, smem));
    if (n < 1) return fail(fmt::format("probe: a block of {} threads and {} bytes of shared memory does not fit on one SM", threads, smem));
    return n;
  }
  Expected<u64> read_u64(cu::DevicePtr p) {
    u64 v = 0;
    MET_CU(*api, MemcpyDtoH(&v, p, sizeof v));
    return v;
  }
  // Runs `run` warmup + repeats times between two events; `check` follows each run (and may
  // queue work for the next). Returns the timed milliseconds of the repeats.
  Expected<std::vector<double>> time_runs(const ProbeOptions& o, const std::function<Expected<void>()>& run,
                                          const std::function<Expected<void>()>& check) {
    std::vector<double> ms;
    for (int r = 0; r < o.warmup + o.repeats; ++r) {
      MET_CU(*api, EventRecord(ev0, stream));
      MET_CHECK(run());
      MET_CU(*api, EventRecord(ev1, stream));
      MET_CU(*api, EventSynchronize(ev1));
      float t = 0;
      MET_CU(*api, EventElapsedTime(&t, ev0, ev1));
      MET_CHECK(check());
      if (r >= o.warmup) ms.push_back(t);
    }
    return ms;
  }
};

std::string launch_shape(unsigned grid, unsigned block) { return fmt::format("{} x {}", grid, block); }

nlohmann::json test_json(const std::string& test, const std::string& kernel, const std::string& launch, const char* work_key,
                         double work, const std::vector<double>& ms, double rate, const std::string& unit, const std::string& check) {
  const Summary s = summarize(ms);
  return {{"test", test},     {"kernel", kernel},
          {"launch", launch}, {work_key, work},
          {"samples_ms", ms}, {"ms", {{"median", s.median}, {"p10", s.p10}, {"p90", s.p90}, {"min", s.min}}},
          {"rate", rate},     {"unit", unit},
          {"check", check}};
}

// The streaming tests: reads of the whole buffer (every run's sum checked), a copy kernel and the
// driver's copy of half of it (the destination's sum checked after the runs).
Expected<void> stream_tests(Gpu& g, const ProbeOptions& o, nlohmann::json& tests) {
  const cu::Api& api = *g.api;
  const u64 n16 = o.read_bytes / kWord, half16 = n16 / 2, half_bytes = half16 * kWord;
  MET_TRY(cu::DevicePtr src, g.alloc(o.read_bytes));
  MET_TRY(cu::DevicePtr dst, g.alloc(half_bytes));
  MET_TRY(cu::DevicePtr total, g.alloc(sizeof(u64)));
  const unsigned threads = MET_PROBE_STREAM_THREADS;
  MET_TRY(cu::Function fill, g.function("metprobe_fill"));
  {
    u64 n = n16;
    MET_CHECK(g.launch(fill, static_cast<unsigned>(g.sms * 4), threads, 0, {&src, &n}));
    MET_CU(api, StreamSynchronize(g.stream));
  }
  const u64 words = n16 * 4;
  // Sums `bytes` at p with the read kernel `f` and compares with `want`.
  auto checked_sum = [&](cu::Function f, unsigned grid, cu::DevicePtr p, u64 count16, u64 want, const std::string& what) -> Expected<void> {
    MET_CU(api, MemsetD32Async(total, 0, 2, g.stream));
    MET_CHECK(g.launch(f, grid, threads, 0, {&p, &count16, &total}));
    MET_CU(api, StreamSynchronize(g.stream));
    MET_TRY(u64 got, g.read_u64(total));
    if (got != want)
      return fail(fmt::format("probe: {}: the words sum to {:#x}, not {:#x}: the kernel read or wrote the wrong bytes", what, got, want));
    return {};
  };

  cu::Function verify = nullptr;
  unsigned verify_grid = 0;
  for (const char* name : {"metprobe_read_u4", "metprobe_read_u8", "metprobe_read_u8_l2"}) {
    MET_TRY(cu::Function f, g.function(name));
    MET_TRY(int per_sm, g.blocks_per_sm(f, static_cast<int>(threads), 0));
    const unsigned grid = static_cast<unsigned>(per_sm * g.sms);
    if (!verify) {  // the copies' destinations are checked with the first variant
      verify = f;
      verify_grid = grid;
    }
    const u64 want = probe_filled_sum(0, words);
    MET_CU(api, MemsetD32Async(total, 0, 2, g.stream));
    u64 n = n16;
    const auto run = [&]() { return g.launch(f, grid, threads, 0, {&src, &n, &total}); };
    const auto check = [&]() -> Expected<void> {  // and zero the total for the next run
      MET_TRY(u64 got, g.read_u64(total));
      if (got != want)
        return fail(fmt::format("probe: {} summed {:#x} over {} words, not {:#x}: the kernel read the wrong bytes", name, got, words, want));
      MET_CU(api, MemsetD32Async(total, 0, 2, g.stream));
      return {};
    };
    MET_TRY(auto ms, g.time_runs(o, run, check));
    const double gbs = static_cast<double>(o.read_bytes) / (summarize(ms).median * 1e-3) / kGB;
    tests.push_back(test_json("read", name, launch_shape(grid, threads), "bytes", static_cast<double>(o.read_bytes), ms, gbs,
                              "GB/s", fmt::format("sum of all {} words, every run", words)));
  }

  // Copies count the bytes read and the bytes written; their destination is checked after the runs.
  const auto no_check = []() -> Expected<void> { return {}; };
  const double copy_bytes = 2.0 * static_cast<double>(half_bytes);
  {
    MET_TRY(cu::Function f, g.function("metprobe_copy"));
    MET_TRY(int per_sm, g.blocks_per_sm(f, static_cast<int>(threads), 0));
    const unsigned grid = static_cast<unsigned>(per_sm * g.sms);
    MET_CU(api, MemsetD8(dst, 0, half_bytes));
    u64 n = half16;
    const auto run = [&]() { return g.launch(f, grid, threads, 0, {&src, &dst, &n}); };
    MET_TRY(auto ms, g.time_runs(o, run, no_check));
    MET_CHECK(checked_sum(verify, verify_grid, dst, half16, probe_filled_sum(0, words / 2), "metprobe_copy's destination"));
    tests.push_back(test_json("copy", "metprobe_copy", launch_shape(grid, threads), "bytes", copy_bytes, ms,
                              copy_bytes / (summarize(ms).median * 1e-3) / kGB, "GB/s", "sum of the destination after the runs"));
  }
  {
    const cu::DevicePtr upper = src + half_bytes;  // the other half, so this check is not the kernel's
    MET_CU(api, MemsetD8(dst, 0, half_bytes));
    const auto run = [&]() -> Expected<void> {
      MET_CU(api, MemcpyDtoDAsync(dst, upper, half_bytes, g.stream));
      return {};
    };
    MET_TRY(auto ms, g.time_runs(o, run, no_check));
    MET_CHECK(checked_sum(verify, verify_grid, dst, half16, probe_filled_sum(words / 2, words), "cuMemcpyDtoDAsync's destination"));
    tests.push_back(test_json("copy", "cuMemcpyDtoDAsync", "driver", "bytes", copy_bytes, ms,
                              copy_bytes / (summarize(ms).median * 1e-3) / kGB, "GB/s", "sum of the destination after the runs"));
  }
  return {};
}

// The tensor-core test: one block per SM of 1, 2 or 3 warpgroups. A short launch is checked
// exactly, then every timed launch's product is checked against iters * A * B^T.
Expected<void> mma_tests(Gpu& g, const ProbeOptions& o, nlohmann::json& tests) {
  const cu::Api& api = *g.api;
  MET_TRY(cu::Function f, g.function("metprobe_wgmma"));
  // A * B^T of the tile, computed here from the same values the kernel writes to shared memory.
  std::vector<double> ref(static_cast<std::size_t>(MET_PROBE_MMA_M) * MET_PROBE_MMA_N);
  for (int m = 0; m < MET_PROBE_MMA_M; ++m)
    for (int n = 0; n < MET_PROBE_MMA_N; ++n) {
      int s = 0;
      for (int k = 0; k < MET_PROBE_MMA_K; ++k) s += met_probe_a(m, k) * met_probe_b(n, k);
      ref[static_cast<std::size_t>(m) * MET_PROBE_MMA_N + n] = s;
    }
  const std::size_t tile = ref.size();
  const int max_wg = MET_PROBE_MMA_MAX_WARPGROUPS;
  MET_TRY(cu::DevicePtr out, g.alloc(static_cast<u64>(g.sms) * max_wg * tile * sizeof(float)));
  std::vector<float> host(static_cast<std::size_t>(g.sms) * max_wg * tile);
  const unsigned smem = MET_PROBE_MMA_SMEM;
  for (int wg : kMmaWarpgroups) {
    const unsigned threads = static_cast<unsigned>(wg * MET_PROBE_WARPGROUP);
    MET_CHECK(g.blocks_per_sm(f, static_cast<int>(threads), smem));  // one block per SM is measured
    const unsigned grid = static_cast<unsigned>(g.sms);
    const std::size_t n_out = static_cast<std::size_t>(grid) * wg * tile;
    auto check = [&](int iters, double tolerance) -> Expected<void> {
      MET_CU(api, MemcpyDtoH(host.data(), out, n_out * sizeof(float)));
      for (std::size_t i = 0; i < n_out; ++i) {
        const double want = iters * ref[i % tile], got = host[i];
        if (!(std::fabs(got - want) <= tolerance * std::fabs(want))) {
          const std::size_t e = i % tile, w = i / tile;
          return fail(fmt::format("probe: metprobe_wgmma ({} warpgroups, {} iterations): block {} warpgroup {} element (row {}, "
                                  "column {}) is {}, not {}: the wgmma operands, descriptors or accumulator layout are wrong",
                                  wg, iters, w / static_cast<std::size_t>(wg), w % static_cast<std::size_t>(wg),
                                  e / MET_PROBE_MMA_N, e % MET_PROBE_MMA_N, fmt_exact(got), fmt_exact(want)));
        }
      }
      return {};
    };
    int iters = kMmaCheckIters;
    MET_CU(api, MemsetD8(out, 0, n_out * sizeof(float)));
    MET_CHECK(g.launch(f, grid, threads, smem, {&out, &iters}));
    MET_CU(api, StreamSynchronize(g.stream));
    MET_CHECK(check(iters, 0.0));
    iters = o.mma_iters;
    const auto run = [&]() { return g.launch(f, grid, threads, smem, {&out, &iters}); };
    const auto check_run = [&]() { return check(iters, kMmaTolerance); };
    MET_TRY(auto ms, g.time_runs(o, run, check_run));
    const double flops = static_cast<double>(grid) * wg * iters * (MET_PROBE_MMA_K / MET_PROBE_MMA_KSTEP) * MET_PROBE_WGMMA_FLOPS;
    tests.push_back(test_json("bf16", fmt::format("metprobe_wgmma, {} warpgroup{}", wg, wg == 1 ? "" : "s"),
                              launch_shape(grid, threads), "flops", flops, ms, flops / (summarize(ms).median * 1e-3) / kTera,
                              "TFLOP/s",
                              fmt::format("every element of {} products of 64 x 256, every run", static_cast<std::size_t>(grid) * wg)));
  }
  return {};
}

double best(const nlohmann::json& tests, const std::string& test) {
  double b = 0;
  for (const auto& t : tests)
    if (t["test"] == test) b = std::max(b, t["rate"].get<double>());
  return b;
}

}  // namespace

Expected<nlohmann::json> run_probe(const ProbeOptions& o) {
  if (o.read_bytes < (u64{1} << 30) || o.read_bytes % (2 * kWord) != 0)
    return fail("probe: the read buffer must be at least 1 GiB (far beyond L2) and a multiple of 32 bytes");
  if (o.warmup < 0 || o.repeats < 1 || o.mma_iters < 1) return fail("probe: warm-up must be >= 0, repeats and iterations >= 1");
  const InterpImage image = probe_image();
  if (image.size == 0)
    return fail("cuda: this met was built without nvcc, so it carries no probe kernels; rebuild where nvcc is on PATH");
  Gpu g;
  MET_TRY(g.api, cu::api());
  const cu::Api& api = *g.api;
  int count = 0;
  MET_CU(api, DeviceGetCount(&count));
  if (count < 1) return fail("cuda: the driver sees no GPU");
  MET_CU(api, DeviceGet(&g.dev, 0));
  char name[256] = {};
  MET_CU(api, DeviceGetName(name, sizeof name, g.dev));
  int major = 0, minor = 0, driver = 0;
  std::size_t total_mem = 0;
  MET_CU(api, DeviceGetAttribute(&major, cu::kAttrComputeMajor, g.dev));
  MET_CU(api, DeviceGetAttribute(&minor, cu::kAttrComputeMinor, g.dev));
  MET_CU(api, DeviceGetAttribute(&g.sms, cu::kAttrMultiprocessorCount, g.dev));
  MET_CU(api, DeviceTotalMem(&total_mem, g.dev));
  MET_CU(api, DriverGetVersion(&driver));
  if (major != 9 || minor != 0)
    return fail(fmt::format("cuda: {} is compute capability {}.{}; the probe's kernels are built for sm_90a", name, major, minor));
  MET_CU(api, DevicePrimaryCtxRetain(&g.ctx, g.dev));
  MET_CU(api, CtxSetCurrent(g.ctx));
  MET_CU(api, ModuleLoadData(&g.mod, image.data));
  MET_CU(api, StreamCreate(&g.stream, 0));
  MET_CU(api, EventCreate(&g.ev0, 0));
  MET_CU(api, EventCreate(&g.ev1, 0));
  std::size_t free_mem = 0, all_mem = 0;
  MET_CU(api, MemGetInfo(&free_mem, &all_mem));
  const u64 need = o.read_bytes + o.read_bytes / 2 + kSlackBytes;
  if (free_mem < need)
    return fail(fmt::format("probe: {} has {} GiB free; the probe needs {} GiB (--gib sets the read buffer)", name,
                            fmt_fixed(static_cast<double>(free_mem) / kGiB, 1), fmt_fixed(static_cast<double>(need) / kGiB, 1)));

  nlohmann::json j;
  j["schema"] = "met-probe/1";
  j["device"] = {{"name", name},
                 {"sm_count", g.sms},
                 {"compute", fmt::format("{}.{}", major, minor)},
                 {"memory_bytes", static_cast<double>(total_mem)},
                 {"driver_version", driver}};
  // Clock and bus figures are informational; a driver that no longer reports one leaves it out.
  int clock_khz = 0, mem_khz = 0, bus_bits = 0;
  if (api.DeviceGetAttribute(&clock_khz, cu::kAttrClockRate, g.dev) == 0 && clock_khz > 0) j["device"]["sm_clock_mhz"] = clock_khz / 1000;
  if (api.DeviceGetAttribute(&mem_khz, cu::kAttrMemoryClockRate, g.dev) == 0 &&
      api.DeviceGetAttribute(&bus_bits, cu::kAttrGlobalMemoryBusWidth, g.dev) == 0 && mem_khz > 0 && bus_bits > 0)
    j["device"]["dram_peak_gbs"] = 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) / kGB;  // double data rate
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&now));
  j["stamp"] = stamp;
  j["options"] = {{"read_bytes", static_cast<double>(o.read_bytes)}, {"warmup", o.warmup}, {"repeats", o.repeats}, {"mma_iters", o.mma_iters}};
  j["tests"] = nlohmann::json::array();
  MET_CHECK(stream_tests(g, o, j["tests"]));
  MET_CHECK(mma_tests(g, o, j["tests"]));
  j["figures"] = {{"read_gbs", best(j["tests"], "read")}, {"copy_gbs", best(j["tests"], "copy")}, {"bf16_tflops", best(j["tests"], "bf16")}};
  return j;
}

Expected<ProbeRecord> read_probe_record(const nlohmann::json& j, const std::string& where) {
  auto bad = [&](const std::string& what) { return fail(where + ": " + what); };
  if (!j.is_object() || j.value("schema", "") != "met-probe/1") return bad("not a probe record (schema met-probe/1)");
  ProbeRecord r;
  try {
    const auto& d = j.at("device");
    r.device = d.at("name").get<std::string>();
    r.sm_count = d.at("sm_count").get<int>();
    const std::string cc = d.at("compute").get<std::string>();
    if (std::sscanf(cc.c_str(), "%d.%d", &r.compute_major, &r.compute_minor) != 2) return bad("device.compute '" + cc + "' is not MAJOR.MINOR");
    r.memory_bytes = d.at("memory_bytes").get<double>();
    r.stamp = j.at("stamp").get<std::string>();
    r.command = j.at("command").get<std::string>();
    const auto& f = j.at("figures");
    r.read_gbs = f.at("read_gbs").get<double>();
    r.copy_gbs = f.at("copy_gbs").get<double>();
    r.bf16_tflops = f.at("bf16_tflops").get<double>();
  } catch (const nlohmann::json::exception& e) {
    return bad(std::string("missing or mistyped field: ") + e.what());
  }
  if (!(r.read_gbs > 0 && r.copy_gbs > 0 && r.bf16_tflops > 0)) return bad("figures must be positive");
  if (r.sm_count < 1 || !(r.memory_bytes > 0)) return bad("device.sm_count and device.memory_bytes must be positive");
  if (r.stamp.size() != 16 || r.stamp[8] != 'T' || r.stamp.back() != 'Z') return bad("stamp '" + r.stamp + "' is not YYYYMMDDTHHMMSSZ");
  return r;
}

std::uint64_t probe_filled_sum(std::uint64_t first_word, std::uint64_t end_word) {
  return filled_sum_below(end_word) - filled_sum_below(first_word);
}

std::string probe_markdown(const nlohmann::json& j) {
  const auto& d = j["device"];
  std::string s = fmt::format("met circuit probe: {}, {} SMs, compute {}, {} GiB, driver {}.{}", d.value("name", "?"), d.value("sm_count", 0),
                              d.value("compute", "?"), fmt_fixed(d.value("memory_bytes", 0.0) / kGiB, 1),
                              d.value("driver_version", 0) / 1000, d.value("driver_version", 0) % 1000 / 10);
  if (d.contains("sm_clock_mhz")) s += fmt::format(", SM clock up to {} MHz", d["sm_clock_mhz"].get<int>());
  if (d.contains("dram_peak_gbs"))
    s += fmt::format(", DRAM {} GB/s by the driver's memory clock and bus width", fmt_sig(d["dram_peak_gbs"].get<double>(), 4));
  const auto& o = j["options"];
  s += fmt::format("\nstamp {}; read buffer {} GiB; warm-up {}, repeats {}; tensor-core launches of {} iterations\n\n", j.value("stamp", "?"),
                   fmt_exact(o.value("read_bytes", 0.0) / kGiB), o.value("warmup", 0), o.value("repeats", 0), o.value("mma_iters", 0));
  s += "| test | kernel | grid x block | per run | median ms | p10 | p90 | rate | checked |\n";
  s += "|---|---|---|---:|---:|---:|---:|---:|---|\n";
  for (const auto& t : j["tests"]) {
    const bool flops = t.contains("flops");
    const std::string work = flops ? fmt::format("{} TFLOP", fmt_sig(t["flops"].get<double>() / kTera, 4))
                                   : fmt::format("{} GB", fmt_sig(t["bytes"].get<double>() / kGB, 4));
    s += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} {} | {} |\n", t["test"].get<std::string>(), t["kernel"].get<std::string>(),
                     t["launch"].get<std::string>(), work, fmt_fixed(t["ms"]["median"].get<double>(), 3),
                     fmt_fixed(t["ms"]["p10"].get<double>(), 3), fmt_fixed(t["ms"]["p90"].get<double>(), 3),
                     fmt_sig(t["rate"].get<double>(), 4), t["unit"].get<std::string>(), t["check"].get<std::string>());
  }
  const auto& f = j["figures"];
  s += fmt::format("\nfigures (best of each test): read {} GB/s, copy {} GB/s (read + written), bf16 {} TFLOP/s\n",
                   fmt_sig(f["read_gbs"].get<double>(), 4), fmt_sig(f["copy_gbs"].get<double>(), 4), fmt_sig(f["bf16_tflops"].get<double>(), 4));
  return s;
}

}  // namespace met::interp
