// `met circuit disasm|verify|abi`: thin wiring. Read ASSETS/model.pkt, parse it, hand it to the
// disassembler or the verifier with the real opcode table, print. `abi` prints the generated ABI
// reference, or rewrites the generated part of a document (docs/arch/packet-abi.md) in place.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/files.hpp"
#include "emit/abi_doc.hpp"
#include "emit/disasm.hpp"
#include "emit/opcodes.hpp"
#include "emit/packet.hpp"
#include "emit/verify.hpp"
#include "tree/disk_tree.hpp"

namespace met::cli {
namespace {

Expected<emit::PacketFile> load_packet(const std::string& assets) {
  const std::string path = assets + "/model.pkt";
  MET_TRY(const std::string bytes, read_file(path));
  return emit::parse_packet(bytes, path);
}

int run_disasm(const std::string& assets, const std::string& program) {
  auto file = load_packet(assets);
  if (!file) return error(file.error().message);
  if (!program.empty()) {
    bool found = false;
    std::string names;
    for (const auto& p : file->programs) {
      found = found || p.name == program;
      names += (names.empty() ? "" : ", ") + p.name;
    }
    if (!found) return error(assets + "/model.pkt: no program '" + program + "' (programs: " + names + ")");
  }
  std::fputs(emit::disassemble(*file, emit::opcode_table(), program).c_str(), stdout);
  return 0;
}

int run_verify(const std::string& assets) {
  auto file = load_packet(assets);
  if (!file) return error(file.error().message);
  const auto problems = emit::verify(*file, emit::opcode_table());
  for (const auto& p : problems) std::printf("%s/model.pkt: %s\n", assets.c_str(), p.c_str());
  if (!problems.empty()) return 1;
  std::size_t instrs = 0;
  for (const auto& p : file->programs) instrs += p.instrs.size();
  std::printf("ok: %zu programs, %zu instructions verified\n", file->programs.size(), instrs);
  return 0;
}

int run_abi(const std::string& update) {
  if (update.empty()) {
    std::fputs(emit::abi_markdown().c_str(), stdout);
    return 0;
  }
  auto doc = read_file(update);
  if (!doc) return error(doc.error().message);
  auto next = emit::abi_doc_updated(*doc, update);
  if (!next) return error(next.error().message);
  if (*next == *doc) return 0;
  auto written = write_atomic(update, *next);
  if (!written) return error(written.error().message);
  return 0;
}

}  // namespace

void add_packet_commands(CLI::App& circuit, std::vector<Command>& out) {
  struct Args {
    std::string assets, program, update;
  };
  auto args = std::make_shared<Args>();

  auto* disasm = circuit.add_subcommand("disasm", "print the packet programs of an assets directory (ASSETS/model.pkt)");
  disasm->add_option("assets", args->assets, "assets directory written by `met circuit emit`")->required();
  disasm->add_option("--program", args->program, "only this program (\"decode_1\", \"prefill_512\")");
  out.push_back(Command{disasm, [args] { return run_disasm(args->assets, args->program); }});

  auto* verify = circuit.add_subcommand(
      "verify", "statically check ASSETS/model.pkt: waits cover dependencies, no deadlock, bounds, no racing writes");
  verify->add_option("assets", args->assets, "assets directory written by `met circuit emit`")->required();
  out.push_back(Command{verify, [args] { return run_verify(args->assets); }});

  auto* abi = circuit.add_subcommand("abi", "print the packet ABI reference (generated from src/emit/packet_fields.def)");
  abi->add_option("--update", args->update, "rewrite the generated part of this markdown file instead (docs/arch/packet-abi.md)");
  out.push_back(Command{abi, [args] { return run_abi(args->update); }});
}

}  // namespace met::cli
