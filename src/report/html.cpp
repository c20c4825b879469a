// The HTML report: one self-contained page (inline CSS and SVG, no scripts, no external
// resources) with the step-time shares, the gaps and the memory fit drawn as bar charts, and the
// decode and prefill ladders as step time against C and T (ceiling, prediction, measurements).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "core/numfmt.hpp"
#include "core/strings.hpp"
#include "report/render.hpp"
#include "report/text.hpp"

namespace met::report {
namespace {

struct Bar {
  std::string label;
  double value = 0;  // 0..1 of the chart's full width
  std::string text;
  std::string color;
};

constexpr int kChartWidth = 900;
constexpr int kLabelWidth = 330;
constexpr int kRowHeight = 20;

std::string bar_chart(const std::vector<Bar>& bars) {
  const int h = static_cast<int>(bars.size()) * kRowHeight + 10;
  std::string s = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\">\n", kChartWidth, h);
  const int span = kChartWidth - kLabelWidth - 120;
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const auto& b = bars[i];
    const int y = static_cast<int>(i) * kRowHeight + 5;
    const double w = std::max(1.0, b.value * span);
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"end\">{}</text>", kLabelWidth - 6, y + 13, html_escape(b.label));
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>", kLabelWidth, y + 2, fmt_fixed(w, 1),
                     kRowHeight - 4, b.color);
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\">{}</text>\n", fmt_fixed(kLabelWidth + w + 6, 1), y + 13, html_escape(b.text));
  }
  return s + "</svg>\n";
}

// The powers of ten that hold [lo, hi], one decade at least.
std::pair<double, double> decades(double lo, double hi) {
  const double a = std::pow(10.0, std::floor(std::log10(lo)));
  return {a, std::max(std::pow(10.0, std::ceil(std::log10(hi))), 10 * a)};
}

// A log-log chart's frame: plot area inside margins, data ranges [x0, x1] x [y0, y1].
struct LogFrame {
  int w, h, l, r, t = 14, b = 40;
  double x0, x1, y0, y1;
  double px(double x) const { return l + std::log(x / x0) / std::log(x1 / x0) * (w - l - r); }
  double py(double y) const { return h - b - std::log(y / y0) / std::log(y1 / y0) * (h - t - b); }
  std::string xy(double x, double y) const { return fmt::format("{},{}", fmt_fixed(px(x), 1), fmt_fixed(py(y), 1)); }
  // The svg element (its class names the chart) and the frame around the plot area.
  std::string open(const char* cls) const {
    return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\" class=\"{}\">\n"
                       "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n",
                       w, h, cls, l, t, w - l - r, h - t - b);
  }
};

// Step time against rows (C or T) on log-log axes: the ceiling and the prediction as lines, the
// campaign measurements (--measured) as points, so a reader sees where the program stands against
// what the plan promises. One curve point per ladder case; empty when the ladder is.
std::string step_chart(const std::vector<estimate::CaseEstimate>& cases, const char* axis) {
  if (cases.empty()) return "";
  double lo_x = 1e300, hi_x = 0, lo_y = 1e300, hi_y = 0;
  for (const auto& c : cases) {
    lo_x = std::min(lo_x, static_cast<double>(c.rows));
    hi_x = std::max(hi_x, static_cast<double>(c.rows));
    for (double v : {c.ceiling_s, c.prediction_s, c.measured_s})
      if (v > 0) {
        lo_y = std::min(lo_y, v);
        hi_y = std::max(hi_y, v);
      }
  }
  if (hi_y <= 0) return "";
  const auto [y0, y1] = decades(lo_y, hi_y);
  const double x0 = std::max(1.0, lo_x);
  const LogFrame f{640, 300, 70, 150, 14, 40, x0, std::max(hi_x, 2 * x0), y0, y1};
  std::string s = f.open("step-chart");
  for (double y = y0; y <= y1 * 1.0001; y *= 10) {
    const std::string yy = fmt_fixed(f.py(y), 1);
    s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#e4e4e4\"/>", f.l, yy, f.w - f.r, yy);
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>\n", f.l - 4, yy, html_escape(dur(y)));
  }
  for (const auto& c : cases) {
    const std::string xx = fmt_fixed(f.px(static_cast<double>(c.rows)), 1);
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>", xx, f.h - f.b + 14, c.rows);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n", (f.l + f.w - f.r) / 2, f.h - 6, html_escape(axis));
  auto line = [&](double estimate::CaseEstimate::*field, const char* color, const char* dash) {
    std::string pts;
    for (const auto& c : cases)
      if (c.*field > 0) pts += (pts.empty() ? "" : " ") + f.xy(static_cast<double>(c.rows), c.*field);
    return fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", pts, color,
                       *dash ? fmt::format(" stroke-dasharray=\"{}\"", dash) : std::string());
  };
  s += line(&estimate::CaseEstimate::ceiling_s, "#2e7d32", "");
  s += line(&estimate::CaseEstimate::prediction_s, "#1f5fa8", "6 3");
  int measured = 0;
  for (const auto& c : cases)
    if (c.measured_s > 0) {
      ++measured;
      s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"#d9534f\"/>", fmt_fixed(f.px(static_cast<double>(c.rows)), 1),
                       fmt_fixed(f.py(c.measured_s), 1));
    }
  const int lx = f.w - f.r + 12;
  s += fmt::format("<line x1=\"{}\" y1=\"20\" x2=\"{}\" y2=\"20\" stroke=\"#2e7d32\" stroke-width=\"2\"/>"
                   "<text x=\"{}\" y=\"24\" font-size=\"12\">ceiling</text>\n", lx, lx + 20, lx + 26);
  s += fmt::format("<line x1=\"{}\" y1=\"40\" x2=\"{}\" y2=\"40\" stroke=\"#1f5fa8\" stroke-width=\"2\" stroke-dasharray=\"6 3\"/>"
                   "<text x=\"{}\" y=\"44\" font-size=\"12\">prediction</text>\n", lx, lx + 20, lx + 26);
  if (measured > 0)
    s += fmt::format("<circle cx=\"{}\" cy=\"60\" r=\"4\" fill=\"#d9534f\"/><text x=\"{}\" y=\"64\" font-size=\"12\">measured</text>\n",
                     lx + 10, lx + 26);
  return s + "</svg>\n";
}

