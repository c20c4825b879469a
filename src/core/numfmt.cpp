#include "core/numfmt.hpp"

#include <fmt/format.h>

#include <cmath>

namespace met {

std::string fmt_exact(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0.0) return "0";
  return fmt::format("{}", v);
}

std::string fmt_fixed(double v, int decimals) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{:.{}f}", v, decimals);
  // "-0.00" reads as a sign error to people; print the zero plainly.
  bool all_zero = true;
  for (char c : s) {
    if (c != '-' && c != '0' && c != '.') all_zero = false;
  }
  if (all_zero && !s.empty() && s[0] == '-') s.erase(0, 1);
  return s;
}

std::string fmt_sig(double v, int digits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0.0) return "0";
  const double mag = std::floor(std::log10(std::fabs(v)));
  int decimals = digits - 1 - static_cast<int>(mag);
  if (decimals < 0) decimals = 0;
  if (decimals > 12) decimals = 12;
  return fmt_fixed(v, decimals);
}

std::string fmt_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int unit = 0;
  double v = bytes;
  while (std::fabs(v) >= 1000.0 && unit < 5) {
    v /= 1000.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", fmt_fixed(v, 0)) : fmt::format("{} {}", fmt_fixed(v, 2), kUnits[unit]);
}

std::string fmt_int(std::int64_t v) { return fmt::format("{}", v); }

}  // namespace met
