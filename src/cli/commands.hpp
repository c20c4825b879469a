// Subcommand registration: each command file adds its subcommands to a parent and records the
// function that runs when one was parsed. `library()` loads the kernel tree once, on first use.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "planner/library.hpp"

namespace met::cli {

using LibraryFn = std::function<const planner::Library*()>;  // nullptr after printing an error

// Prints "error: <message>" on stderr; returns 1, a command's exit status for it (circuit.cpp).
int error(const std::string& message);

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// `met model synth` (src/cli/model_cmd.cpp).
void add_model_commands(CLI::App& model, std::vector<Command>& out);
// `met circuit disasm|verify` (src/cli/packet_cmd.cpp).
void add_packet_commands(CLI::App& circuit, std::vector<Command>& out);
// `met circuit emit|run` (src/cli/run_cmd.cpp).
void add_run_commands(CLI::App& circuit, const LibraryFn& library, std::vector<Command>& out);
// `met circuit probe` (src/cli/probe_cmd.cpp).
void add_probe_command(CLI::App& circuit, const LibraryFn& library, std::vector<Command>& out);
// `met circuit calibrate` (src/cli/calibrate_cmd.cpp); `kernels` is the --kernels directory ("" = none).
void add_calibrate_command(CLI::App& circuit, const LibraryFn& library, const std::string* kernels, std::vector<Command>& out);
// `met serve` (src/cli/serve_cmd.cpp).
void add_serve_command(CLI::App& app, std::vector<Command>& out);

}  // namespace met::cli
