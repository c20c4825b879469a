// What the user probably meant when CLI11 refuses an argument: a flag or a subcommand name that
// is one or two edits from a real one gets "did you mean ...", printed before CLI11's own message.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace met::cli {

// One "error: ..." line per unexpected argument of the last parse of `app` that is near a flag
// of the subcommand being parsed (or of a parent it falls through to) or near a subcommand name;
// empty when nothing is near.
std::string explain_unexpected(CLI::App& app);

}  // namespace met::cli
