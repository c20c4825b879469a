// Number formats of weights, activations and KV (docs/arch/kernel-tree.md "Formats").
// Storage cost counts block scales, so a byte estimate never rounds a format up or down.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace met {

enum class Format { f32, bf16, f16, fp8_e4m3, fp8_e5m2, mxfp4, nvfp4, int8, int4 };

std::string_view format_name(Format f);                  // "fp8-e4m3"
std::optional<Format> parse_format(std::string_view s);  // inverse of format_name
std::vector<std::string_view> format_names();            // every spelling, for error messages
// Bytes per element including block scales: mxfp4 = 0.5 + 1/32, nvfp4 = 0.5 + 1/16.
double format_bytes(Format f);
// Bits per element without the scales (bf16 16, fp8-e4m3 8, nvfp4 4): W8A16 names a path by them.
int format_bits(Format f);
// The peak key math on operands of this format runs at: "bf16", "fp8" (both fp8 kinds), "fp4".
std::string_view math_key(Format f);

}  // namespace met
