// Basis: the device figures an estimate divides by, each labelled with where it came from.
// `measured` uses a figure measured on our own device where one exists, the datasheet otherwise;
// `datasheet` uses the datasheet throughout.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "device/registry.hpp"

namespace met::estimate {

enum class BasisChoice { measured, datasheet };

struct Figure {
  double value = 0;    // SI units: bytes/s, FLOP/s
  std::string source;  // "datasheet" | "measured"
  std::string cite;    // source key
};

struct Basis {
  BasisChoice choice = BasisChoice::measured;
  Figure bandwidth;                    // bytes/s
  std::map<std::string, Figure> peaks; // peak key -> FLOP/s
  Figure interconnect;                 // bytes/s per direction
  // The peak a unit runs at: the named key, or fp32 when the device lists no such peak.
  const Figure& peak(const std::string& key) const;
};

Basis make_basis(const device::Device& d, BasisChoice choice);
std::string_view basis_name(BasisChoice c);

}  // namespace met::estimate
