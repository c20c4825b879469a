// The disassembler on a crafted file and a fake opcode table: named operands with tensor names,
// ints and immediates by name, the stream summary, the program filter and determinism.
#include <doctest/doctest.h>

#include <string>

#include "emit/disasm.hpp"

using namespace met;
using namespace met::emit;

namespace {

const std::vector<OpcodeInfo>& fake_table() {
  static const std::vector<OpcodeInfo> table = [] {
    OpcodeInfo o;
    o.number = 5;
    o.name = "gemv_o_residual";
    o.tensors = {{"attn", "act", false}, {"w_o", "weight", false}, {"x", "act", true}};
    o.ints = {"rows", "cols"};
    o.imms = {"scale"};
    return std::vector<OpcodeInfo>{o};
  }();
  return table;
}

PacketFile crafted() {
  PacketFile f;
  f.target_class = "hopper";
  f.sm_count = 2;
  f.tensors = {{"attn", MET_DTYPE_BF16, {1, 4096}, 8192, MET_SOURCE_SCRATCH, 0},
               {"model.layers.3.self_attn.o_proj.weight", MET_DTYPE_FP8_E4M3, {4096, 4096}, 16777216, MET_SOURCE_CHECKPOINT, 12},
               {"x", MET_DTYPE_BF16, {1, 4096}, 8192, MET_SOURCE_SCRATCH, 8192}};
  ProgramDesc p;
  p.name = "decode_1";
  p.rows = 1;
  p.plan_group_count = 6;
  InstrDesc in;
  in.opcode = 5;
  in.slices = 2;
  in.group = 5;
  in.scope = "layers:full L3";
  in.tensors = {0, 1, 2};
  in.ints = {1, 4096, 0, 0, 0, 0, 0, 7};
  in.imms = {0.5f};
  InstrDesc unknown;
  unknown.opcode = 77;
  unknown.tensors = {2};
  unknown.ints = {3};
  p.instrs = {in, unknown};
  p.streams = {{{0, 0, {}}, {1, 0, {{0, 2}}}}, {{0, 1, {}}}};
  ProgramDesc q = p;
  q.name = "prefill_16";
  q.kind = MET_PROGRAM_PREFILL;
  f.programs = {p, q};
  return f;
}

}  // namespace

TEST_CASE("an instruction line names its operands, tensors, ints and immediates from the opcode table") {
  const auto text = disassemble(crafted(), fake_table());
  CHECK(
      text.find("  0  [g5 layers:full L3] gemv_o_residual slices=2  attn=t0(attn) w_o=t1(model.layers.3.self_attn.o_proj.weight) "
                "x=t2(x)  rows=1 cols=4096 int7=7 scale=0.5\n") != std::string::npos);
}

TEST_CASE("an opcode missing from the table prints its raw slots instead of failing") {
  const auto text = disassemble(crafted(), fake_table());
  CHECK(text.find("  1  [g0] opcode77 slices=1  tensor0=t2(x)  int0=3\n") != std::string::npos);
}

TEST_CASE("the header and tensor table show target, sm count, names, dtypes, shapes, bytes and sources") {
  const auto text = disassemble(crafted(), fake_table());
  CHECK(text.rfind("packet: target hopper, 2 sms, abi version " + std::to_string(MET_PACKET_VERSION), 0) == 0);
  CHECK(text.find("  t1 model.layers.3.self_attn.o_proj.weight fp8_e4m3 [4096, 4096] 16777216 bytes, checkpoint ref 12\n") !=
        std::string::npos);
}

TEST_CASE("the stream summary counts entries and waits per SM") {
  const auto text = disassemble(crafted(), fake_table());
  CHECK(text.find("  streams: 2 sms, 3 entries, 1 waits\n"
                  "    sm 0: 2 entries, 1 waits, instructions 0..1, first 0.0, last 1.0\n"
                  "    sm 1: 1 entries, 0 waits, instructions 0..0, first 0.1, last 0.1\n") != std::string::npos);
}

TEST_CASE("the program filter keeps one program (a filter that is ignored is caught)") {
  const auto all = disassemble(crafted(), fake_table());
  CHECK(all.find("program decode_1:") != std::string::npos);
  CHECK(all.find("program prefill_16: prefill") != std::string::npos);
  const auto one = disassemble(crafted(), fake_table(), "prefill_16");
  CHECK(one.find("program decode_1:") == std::string::npos);
  CHECK(one.find("program prefill_16:") != std::string::npos);
}

TEST_CASE("disassembly is deterministic and ends each line with a newline") {
  const auto a = disassemble(crafted(), fake_table());
  CHECK(a == disassemble(crafted(), fake_table()));
  CHECK(a.back() == '\n');
  CHECK(a.find(" \n") == std::string::npos);
}
