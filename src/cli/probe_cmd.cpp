// `met circuit probe`: measures the GPU met runs on (interp/probe: streaming read, copy, bf16
// tensor-core rate, each result checked), prints the table, writes the record (--json) and, with
// --update-devices, writes the figures into that device's [device.measured] of a DEVICES.toml
// (device/update). --from-json applies a record measured elsewhere (the device machine) here.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "cli/files.hpp"
#include "core/numfmt.hpp"
#include "core/strings.hpp"
#include "device/identity.hpp"
#include "device/update.hpp"
#include "interp/probe.hpp"
#include "tree/disk_tree.hpp"

namespace met::cli {

namespace {

constexpr double kGiB = 1073741824.0;

struct ProbeArgs {
  int gib = 8;
  int warmup = 3, repeats = 20, mma_iters = 8192;
  std::string json, from_json, hardware, update_devices;
  bool identify = false;
};

// The command that measured, as the record and the citation name it (where the record went is
// not part of the measurement).
std::string command_of(const ProbeArgs& a) {
  return fmt::format("met circuit probe --gib {} --warmup {} --repeats {} --mma-iters {}", a.gib, a.warmup, a.repeats, a.mma_iters);
}

// "20261201T101500Z" -> "2026-12-01 10:15 UTC".
std::string date_of(const std::string& stamp) {
  return fmt::format("{}-{}-{} {}:{} UTC", stamp.substr(0, 4), stamp.substr(4, 2), stamp.substr(6, 2), stamp.substr(9, 2), stamp.substr(11, 2));
}

// The measured figures beside the registry's datasheet ones for the named device.
void print_shares(const planner::Library& lib, const std::string& hardware, const interp::ProbeRecord& r) {
  const device::Device* d = lib.registry.resolve(hardware);
  if (!d) return;
  auto share = [](double measured, double sheet) { return sheet > 0 ? fmt_fixed(100.0 * measured / sheet, 1) + "%" : std::string("-"); };
  const auto bf16 = d->peaks.find("bf16");
  const double sheet_bf16 = bf16 == d->peaks.end() ? 0.0 : bf16->second;
  std::printf("\nagainst the datasheet of %s: read %s of %s GB/s, copy %s of %s GB/s, bf16 %s of %s TFLOP/s\n", d->id.c_str(),
              share(r.read_gbs, d->bandwidth_gbs).c_str(), fmt_sig(d->bandwidth_gbs, 4).c_str(), share(r.copy_gbs, d->bandwidth_gbs).c_str(),
              fmt_sig(d->bandwidth_gbs, 4).c_str(), share(r.bf16_tflops, sheet_bf16).c_str(), fmt_sig(sheet_bf16, 4).c_str());
}

// --identify: the registry device of every GPU the driver sees, one id per line on stdout (what
// `met circuit emit --hardware` takes), each GPU as the driver reports it on stderr. A GPU that no
// device, or more than one, matches is an error naming what the driver reported.
int identify(const planner::Library& lib) {
  auto gpus = interp::query_gpus();
  if (!gpus) return error(gpus.error().message);
  if (gpus->empty()) return error("probe --identify: the driver sees no GPU");
  int rc = 0;
  for (std::size_t i = 0; i < gpus->size(); ++i) {
    const auto& g = (*gpus)[i];
    const auto id = device::gpu_identity(g.name, g.sms, g.compute_major, g.compute_minor, static_cast<double>(g.total_bytes));
    const auto ids = device::devices_matching(lib.registry, id);
    if (ids.size() != 1) {
      rc = error(fmt::format("probe --identify: GPU {}, {}, matches {} devices of the registry{} (a device matches by SM count, compute "
                             "capability and visible_gib within 5%)",
                             i, device::describe(id), ids.size(), ids.empty() ? "" : ": " + join(ids, ", ")));
      continue;
    }
    std::fprintf(stderr, "probe: GPU %zu, %s: %s\n", i, device::describe(id).c_str(), ids[0].c_str());
    std::printf("%s\n", ids[0].c_str());
  }
  return rc;
}

int run_probe_cmd(const LibraryFn& library, const ProbeArgs& a) {
  if (a.identify) {
    if (!a.json.empty() || !a.from_json.empty() || !a.update_devices.empty() || !a.hardware.empty())
      return error("--identify measures nothing: give it alone");
    const planner::Library* lib = library();
    return lib ? identify(*lib) : 1;
  }
  if (!a.update_devices.empty() && a.hardware.empty())
    return error("--update-devices needs --hardware: the registry device this GPU is (see `met circuit devices`)");
  if (!a.update_devices.empty() && a.json.empty() && a.from_json.empty())
    return error("--update-devices needs --json FILE or --from-json FILE: the citation points at the probe's record");
  if (!a.from_json.empty() && !a.json.empty()) return error("--from-json reads a record; --json writes one: give one of them");
  if (a.gib < 1) return error("--gib: the read buffer must be at least 1 GiB");

  nlohmann::json record;
  std::string record_path = a.json;
  if (!a.from_json.empty()) {
    auto text = read_file(a.from_json);
    if (!text) return error(text.error().message);
    record = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded()) return error(a.from_json + ": not JSON");
    record_path = a.from_json;
  } else {
    interp::ProbeOptions o;
    o.read_bytes = static_cast<std::uint64_t>(a.gib) << 30;
    o.warmup = a.warmup;
    o.repeats = a.repeats;
    o.mma_iters = a.mma_iters;
    auto measured = interp::run_probe(o);
    if (!measured) return error(measured.error().message);
    record = std::move(measured).value();
    record["command"] = command_of(a);
  }
  auto r = interp::read_probe_record(record, a.from_json.empty() ? "probe record" : a.from_json);
  if (!r) return error(r.error().message);
  std::fputs(interp::probe_markdown(record).c_str(), stdout);
  if (!a.hardware.empty()) {
    const planner::Library* lib = library();
    if (!lib) return 1;
    print_shares(*lib, a.hardware, *r);
  }
  if (!a.json.empty()) {
    if (auto w = write_atomic(a.json, record.dump(2) + "\n"); !w) return error(w.error().message);
    std::fprintf(stderr, "probe: wrote %s\n", a.json.c_str());
  }
  if (!a.update_devices.empty()) {
    auto text = read_file(a.update_devices);
    if (!text) return error(text.error().message);
    device::ProbedFigures p;
    p.device = a.hardware;
    p.read_gbs = r->read_gbs;
    p.copy_gbs = r->copy_gbs;
    p.bf16_tflops = r->bf16_tflops;
    p.sm_count = r->sm_count;
    p.compute_major = r->compute_major;
    p.compute_minor = r->compute_minor;
    p.memory_gib = r->memory_bytes / kGiB;
    p.source_title = fmt::format("`{}` on {} ({} SMs), {}: read {} GB/s, copy {} GB/s (read + written), bf16 {} TFLOP/s", r->command,
                                 r->device, r->sm_count, date_of(r->stamp), fmt_sig(r->read_gbs, 4), fmt_sig(r->copy_gbs, 4),
                                 fmt_sig(r->bf16_tflops, 4));
    p.source_url = record_path;
    auto updated = device::update_measured(*text, a.update_devices, p);
    if (!updated) return error(updated.error().message);
    if (auto w = write_atomic(a.update_devices, *updated); !w) return error(w.error().message);
    std::fprintf(stderr, "probe: wrote %s: the measured figures of %s and their source\n", a.update_devices.c_str(), a.hardware.c_str());
  }
  return 0;
}

}  // namespace

