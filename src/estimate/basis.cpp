#include "estimate/basis.hpp"

namespace met::estimate {

namespace {
constexpr double kGB = 1e9;     // datasheet bandwidths are decimal GB/s
constexpr double kTera = 1e12;  // peaks are TFLOP/s

std::string cite_of(const device::Device& d, const std::string& field) {
  auto it = d.cites.find(field);
  return it == d.cites.end() ? "" : it->second;
}
}  // namespace

std::string_view basis_name(BasisChoice c) { return c == BasisChoice::measured ? "measured" : "datasheet"; }

const Figure& Basis::peak(const std::string& key) const {
  auto it = peaks.find(key);
  if (it != peaks.end()) return it->second;
  static const Figure kNone{};
  auto fp32 = peaks.find("fp32");
  return fp32 != peaks.end() ? fp32->second : kNone;
}

Basis make_basis(const device::Device& d, BasisChoice choice) {
  Basis b;
  b.choice = choice;
  b.bandwidth = {d.bandwidth_gbs * kGB, "datasheet", cite_of(d, "bandwidth_gbs")};
  for (const auto& [key, tflops] : d.peaks) b.peaks[key] = {tflops * kTera, "datasheet", cite_of(d, "peaks." + key)};
  b.interconnect = {d.interconnect.gbs * kGB, "datasheet", cite_of(d, "interconnect")};
  if (choice == BasisChoice::measured && d.measured) {
    // Streaming read, not copy: what a memory-bound step does is read weights and caches.
    if (d.measured->read_gbs) b.bandwidth = {*d.measured->read_gbs * kGB, "measured", d.measured->cite};
    for (const auto& [key, tflops] : d.measured->peaks) b.peaks[key] = {tflops * kTera, "measured", d.measured->cite};
  }
  return b;
}

}  // namespace met::estimate
