// `met circuit ...` subcommands: each parses nothing itself (main.cpp does), calls one library
// entry point and renders. Return value is the process exit code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "core/format.hpp"
#include "planner/library.hpp"

namespace met::cli {

struct PlanArgs {
  std::string hardware;
  std::string model;            // instance id or Hugging Face id (cli/model_ref.hpp; default llama-3.1-8b-instruct)
  std::string hub;              // --hub URL for Hugging Face ids the tree does not store
  std::string revision;         // --revision of a Hub model ("" = main)
  std::string checkpoint;       // directory; exclusive with model
  std::string precision;        // recipe | declared ("" = recipe for --model, declared for --checkpoint)
  std::string kv_dtype;         // bf16 | fp8 ("" = the model's: the checkpoint's declared KV format, else its activations')
  std::string mode = "decode";
  std::optional<std::int64_t> rows;
  std::optional<std::int64_t> context;
  int tp = 1;
  std::string basis = "datasheet";
  std::string format = "report";  // report | plan | json | html
  std::string out;
  bool check = false;
  std::vector<std::string> measured;  // --measured: campaign files or directories of them
};

inline constexpr const char* kDefaultModel = "llama-3.1-8b-instruct";

// --kv-dtype of plan and emit: "bf16" or "fp8" (e4m3 with a per-tensor scale).
Expected<Format> kv_dtype_format(const std::string& name);

int run_devices(const planner::Library& lib);
int run_kernels(const planner::Library& lib, const std::string& hardware);
// The device's class build, one fact a line: `arch A`, `define NAME=VALUE` (sorted), `source PATH`
// (inherited first). tests/kernels/nvcc/check_avail.sh compiles exactly this with nvcc.
int run_class_build(const planner::Library& lib, const std::string& hardware);
int run_plan(const planner::Library& lib, const PlanArgs& args);
int run_matrix(const planner::Library& lib, const std::string& dir, bool check, const std::string& basis);

}  // namespace met::cli
