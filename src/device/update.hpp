// Writing measured figures back into DEVICES.toml (`met circuit probe --update-devices`): one
// device's [device.measured] table and the [source.*] entry that cites them are rewritten as text;
// every other byte of the file stays as it was. Pure: text in, text out.
#pragma once

#include <string>

#include "core/expected.hpp"

namespace met::device {

// Figures `met circuit probe` measured, the GPU it measured them on (as its driver reported it)
// and the citation to write beside them.
struct ProbedFigures {
  std::string device;  // the registry id or alias the user named
  double read_gbs = 0, copy_gbs = 0, bf16_tflops = 0;
  int sm_count = 0;
  int compute_major = 0, compute_minor = 0;
  double memory_gib = 0;     // the driver's total memory, 2^30 bytes
  std::string source_title;  // names the command, the GPU and the date
  std::string source_url;    // the probe's record, e.g. perf-data/h200-sxm/probe/20261201T101500Z.json
};

// The key of the source the probe's figures of `device_id` cite: "met-h200-sxm-probe".
std::string probe_source_key(const std::string& device_id);

// Rewrites `text` (DEVICES.toml, named `file` in errors): the device's [device.measured] becomes
// read_gbs, copy_gbs and bf16 with cite = probe_source_key(id), inserted after its last table if
// it had none, and [source.<key>] is replaced or added after the last source. Refused, located:
// an unknown device; a GPU that is not that device (SM count, compute capability against its
// arch, memory within 5% of its visible_gib); a measured table holding a figure the probe does not
// measure (its cite would change under it); a result the registry would not load.
Expected<std::string> update_measured(const std::string& text, const std::string& file, const ProbedFigures& p);

}  // namespace met::device
