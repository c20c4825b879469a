// The examples that end each subcommand's --help, kept in one table (src/cli/examples.cpp) so
// README's command table can point at `met <command> --help` for them.
#pragma once

#include <CLI/CLI.hpp>

namespace met::cli {

// Sets the footer of every subcommand the table names; call after all subcommands are added.
void add_examples(CLI::App& app);

}  // namespace met::cli
