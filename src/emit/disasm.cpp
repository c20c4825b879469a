// The disassembler. Operand, int and immediate names come from the opcode table; an opcode the
// table lacks prints its raw slots. Integers go through core/numfmt, floats print as the shortest
// text that reads back as the same float, so the text is stable.
#include "emit/disasm.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/numfmt.hpp"
#include "emit/abi_doc.hpp"

namespace met::emit {

namespace {

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (std::size_t k = 0; k < shape.size(); ++k) out += (k ? ", " : "") + fmt::format("{}", shape[k]);
  return out + "]";
}

std::string word_or_number(const char* word, std::uint32_t v) { return word ? std::string(word) : fmt::format("?{}", v); }

std::string handle_text(const PacketFile& file, std::uint32_t h) {
  if (h == MET_NO_TENSOR) return "-";
  if (h >= file.tensors.size()) return fmt::format("t{}(?)", h);
  return fmt::format("t{}({})", h, file.tensors[h].name);
}

std::string instr_line(const PacketFile& file, const InstrDesc& in, const OpcodeInfo* op, std::size_t index, int width) {
  std::string line = fmt::format("  {:>{}}  [g{}{}{}] {} slices={} ", index, width, in.group, in.scope.empty() ? "" : " ",
                                 in.scope, op ? op->name : fmt::format("opcode{}", in.opcode), in.slices);
  const std::size_t named_tensors = op ? op->tensors.size() : 0;
  for (std::size_t k = 0; k < std::max(named_tensors, in.tensors.size()); ++k) {
    const auto h = k < in.tensors.size() ? in.tensors[k] : MET_NO_TENSOR;
    if (k >= named_tensors && h == MET_NO_TENSOR) continue;
    const std::string name = k < named_tensors ? op->tensors[k].name : fmt::format("tensor{}", k);
    line += fmt::format(" {}={}", name, handle_text(file, h));
  }
  line += " ";
  const std::size_t named_ints = op ? op->ints.size() : 0;
  for (std::size_t k = 0; k < std::max(named_ints, in.ints.size()); ++k) {
    const auto v = k < in.ints.size() ? in.ints[k] : 0;
    if (k >= named_ints && v == 0) continue;
    line += fmt::format(" {}={}", k < named_ints ? op->ints[k] : fmt::format("int{}", k), fmt_int(v));
  }
  const std::size_t named_imms = op ? op->imms.size() : 0;
  for (std::size_t k = 0; k < std::max(named_imms, in.imms.size()); ++k) {
    const float v = k < in.imms.size() ? in.imms[k] : 0.0f;
    if (k >= named_imms && v == 0.0f) continue;
    // fmt's shortest round-trip form of the float itself ("1e-06"), locale-free.
    line += fmt::format(" {}={}", k < named_imms ? op->imms[k] : fmt::format("imm{}", k), v);
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line + "\n";
}

std::string streams_summary(const ProgramDesc& prog) {
  std::size_t entries = 0, waits = 0;
  for (const auto& st : prog.streams) {
    entries += st.size();
    for (const auto& e : st) waits += e.waits.size();
  }
  std::string out = fmt::format("  streams: {} sms, {} entries, {} waits\n", prog.streams.size(), entries, waits);
  const int width = static_cast<int>(fmt::format("{}", prog.streams.empty() ? 0 : prog.streams.size() - 1).size());
  for (std::size_t k = 0; k < prog.streams.size(); ++k) {
    const auto& st = prog.streams[k];
    std::size_t w = 0;
    for (const auto& e : st) w += e.waits.size();
    out += fmt::format("    sm {:>{}}: {} entries, {} waits", k, width, st.size(), w);
    if (!st.empty()) {
      const auto [lo, hi] =
          std::minmax_element(st.begin(), st.end(), [](const EntryDesc& a, const EntryDesc& b) { return a.instr < b.instr; });
      out += fmt::format(", instructions {}..{}, first {}.{}, last {}.{}", lo->instr, hi->instr, st.front().instr,
                         st.front().slice, st.back().instr, st.back().slice);
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string disassemble(const PacketFile& file, const std::vector<OpcodeInfo>& table, const std::string& program_filter) {
  std::map<std::uint32_t, const OpcodeInfo*> by_number;
  for (const auto& op : table) by_number.emplace(op.number, &op);

  std::string out =
      fmt::format("packet: target {}, {} sms, abi version {} hash {:#010x}\n",
                  file.target_class.empty() ? "-" : file.target_class, file.sm_count, MET_PACKET_VERSION, abi_hash());
  if (file.tp_ranks > 1) out += fmt::format("tensor parallel: rank {} of {}\n", file.tp_rank, file.tp_ranks);
  out += fmt::format("tensors: {}\n", file.tensors.size());
  const int twidth = static_cast<int>(fmt::format("{}", file.tensors.empty() ? 0 : file.tensors.size() - 1).size());
  for (std::size_t t = 0; t < file.tensors.size(); ++t) {
    const auto& d = file.tensors[t];
    out +=
        fmt::format("  t{:<{}} {} {} {} {} bytes, {} ref {}\n", t, twidth, d.name, word_or_number(dtype_name(d.dtype), d.dtype),
                    shape_text(d.shape), d.bytes, word_or_number(source_name(d.source), d.source), d.ref);
  }
  for (const auto& prog : file.programs) {
    if (!program_filter.empty() && prog.name != program_filter) continue;
    out += fmt::format("\nprogram {}: {}, rows {}, {} instructions, {} plan groups\n", prog.name,
                       word_or_number(program_kind_name(prog.kind), prog.kind), prog.rows, prog.instrs.size(),
                       prog.plan_group_count);
    const int width = static_cast<int>(fmt::format("{}", prog.instrs.empty() ? 0 : prog.instrs.size() - 1).size());
    for (std::size_t i = 0; i < prog.instrs.size(); ++i) {
      const auto& in = prog.instrs[i];
      const auto it = by_number.find(in.opcode);
      out += instr_line(file, in, it == by_number.end() ? nullptr : it->second, i, width);
    }
    out += streams_summary(prog);
  }
  return out;
}

}  // namespace met::emit