// The roofline of the requested case on log-log axes: arithmetic intensity (FLOP per byte moved)
// against FLOP/s, under the basis' memory roof and the compute peaks the groups use. Each group
// with both FLOPs and bytes is a hollow point at its ceiling and a filled one at its prediction;
// with --measured, the whole step's measured rate is a red point at the step's intensity.
std::string roofline(const estimate::Analysis& an) {
  struct Pt {
    double ai, ceil, pred;
  };
  std::vector<Pt> pts;
  std::map<std::string, double> peaks;  // peak key -> FLOP/s, the roofs drawn
  double flops = 0, bytes = 0;
  for (const auto& g : an.groups) {
    const double f = g.cost.flops * g.count, b = g.cost.bytes() * g.count;
    flops += f;
    bytes += b;
    if (f <= 0 || b <= 0 || g.cost.seconds <= 0 || g.step_seconds <= 0) continue;
    pts.push_back({f / b, g.cost.flops / g.cost.seconds, f / g.step_seconds});
    if (!g.cost.peak_key.empty()) peaks[g.cost.peak_key] = an.basis.peak(g.cost.peak_key).value;
  }
  const double bw = an.basis.bandwidth.value;
  if (pts.empty() || bw <= 0) return "";
  const double measured = an.requested.measured_s > 0 && bytes > 0 ? flops / an.requested.measured_s : 0;
  double lo_x = 1e300, hi_x = 0, lo_y = 1e300, hi_y = 0;
  auto grow = [&](double x, double y) {
    lo_x = std::min(lo_x, x), hi_x = std::max(hi_x, x), lo_y = std::min(lo_y, y), hi_y = std::max(hi_y, y);
  };
  for (const auto& p : pts) grow(p.ai, std::min(p.ceil, p.pred)), grow(p.ai, std::max(p.ceil, p.pred));
  for (const auto& [k, v] : peaks) grow(v / bw, v);
  if (measured > 0) grow(flops / bytes, measured);
  const auto [x0, x1] = decades(lo_x, hi_x);
  const auto [y0, y1] = decades(lo_y, hi_y);
  const LogFrame f{640, 320, 80, 150, 14, 40, x0, x1, y0, y1};
  std::string s = f.open("roofline");
  for (double y = y0; y <= y1 * 1.0001; y *= 10)
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>", f.l - 4, fmt_fixed(f.py(y) + 4, 1),
                     html_escape(fmt_sig(y / 1e12, 3) + " TFLOP/s"));
  for (double x = x0; x <= x1 * 1.0001; x *= 10)
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>", fmt_fixed(f.px(x), 1), f.h - f.b + 14, fmt_sig(x, 3));
  s += fmt::format("\n<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">FLOP per byte</text>\n", (f.l + f.w - f.r) / 2, f.h - 6);
  // The roofs: memory up to each peak's ridge, then the peak (one polyline per peak).
  for (const auto& [k, v] : peaks) {
    const double ridge = v / bw, left = std::max(x0, y0 / bw);
    s += fmt::format("<polyline class=\"roof\" points=\"{} {} {}\" fill=\"none\" stroke=\"#555\" stroke-width=\"1.5\"/>", f.xy(left, left * bw),
                     f.xy(ridge, v), f.xy(x1, v));
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>\n", fmt_fixed(f.px(x1) + 4, 1), fmt_fixed(f.py(v) + 4, 1), html_escape(k));
  }
  for (const auto& p : pts) {
    s += fmt::format("<circle class=\"ceiling\" cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"none\" stroke=\"#2e7d32\"/>", fmt_fixed(f.px(p.ai), 1),
                     fmt_fixed(f.py(p.ceil), 1));
    s += fmt::format("<circle class=\"prediction\" cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"#1f5fa8\"/>\n", fmt_fixed(f.px(p.ai), 1),
                     fmt_fixed(f.py(p.pred), 1));
  }
  if (measured > 0)
    s += fmt::format("<circle class=\"measured\" cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"#d9534f\"/>\n", fmt_fixed(f.px(flops / bytes), 1),
                     fmt_fixed(f.py(measured), 1));
  const int lx = f.w - f.r + 45;
  s += fmt::format("<circle cx=\"{}\" cy=\"24\" r=\"4\" fill=\"none\" stroke=\"#2e7d32\"/><text x=\"{}\" y=\"28\" font-size=\"12\">ceiling</text>"
                   "<circle cx=\"{}\" cy=\"42\" r=\"3\" fill=\"#1f5fa8\"/><text x=\"{}\" y=\"46\" font-size=\"12\">prediction</text>\n",
                   lx, lx + 10, lx, lx + 10);
  if (measured > 0)
    s += fmt::format("<circle cx=\"{}\" cy=\"60\" r=\"5\" fill=\"#d9534f\"/><text x=\"{}\" y=\"64\" font-size=\"12\">measured</text>\n", lx,
                     lx + 10);
  return s + "</svg>\n";
}