void add_probe_command(CLI::App& circuit, const LibraryFn& library, std::vector<Command>& out) {
  auto a = std::make_shared<ProbeArgs>();
  auto* probe = circuit.add_subcommand(
      "probe", "measure this GPU: streaming read, copy and bf16 tensor-core rates (met's own kernels, every result checked)");
  probe->add_option("--json", a->json, "write the record (device, every run, figures) to FILE");
  probe->add_option("--from-json", a->from_json, "use a record written by an earlier probe instead of measuring (no GPU needed)");
  probe->add_option("--hardware", a->hardware, "the registry device this GPU is: compares with its datasheet; needed by --update-devices");
  probe->add_option("--update-devices", a->update_devices,
                    "write the figures into --hardware's [device.measured] of this DEVICES.toml, cited to the record; "
                    "nothing else in the file changes");
  probe->add_flag("--identify", a->identify,
                  "print the registry device of each GPU the driver sees (the id emit's --hardware takes), measuring nothing");
  probe->add_option("--gib", a->gib, "read buffer in GiB (copies move half of it each way); far beyond L2")->capture_default_str();
  probe->add_option("--warmup", a->warmup, "untimed runs of each test")->capture_default_str();
  probe->add_option("--repeats", a->repeats, "timed runs of each test (median, p10, p90)")->capture_default_str();
  probe->add_option("--mma-iters", a->mma_iters, "tensor-core loop iterations per launch (4 wgmma each)")->capture_default_str();
  out.push_back({probe, [library, a] { return run_probe_cmd(library, *a); }});
}

}  // namespace met::cli
