// Calibration: a class's measured figures (<class>/EVIDENCE.toml) fitted from the campaigns of a
// device (`met circuit run --campaign`, met-campaign/1), and the held-out check of that fit. Only a
// campaign case whose plan digest is the one the planner gives that case today counts; per model and
// case the newest such file wins. Per kernel family and step (decode at C, prefill at T) the fit
// solves measured = ceiling / efficiency + instructions x fixed time over the models that measured
// the step (docs/arch/planner.md, Estimates). Pure: the CLI reads the files and the configs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "model/graph.hpp"
#include "planner/library.hpp"

namespace met::estimate {

// One case of a campaign record, as read from its file.
struct CampaignCase {
  std::string source;    // the file as named (the citation)
  std::string stamp;     // the record's stamp (newest wins)
  std::string model;     // the record's model name (the key of the configs)
  std::string hardware;  // the device id it ran on
  std::string kind;      // decode | prefill
  std::int64_t rows = 0;     // C or T
  std::int64_t context = 0;  // decode: cache length
  double median_ms = 0;      // the step's median
  std::map<std::string, double> family_ms;  // in-kernel time per kernel family
  std::string plan_digest;   // of the program it ran ("" in records before digests)
};

// A family's share of one case as the planner costs it: the datasheet-basis ceiling its
// efficiency divides (fit_seconds, summed over groups and layers) and its instructions.
struct FamilyTerms {
  double ceiling_ms = 0;
  double instructions = 0;
};

// A campaign case that measured today's plan, beside the planner's terms for it.
struct Sample {
  CampaignCase measured;
  bool prefill = false;  // the evidence key: decode/batch at C, prefill at T
  std::map<std::string, FamilyTerms> families;
  double groups = 0;     // group instances of the step (the packet overhead's count)
};

struct FittedPoint {
  bool prefill = false;
  std::int64_t rows = 0;
  double efficiency = 1;
  double fixed_us = 0;
  std::vector<std::string> sources;  // the campaign files of the models it was fitted on, sorted
};

struct FamilyFit {
  std::string id;
  std::vector<FittedPoint> points;  // decode then prefill, rows ascending
};

struct Calibration {
  std::string klass, hardware;
  std::vector<FamilyFit> families;  // by id
  double packet_overhead_us = 0;
  std::vector<std::string> overhead_sources;
};

// "decode C=4 ctx=4096" / "prefill T=512".
std::string case_name(const CampaignCase& c);

// The cases of `campaigns` run on `target`'s device whose plan digest is today's for their model
// (a model without a graph in `models` is an error), newest per model and case, ordered by model,
// then decode before prefill, rows, context. `set_aside` (if given) counts the others.
Expected<std::vector<Sample>> sample_campaigns(const planner::Library& lib, const planner::Target& target,
                                               const std::map<std::string, model::ModelGraph>& models,
                                               const std::vector<CampaignCase>& campaigns, std::size_t* set_aside = nullptr);

// The fit per family and step, and the packet overhead per group, from the samples (pure math).
// Each point minimises the relative error over its models, with efficiency in (0, 1] and the fixed
// time >= 0; with one model the fixed time is 0.
Expected<Calibration> fit(const std::string& klass, const std::string& hardware, const std::vector<Sample>& samples);

// <class>/EVIDENCE.toml for a calibration; `command` is the line that regenerates it.
std::string render_evidence(const Calibration& cal, const std::string& command);

struct HeldOutRow {
  std::string model;
  std::string name;  // case_name
  double measured_ms = 0, predicted_ms = 0;
  std::string source;
};

// For every model of the samples: fit on the others, write that fit as the class's EVIDENCE.toml
// in a copy of the kernel tree, load it as the planner does and predict each of the model's cases
// through estimate_case (the report's prediction), beside what was measured.
Expected<std::vector<HeldOutRow>> held_out(const planner::Library& lib, const std::string& hardware,
                                           const std::map<std::string, model::ModelGraph>& models, const std::vector<Sample>& samples);

}  // namespace met::estimate
