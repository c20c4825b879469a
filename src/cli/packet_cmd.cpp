// `met circuit disasm|verify` (filled in by the packet ABI work).
#include "cli/commands.hpp"

namespace met::cli {

void add_packet_commands(CLI::App& circuit, std::vector<Command>& out) {
  (void)circuit;
  (void)out;
}

}  // namespace met::cli
