// The one canonical number formatter. Every number that reaches a report, a digest or a golden
// file goes through here, so output bytes do not depend on locale, libc or call site.
#pragma once

#include <cstdint>
#include <string>

namespace met {

// Shortest round-trip decimal ("0.1", "1e+21", "16060522496"); -0 prints as 0; nan/inf spelled out.
std::string fmt_exact(double v);
// Fixed decimals ("16.06"), rounding half away from zero on the exact decimal value.
std::string fmt_fixed(double v, int decimals);
// Significant digits for people ("4.25", "0.0131", "1234"): used by markdown and html.
std::string fmt_sig(double v, int digits = 3);
// Bytes for people: "16.06 GB" (decimal units, 2 decimals).
std::string fmt_bytes(double bytes);
// Integer with no separators.
std::string fmt_int(std::int64_t v);

}  // namespace met
