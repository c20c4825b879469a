// `met completion bash|zsh|fish`: a completion script generated from the argument parser itself
// (every subcommand and flag CLI11 knows) and from the kernel tree (device ids and aliases,
// instance ids and stored Hugging Face ids, modes, formats), so it cannot drift from either.
#pragma once

#include <CLI/CLI.hpp>

#include <vector>

#include "cli/commands.hpp"

namespace met::cli {

void add_completion_command(CLI::App& app, const LibraryFn& library, std::vector<Command>& out);

}  // namespace met::cli