std::string table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::string s = "<table><tr>";
  for (const auto& h : head) s += "<th>" + html_escape(h) + "</th>";
  s += "</tr>\n";
  for (const auto& r : rows) {
    s += "<tr>";
    for (const auto& c : r) s += "<td>" + html_escape(c) + "</td>";
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

}  // namespace

std::string render_html(const estimate::Analysis& an, const Provenance& prov) {
  const auto& m = *an.model;
  const auto& d = *an.device;
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  s += fmt::format("<title>{} on {}</title>", html_escape(m.id), html_escape(d.id));
  s += "<style>body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:1em 0}"
       "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px;text-align:left}th{background:#f0f0f0}"
       "code{background:#f6f6f6}</style></head><body>\n";
  s += fmt::format("<h1>{} on {}</h1>\n<p>generated by <code>{}</code></p>\n", html_escape(m.id), html_escape(d.id), html_escape(prov.command));
  s += table({"", ""}, {{"model", fmt::format("{} (circuit {}, {} formats)", m.id, m.circuit, m.formats_basis)},
                        {"device", fmt::format("{}, class {} ({})", d.name, an.plan.klass, join(an.chain, " > "))},
                        {"case", case_label(an)},
                        {"ceiling", fmt::format("{} per step, {} tokens/s", ms(an.requested.ceiling_s), rate(an.requested.tokens_per_s))},
                        {"plan digest", an.plan.digest},
                        {"memory", fit_verdict(an.fit)}});
  if (an.measured_asked)
    s += table({"", ""}, {{"prediction", fmt::format("{} per step ({})", ms(an.requested.prediction_s), an.requested.prediction_basis)},
                          {"measured", measured_line(an, an.requested)}});

  s += "<h2>Step time by group</h2>\n";
  // Groups under half a percent of the step are drawn as one bar, so the chart shows what matters.
  constexpr double kMinShare = 0.005;
  std::vector<Bar> bars;
  double rest_share = 0, rest_seconds = 0;
  int rest = 0;
  for (const auto& g : an.groups) {
    if (g.share < kMinShare && g.group != "gap") {
      rest_share += g.share;
      rest_seconds += g.step_seconds;
      ++rest;
      continue;
    }
    bars.push_back({fmt::format("{} {}", g.scope, g.group), g.share, pct(g.share) + " " + dur(g.step_seconds),
                    g.group == "gap" ? "#d9534f" : (g.unit == "tensor_core" ? "#5b8def" : "#6cbf84")});
  }
  if (rest) bars.push_back({fmt::format("{} small groups", rest), rest_share, pct(rest_share) + " " + dur(rest_seconds), "#bbbbbb"});
  s += bar_chart(bars);
  s += fmt::format("<p>Green: kernels on {} or memory-bound; blue: kernels on {}; red: gaps (unfused reference ops on {}).</p>\n",
                   unit_name("cuda_core", d.vendor, /*plural=*/true), unit_name("tensor_core", d.vendor, /*plural=*/true),
                   unit_name("cuda_core", d.vendor, /*plural=*/true));
  if (const std::string r = roofline(an); !r.empty()) {
    s += "<h2>Roofline</h2>\n" + r;
    s += "<p>Groups of this case with FLOPs and bytes: hollow at the ceiling, filled at the prediction, under the memory roof "
         "and the compute peaks they use (the basis above)";
    s += an.requested.measured_s > 0 ? "; red: the whole step as measured.</p>\n" : ".</p>\n";
  }

  s += "<h2>Gaps</h2>\n";
  if (an.gaps.empty()) {
    s += "<p>None.</p>\n";
  } else {
    std::vector<Bar> gb;
    for (const auto& g : an.gaps) gb.push_back({fmt::format("{} {}", g.scope, g.op), g.share, pct(g.share), "#d9534f"});
    s += bar_chart(gb);
    std::vector<std::vector<std::string>> rows;
    for (const auto& g : an.gaps) rows.push_back({g.scope, g.op, pct(g.share), g.klass, g.kernel.empty() ? "(none)" : g.kernel, g.why});
    s += table({"scope", "op", "share", "class", "missing", "why"}, rows);
  }

  s += "<h2>Formats</h2>\n<p>Paths are named by the bits of the weights and of the activations the math consumes (W8A16: "
       "weight-only; W8A8: activations quantised).</p>\n";
  std::vector<std::vector<std::string>> format_rows;
  for (const auto& f : an.formats) format_rows.push_back({f.node, f.weight, f.act, f.source, f.decode, f.prefill});
  s += format_rows.empty() ? "<p>No weighted matrix nodes.</p>\n"
                           : table({"node", "weight", "activations", "declared by", "decode", "prefill"}, format_rows);

  s += "<h2>Memory fit</h2>\n";
  const auto& f = an.fit;
  const double full = std::max(f.total, f.usable);
  std::vector<Bar> mb = {{"weights", f.weights / full, fmt_bytes(f.weights), "#5b8def"},
                         {"KV cache", f.kv / full, fmt_bytes(f.kv), "#f0ad4e"},
                         {"state", f.state / full, fmt_bytes(f.state), "#9b59b6"},
                         {"activations, workspace", f.activations / full, fmt_bytes(f.activations), "#6cbf84"},
                         {"runtime reservation", f.reserve / full, fmt_bytes(f.reserve), "#999999"},
                         {"total", f.total / full, fmt_bytes(f.total), f.fits ? "#2e7d32" : "#d9534f"},
                         {"usable", f.usable / full, fmt_bytes(f.usable), "#333333"}};
  s += bar_chart(mb);

  s += "<h2>Decode</h2>\n";
  // With campaigns that measured a case (--measured): the prediction and the measurement beside the ceiling.
  auto ladder = [&](const std::vector<estimate::CaseEstimate>& cases, const char* axis, const char* time) {
    const bool measured = any_measured(cases);
    std::vector<std::vector<std::string>> out;
    for (const auto& c : cases) {
      std::vector<std::string> r = {fmt_int(c.rows), ms(c.ceiling_s), rate(c.tokens_per_s)};
      if (measured) {
        r.push_back(ms(c.prediction_s));
        r.push_back(c.measured_s > 0 ? ms(c.measured_s) : "-");
      }
      r.push_back(fmt_int(c.gaps));
      out.push_back(r);
    }
    std::vector<std::string> head = {axis, time, "tokens/s"};
    if (measured) {
      head.push_back("prediction");
      head.push_back("measured");
    }
    head.push_back("gaps");
    return table(head, out);
  };
  s += step_chart(an.decode, "sequences C (step time per decode step)");
  s += ladder(an.decode, "C", "step");
  s += "<h2>Prefill</h2>\n";
  s += step_chart(an.prefill, "prompt tokens T (time per prompt)");
  s += ladder(an.prefill, "T", "time");
  std::vector<std::vector<std::string>> rows;
  s += "<h2>Port list</h2>\n";
  for (const auto& p : an.ports) rows.push_back({p.item.kernel, p.item.op, join(p.modes, ", "), p.item.why});
  s += rows.empty() ? "<p>Nothing to port.</p>\n" : table({"kernel", "covers", "cases", "why"}, rows);
  s += "</body></html>\n";
  return s;
}

}  // namespace met::report
