#include "core/format.hpp"

#include <array>
#include <utility>

namespace met {
namespace {

struct FormatInfo {
  Format format;
  std::string_view name;
  double bytes;           // per element, block scales included
  int bits;               // per element, scales left out: the number in a W8A16 path name
  std::string_view math;  // the peak key (DEVICES.toml [device.peaks]) of math on this format
};

constexpr std::array<FormatInfo, 9> kFormats{{
    {Format::f32, "f32", 4.0, 32, "fp32"},
    {Format::bf16, "bf16", 2.0, 16, "bf16"},
    {Format::f16, "f16", 2.0, 16, "f16"},
    {Format::fp8_e4m3, "fp8-e4m3", 1.0, 8, "fp8"},
    {Format::fp8_e5m2, "fp8-e5m2", 1.0, 8, "fp8"},
    {Format::mxfp4, "mxfp4", 0.5 + 1.0 / 32.0, 4, "fp4"},  // e2m1 + one e8m0 scale per 32
    {Format::nvfp4, "nvfp4", 0.5 + 1.0 / 16.0, 4, "fp4"},  // e2m1 + one e4m3 scale per 16
    {Format::int8, "int8", 1.0, 8, "int8"},
    {Format::int4, "int4", 0.5, 4, "int4"},
}};

}  // namespace

std::string_view format_name(Format f) {
  for (const auto& info : kFormats) {
    if (info.format == f) return info.name;
  }
  return "?";
}

std::optional<Format> parse_format(std::string_view s) {
  for (const auto& info : kFormats) {
    if (info.name == s) return info.format;
  }
  return std::nullopt;
}

std::vector<std::string_view> format_names() {
  std::vector<std::string_view> out;
  for (const auto& info : kFormats) out.push_back(info.name);
  return out;
}

double format_bytes(Format f) {
  for (const auto& info : kFormats) {
    if (info.format == f) return info.bytes;
  }
  return 0.0;
}

int format_bits(Format f) {
  for (const auto& info : kFormats) {
    if (info.format == f) return info.bits;
  }
  return 0;
}

std::string_view math_key(Format f) {
  for (const auto& info : kFormats) {
    if (info.format == f) return info.math;
  }
  return "?";
}

}  // namespace met
