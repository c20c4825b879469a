#include "report/text.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/numfmt.hpp"
#include "core/strings.hpp"

namespace met::report {

std::string ms(double seconds) {
  if (std::isinf(seconds)) return "n/a";
  return fmt_sig(seconds * 1e3, 4) + " ms";
}
std::string us(double seconds) { return fmt_sig(seconds * 1e6, 3) + " µs"; }
std::string dur(double seconds) {
  if (std::isinf(seconds)) return "n/a";
  const double a = std::fabs(seconds);
  if (a == 0) return "0 s";
  if (a >= 1) return fmt_sig(seconds, 4) + " s";
  if (a >= 1e-3) return fmt_sig(seconds * 1e3, 4) + " ms";
  if (a >= 1e-6) return fmt_sig(seconds * 1e6, 3) + " µs";
  return fmt_sig(seconds * 1e9, 3) + " ns";
}
std::string pct(double share) { return fmt_fixed(share * 100.0, 1) + "%"; }
std::string rate(double per_second) { return std::isinf(per_second) || per_second <= 0 ? "n/a" : fmt_sig(per_second, 4); }
std::string gbps(double bytes_per_s) { return fmt_sig(bytes_per_s / 1e9, 4) + " GB/s"; }
std::string tflops(double flops_per_s) { return fmt_sig(flops_per_s / 1e12, 4) + " TFLOP/s"; }

std::string flop_text(double flops) {
  if (flops >= 1e15) return fmt_sig(flops / 1e15, 4) + " PFLOP";
  if (flops >= 1e12) return fmt_sig(flops / 1e12, 4) + " TFLOP";
  if (flops >= 1e9) return fmt_sig(flops / 1e9, 4) + " GFLOP";
  return fmt_sig(flops / 1e6, 4) + " MFLOP";
}

std::string md_escape(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}

std::string md_row(const std::vector<std::string>& cells) {
  std::string s = "|";
  for (const auto& c : cells) s += " " + md_escape(c) + " |";
  return s + "\n";
}

std::string md_head(const std::vector<std::string>& cells) {
  std::string s = md_row(cells) + "|";
  for (std::size_t i = 0; i < cells.size(); ++i) s += "---|";
  return s + "\n";
}

std::string case_label(const estimate::Analysis& an) {
  const auto& o = an.options;
  if (o.mode == planner::Mode::prefill) return fmt::format("prefill of {} tokens, TP {}", o.rows, o.tp);
  if (o.mode == planner::Mode::verify)
    return fmt::format("verify of {} draft {} against a cache of {}, TP {}", o.rows, o.rows == 1 ? "token" : "tokens", an.context,
                       o.tp);
  return fmt::format("{} at {} {}, context {}, TP {}", planner::mode_name(o.mode), o.rows, o.rows == 1 ? "sequence" : "sequences",
                     an.context, o.tp);
}

std::string fit_verdict(const estimate::MemoryFit& f) {
  if (f.fits) return fmt::format("fits: {} of {} usable", fmt_bytes(f.total), fmt_bytes(f.usable));
  std::string s = fmt::format("does not fit: needs {}, {} usable", fmt_bytes(f.total), fmt_bytes(f.usable));
  if (f.smallest_tp) s += fmt::format("; fits at TP {}", *f.smallest_tp);
  else if (!f.devices_that_fit.empty()) s += fmt::format("; fits on {}", join(f.devices_that_fit, ", "));
  else s += "; no TP degree or listed device holds it";
  return s;
}

std::string measured_line(const estimate::Analysis& an, const estimate::CaseEstimate& c) {
  if (c.measured_s <= 0)
    return fmt::format("no campaign under --measured ran this program (plan digest {}) on {}{}", c.digest.substr(0, 12), an.device->id,
                       c.mode == "prefill" ? "" : fmt::format(" at context {}", c.context));
  return fmt::format("{} per step, {} tokens/s; predicted / measured x{:.3f}, ceiling / measured {} ({})", ms(c.measured_s),
                     rate(static_cast<double>(c.rows) / c.measured_s), c.prediction_s / c.measured_s, pct(c.ceiling_s / c.measured_s),
                     c.measured_source);
}

bool any_measured(const std::vector<estimate::CaseEstimate>& cases) {
  for (const auto& c : cases)
    if (c.measured_s > 0) return true;
  return false;
}

}  // namespace met::report
