// `met model ...` subcommands (filled in by the synth work).
#include "cli/commands.hpp"

namespace met::cli {

void add_model_commands(CLI::App& model, std::vector<Command>& out) {
  (void)model;
  (void)out;
}

}  // namespace met::cli
