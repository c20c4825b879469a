#include "estimate/measured.hpp"

#include <tuple>

namespace met::estimate {
namespace {

void attach(CaseEstimate& c, const std::string& device, const std::vector<MeasuredCase>& measured) {
  if (c.tp != 1 || c.digest.empty()) return;
  const bool prefill = c.mode == "prefill";
  const MeasuredCase* best = nullptr;
  for (const auto& m : measured) {
    if (m.hardware != device || m.plan_digest != c.digest || m.rows != c.rows || m.median_s <= 0) continue;
    if (prefill ? m.kind != "prefill" : (m.kind != "decode" || m.context != c.context)) continue;
    if (!best || std::tie(m.stamp, m.source) > std::tie(best->stamp, best->source)) best = &m;
  }
  if (!best) return;
  c.measured_s = best->median_s;
  c.measured_source = best->stamp.empty() ? best->source : best->source + ", " + best->stamp;
}

}  // namespace

void attach_measured(Analysis& an, const std::vector<MeasuredCase>& measured) {
  an.measured_asked = true;
  const std::string& device = an.device->id;
  attach(an.requested, device, measured);
  for (auto& c : an.decode) attach(c, device, measured);
  for (auto& c : an.prefill) attach(c, device, measured);
}

}  // namespace met::estimate
