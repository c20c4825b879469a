// Renderings of one built Analysis: Markdown for people, JSON (versioned schema, full precision,
// the basis of every number) for tools, and a self-contained HTML page with SVG charts. Render
// only: no planning or costing happens here.
#pragma once

#include <string>
#include <vector>

#include "estimate/analysis.hpp"

namespace met::report {

inline constexpr const char* kJsonSchema = "met-report/1";

struct Provenance {
  std::string command;  // the command line that regenerates this output
};

std::string render_markdown(const estimate::Analysis& an, const Provenance& prov);
std::string render_json(const estimate::Analysis& an, const Provenance& prov);
std::string render_html(const estimate::Analysis& an, const Provenance& prov);
// The fused plan only: one line per group, as `--format plan` prints it (the emitter's view).
std::string render_plan(const estimate::Analysis& an, const Provenance& prov);

}  // namespace met::report
