// `met circuit emit|run` (filled in by the emit and interpreter work).
#include "cli/commands.hpp"

namespace met::cli {

void add_run_commands(CLI::App& circuit, const LibraryFn& library, std::vector<Command>& out) {
  (void)circuit;
  (void)library;
  (void)out;
}

}  // namespace met::cli
