// Measured beside predicted: the step times campaigns measured (`met circuit run --campaign`,
// schema met-campaign/1) joined to the cases of an analysis they measured exactly. A campaign case
// matches a case when it ran on the same device, its program has the case's plan digest (a
// function of the program: groups, kernels, formats, shapes; src/planner/digest) and, for decode,
// the same context. Where several campaigns measured a case, the newest (stamp, then source) wins.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "estimate/analysis.hpp"

namespace met::estimate {

struct MeasuredCase {
  std::string hardware;     // device id the campaign ran on (its "hardware")
  std::string plan_digest;  // of the case's program
  std::string kind;         // decode | prefill
  std::int64_t rows = 0;    // C or T
  std::int64_t context = 0; // decode: cache length
  double median_s = 0;      // the case's median step
  std::string stamp;        // the campaign's stamp (orders campaigns)
  std::string source;       // the campaign file as named
};

// Sets measured_s / measured_source on every case of `an` (requested, decode and prefill
// ladders) that a case of `measured` matches; tensor-parallel cases never match (campaigns run
// on one GPU). Marks the analysis as asked, so reports say where nothing matched.
void attach_measured(Analysis& an, const std::vector<MeasuredCase>& measured);

}  // namespace met::estimate
