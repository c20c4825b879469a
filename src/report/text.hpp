// Shared wording of the renderers: time and rate units, case labels, markdown table rows.
#pragma once

#include <string>
#include <vector>

#include "estimate/analysis.hpp"
#include "planner/units.hpp"

namespace met::report {

using planner::unit_name;  // units as the vendor names them

std::string ms(double seconds);          // "7.512 ms" style, 4 significant digits
std::string us(double seconds);          // "12.3 µs"
std::string dur(double seconds);         // adaptive: "1.963 s", "11.42 ms", "12.3 µs", "45.0 ns"
std::string pct(double share);           // "12.3%"
std::string rate(double per_second);     // "133.1"
std::string gbps(double bytes_per_s);    // "4250 GB/s"
std::string tflops(double flops_per_s);  // "790 TFLOP/s"
std::string flop_text(double flops);     // "17.16 GFLOP", "7.22 TFLOP"
std::string md_row(const std::vector<std::string>& cells);
std::string md_head(const std::vector<std::string>& cells);
std::string case_label(const estimate::Analysis& an);
std::string fit_verdict(const estimate::MemoryFit& f);
std::string md_escape(std::string s);
// What a campaign measured for the case, beside the prediction and the ceiling: "5.692 ms per
// step, 175.7 tokens/s; predicted / measured x1.003, ceiling / measured 56.9% (FILE, STAMP)", or
// what was not found when nothing matched. Only for an analysis given --measured.
std::string measured_line(const estimate::Analysis& an, const estimate::CaseEstimate& c);
// Any case of the ladder measured (reports add a column only then).
bool any_measured(const std::vector<estimate::CaseEstimate>& cases);

}  // namespace met::report
