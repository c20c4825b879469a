// The device x golden-instance matrix: every cell's Markdown and JSON report plus MATRIX.md with
// the summary, the coverage at C = 16 (share of the step on the class's kernels, the largest gaps)
// and the port list of each device, and MATRIX.html drawing it as a heat map (kernels some model needs that the device's class
// cannot run, why, and how many models it blocks). Returned as file name -> bytes; the CLI writes
// them or compares them (`--check`).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "estimate/analysis.hpp"
#include "planner/library.hpp"

namespace met::report {

struct MatrixSpec {
  std::vector<std::string> devices;    // golden devices
  std::vector<std::string> instances;  // golden instances
  estimate::BasisChoice basis = estimate::BasisChoice::datasheet;
};

// The devices and instances the golden matrix covers (golden devices are listed in
// circuits/INSTANCES.toml's neighbour, here: every instance x the devices named by the spec).
MatrixSpec default_matrix(const planner::Library& lib);

Expected<std::map<std::string, std::string>> build_matrix(const planner::Library& lib, const MatrixSpec& spec);

// Compares expected files (on disk) with the ones just built. Returns one message per
// difference: the file, the section (Markdown heading or JSON path) and the values that changed.
std::vector<std::string> compare_outputs(const std::map<std::string, std::string>& expected,
                                         const std::map<std::string, std::string>& actual);
// Difference of one file's two versions (empty when equal).
std::vector<std::string> diff_file(const std::string& name, const std::string& expected, const std::string& actual);

}  // namespace met::report
