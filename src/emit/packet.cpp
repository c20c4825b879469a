// model.pkt bytes <-> PacketFile. serialize() writes the header, then each table 8-byte aligned in
// the order of the header's offsets, then the string table; parse_packet() trusts nothing: every
// count, offset, index and string reference is checked (overflow-safe) before it is used.
// A parsed instruction always holds every ABI slot (12 tensors, 16 ints, 4 imms; unused ones are
// MET_NO_TENSOR / 0), so readers may index any slot; serialize pads shorter vectors the same way.
#include "emit/packet.hpp"

#include <bit>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "emit/opcodes.hpp"

#include "emit/abi_doc.hpp"

namespace met::emit {

static_assert(std::endian::native == std::endian::little, "the packet ABI is little-endian; add byte swapping for this host");

namespace {

// The hashed text: one token per record, field and array count, in .def order.
#define MET_STRUCT(S, doc) "struct " #S ";"
#define MET_FIELD(S, type, name, doc) #type " " #name ";"
#define MET_ARRAY(S, type, name, count, doc) #type " " #name "[" #count "];"
#define MET_END(S) "end " #S ";"
constexpr char kAbiText[] =
#include "emit/packet_fields.def"
    ;
#undef MET_STRUCT
#undef MET_FIELD
#undef MET_ARRAY
#undef MET_END

constexpr std::uint32_t kFnvOffset = 2166136261u;
constexpr std::uint32_t kFnvPrime = 16777619u;

constexpr std::uint32_t fnv1a(std::string_view text, std::uint32_t h = kFnvOffset) {
  for (char c : text) {
    h ^= static_cast<std::uint8_t>(c);
    h *= kFnvPrime;
  }
  return h;
}

// The field list, then the opcode table: every row's number, name, operands (name, read or
// write), ints and imms in order. An emit and a reader that disagree on what an instruction's
// operands mean refuse each other's files.
std::uint32_t compute_abi_hash() {
  std::string ops;
  for (const auto& o : opcode_table()) {
    ops += std::to_string(o.number) + " " + o.name + "(";
    for (const auto& t : o.tensors) ops += t.name + (t.write ? (t.by_slot ? ":ws," : ":w,") : ":r,");
    ops += ";";
    for (const auto& i : o.ints) ops += i + ",";
    ops += ";";
    for (const auto& f : o.imms) ops += f + ",";
    ops += ")\n";
  }
  return fnv1a(ops, fnv1a(std::string_view(kAbiText, sizeof(kAbiText) - 1)));
}

constexpr std::size_t kTableAlign = 8;
constexpr std::size_t kMaxRank = 4;
constexpr std::size_t kTensorSlots = sizeof(MetPktInstr::tensors) / sizeof(MetPktInstr::tensors[0]);
constexpr std::size_t kIntSlots = sizeof(MetPktInstr::ints) / sizeof(MetPktInstr::ints[0]);
constexpr std::size_t kImmSlots = sizeof(MetPktInstr::imms) / sizeof(MetPktInstr::imms[0]);
constexpr std::size_t kTargetBytes = sizeof(MetPktHeader::target_class);

std::size_t align_up(std::size_t n) { return (n + kTableAlign - 1) / kTableAlign * kTableAlign; }

std::uint32_t u32_or_throw(std::size_t v, const char* what) {
  if (v > std::numeric_limits<std::uint32_t>::max()) {
    throw std::length_error(fmt::format("serialize: {} ({}) does not fit the packet's 32-bit fields", what, v));
  }
  return static_cast<std::uint32_t>(v);
}

// Strings deduplicated; offset 0 is the empty string.
class StringTable {
 public:
  StringTable() { bytes_.push_back('\0'); }
  std::uint32_t add(const std::string& s) {
    if (s.empty()) return 0;
    if (s.find('\0') != std::string::npos) throw std::invalid_argument("serialize: string '" + s + "' holds a NUL");
    auto it = offsets_.find(s);
    if (it != offsets_.end()) return it->second;
    const auto off = u32_or_throw(bytes_.size(), "string table bytes");
    bytes_ += s;
    bytes_.push_back('\0');
    offsets_.emplace(s, off);
    return off;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
  std::map<std::string, std::uint32_t> offsets_;
};

template <class T>
void put(std::string& out, std::size_t offset, const T& record) {
  std::memcpy(out.data() + offset, &record, sizeof(T));
}

template <class T>
T get(const std::string& bytes, std::size_t offset) {
  T record;
  std::memcpy(&record, bytes.data() + offset, sizeof(T));
  return record;
}

}  // namespace

std::uint32_t abi_hash() {
  static const std::uint32_t h = compute_abi_hash();
  return h;
}

std::string serialize(const PacketFile& file) {
  if (file.target_class.size() >= kTargetBytes) {
    throw std::invalid_argument(
        fmt::format("serialize: target class '{}' is longer than {} bytes", file.target_class, kTargetBytes - 1));
  }
  StringTable strings;
  std::vector<MetPktTensor> tensors;
  std::vector<MetPktProgram> programs;
  std::vector<MetPktInstr> instrs;
  std::vector<MetPktStream> streams;
  std::vector<MetPktStreamEntry> entries;
  std::vector<MetPktWait> waits;

  for (std::size_t t = 0; t < file.tensors.size(); ++t) {
    const auto& d = file.tensors[t];
    if (d.shape.size() > kMaxRank) {
      throw std::invalid_argument(fmt::format("serialize: tensor {} '{}': rank {} > {}", t, d.name, d.shape.size(), kMaxRank));
    }
    MetPktTensor r{};
    r.name = strings.add(d.name);
    r.dtype = d.dtype;
    r.rank = static_cast<std::uint32_t>(d.shape.size());
    r.source = d.source;
    for (std::size_t k = 0; k < d.shape.size(); ++k) r.shape[k] = d.shape[k];
    r.bytes = d.bytes;
    r.ref = d.ref;
    tensors.push_back(r);
  }

  for (std::size_t p = 0; p < file.programs.size(); ++p) {
    const auto& prog = file.programs[p];
    if (prog.streams.size() > file.sm_count) {
      throw std::invalid_argument(
          fmt::format("serialize: program '{}': {} streams for {} sms", prog.name, prog.streams.size(), file.sm_count));
    }
    MetPktProgram r{};
    r.name = strings.add(prog.name);
    r.kind = prog.kind;
    r.rows = prog.rows;
    r.first_instr = u32_or_throw(instrs.size(), "instructions");
    r.n_instrs = u32_or_throw(prog.instrs.size(), "instructions of a program");
    r.first_stream = u32_or_throw(streams.size(), "streams");
    r.plan_group_count = prog.plan_group_count;
    programs.push_back(r);

    for (std::size_t i = 0; i < prog.instrs.size(); ++i) {
      const auto& d = prog.instrs[i];
      if (d.tensors.size() > kTensorSlots || d.ints.size() > kIntSlots || d.imms.size() > kImmSlots) {
        throw std::invalid_argument(
            fmt::format("serialize: program '{}': instruction {}: {} tensors, {} ints, {} imms (at most {}, {}, {})", prog.name,
                        i, d.tensors.size(), d.ints.size(), d.imms.size(), kTensorSlots, kIntSlots, kImmSlots));
      }
      MetPktInstr in{};
      in.opcode = d.opcode;
      in.slices = d.slices;
      in.group = d.group;
      in.scope = strings.add(d.scope);
      for (std::size_t k = 0; k < kTensorSlots; ++k) in.tensors[k] = k < d.tensors.size() ? d.tensors[k] : MET_NO_TENSOR;
      for (std::size_t k = 0; k < d.ints.size(); ++k) in.ints[k] = d.ints[k];
      for (std::size_t k = 0; k < d.imms.size(); ++k) in.imms[k] = d.imms[k];
      instrs.push_back(in);
    }
    for (std::uint32_t s = 0; s < file.sm_count; ++s) {
      MetPktStream st{};
      st.first_entry = u32_or_throw(entries.size(), "stream entries");
      if (s < prog.streams.size()) {
        for (const auto& e : prog.streams[s]) {
          MetPktStreamEntry er{};
          er.instr = e.instr;
          er.slice = e.slice;
          er.first_wait = u32_or_throw(waits.size(), "waits");
          er.n_waits = u32_or_throw(e.waits.size(), "waits of an entry");
          for (const auto& w : e.waits) waits.push_back(MetPktWait{w.counter, w.value});
          entries.push_back(er);
        }
        st.n_entries = u32_or_throw(prog.streams[s].size(), "entries of a stream");
      }
      streams.push_back(st);
    }
  }

  MetPktHeader h{};
  h.magic = MET_PACKET_MAGIC;
  h.version = MET_PACKET_VERSION;
  h.abi_hash = abi_hash();
  std::memcpy(h.target_class, file.target_class.data(), file.target_class.size());
  h.sm_count = file.sm_count;
  h.tp_ranks = static_cast<std::uint16_t>(file.tp_ranks);
  h.tp_rank = static_cast<std::uint16_t>(file.tp_rank);
  h.n_tensors = u32_or_throw(tensors.size(), "tensors");
  h.n_programs = u32_or_throw(programs.size(), "programs");
  h.n_instrs = u32_or_throw(instrs.size(), "instructions");
  h.n_stream_entries = u32_or_throw(entries.size(), "stream entries");
  h.n_waits = u32_or_throw(waits.size(), "waits");
  h.strings_bytes = u32_or_throw(strings.bytes().size(), "string table bytes");

  std::size_t at = align_up(sizeof(MetPktHeader));
  const auto place = [&at](std::size_t bytes) {
    const std::size_t off = at;
    at = align_up(at + bytes);
    return static_cast<std::uint64_t>(off);
  };
  h.tensors_offset = place(tensors.size() * sizeof(MetPktTensor));
  h.programs_offset = place(programs.size() * sizeof(MetPktProgram));
  h.instrs_offset = place(instrs.size() * sizeof(MetPktInstr));
  h.streams_offset = place(streams.size() * sizeof(MetPktStream));
  h.entries_offset = place(entries.size() * sizeof(MetPktStreamEntry));
  h.waits_offset = place(waits.size() * sizeof(MetPktWait));
  h.strings_offset = at;
  h.file_bytes = h.strings_offset + strings.bytes().size();

  std::string out(h.file_bytes, '\0');
  put(out, 0, h);
  const auto put_all = [&out](std::uint64_t offset, const auto& records) {
    for (std::size_t k = 0; k < records.size(); ++k) put(out, offset + k * sizeof(records[k]), records[k]);
  };
  put_all(h.tensors_offset, tensors);
  put_all(h.programs_offset, programs);
  put_all(h.instrs_offset, instrs);
  put_all(h.streams_offset, streams);
  put_all(h.entries_offset, entries);
  put_all(h.waits_offset, waits);
  std::memcpy(out.data() + h.strings_offset, strings.bytes().data(), strings.bytes().size());
  return out;
}

namespace {

// Reading state shared by the checks: the bytes, the header and the display name.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& display) : bytes_(bytes), display_(display) {}

  Error error(const std::string& what) const { return fail(display_ + ": " + what); }

  // A table of `count` records of `record_bytes` each at `offset` must lie inside the file.
  Expected<void> check_table(const char* table, std::uint64_t offset, std::uint64_t count, std::uint64_t record_bytes) const {
    const std::uint64_t size = bytes_.size();
    if (offset > size) {
      return error(fmt::format("{} table offset {} past end of file ({} bytes)", table, offset, size));
    }
    if (offset % kTableAlign != 0) {
      return error(fmt::format("{} table offset {} is not {}-byte aligned", table, offset, kTableAlign));
    }
    // Divide instead of multiplying: the stream count (programs x sm count) may be near 2^64.
    if (count > (size - offset) / record_bytes) {
      return error(fmt::format("{} table ({} records of {} bytes at offset {}) runs past end of file ({} bytes)", table, count,
                               record_bytes, offset, size));
    }
    return {};
  }

  // A string reference: in bounds of the string table and NUL-terminated inside it.
  Expected<std::string> string_at(const std::string& where, std::uint32_t offset) const {
    if (offset >= strings_bytes_) {
      return error(fmt::format("{}: string offset {} past end of string table ({} bytes)", where, offset, strings_bytes_));
    }
    const char* base = bytes_.data() + strings_offset_;
    const void* nul = std::memchr(base + offset, '\0', strings_bytes_ - offset);
    if (nul == nullptr)
      return error(fmt::format("{}: string at offset {} is not NUL-terminated in the string table", where, offset));
    return std::string(base + offset, static_cast<const char*>(nul));
  }

  void set_strings(std::uint64_t offset, std::uint64_t bytes) {
    strings_offset_ = offset;
    strings_bytes_ = bytes;
  }

 private:
  const std::string& bytes_;
  const std::string& display_;
  std::uint64_t strings_offset_ = 0;
  std::uint64_t strings_bytes_ = 0;
};

}  // namespace

Expected<PacketFile> parse_packet(const std::string& bytes, const std::string& display) {
  Reader rd(bytes, display);
  if (bytes.size() < sizeof(MetPktHeader)) {
    return rd.error(fmt::format("truncated: {} bytes, shorter than the {}-byte header", bytes.size(), sizeof(MetPktHeader)));
  }
  const auto h = get<MetPktHeader>(bytes, 0);
  if (h.magic != MET_PACKET_MAGIC) {
    return rd.error(
        fmt::format("not a packet file: magic {:#018x}, expected {:#018x} (\"METPKT01\")", h.magic, MET_PACKET_MAGIC));
  }
  if (h.version != MET_PACKET_VERSION) {
    return rd.error(
        fmt::format("packet ABI version {} but this met reads version {}; re-emit the assets", h.version, MET_PACKET_VERSION));
  }
  if (h.abi_hash != abi_hash()) {
    return rd.error(
        fmt::format("packet ABI hash {:#010x} but this met was built with {:#010x} (a different field list); re-emit the assets",
                    h.abi_hash, abi_hash()));
  }
  if (h.file_bytes != bytes.size()) {
    if (h.file_bytes > bytes.size()) {
      return rd.error(fmt::format("truncated: header says {} bytes, file has {}", h.file_bytes, bytes.size()));
    }
    return rd.error(fmt::format("{} trailing bytes: header says {} bytes, file has {}", bytes.size() - h.file_bytes, h.file_bytes,
                                bytes.size()));
  }
  const void* target_nul = std::memchr(h.target_class, '\0', kTargetBytes);
  if (target_nul == nullptr)
    return rd.error(fmt::format("header: target class is not NUL-terminated within {} bytes", kTargetBytes));
  if (h.tp_ranks < 1 || h.tp_ranks > kMaxTpRanks || h.tp_rank >= h.tp_ranks)
    return rd.error(fmt::format("header: tensor-parallel rank {} of {} ranks (1 to {} ranks, rank below them)", h.tp_rank,
                                h.tp_ranks, kMaxTpRanks));
  if (h.n_programs > 0 && h.sm_count == 0) return rd.error("header: sm count is 0 but the file holds programs");

  const std::uint64_t n_streams = std::uint64_t{h.n_programs} * h.sm_count;
  MET_CHECK(rd.check_table("tensor", h.tensors_offset, h.n_tensors, sizeof(MetPktTensor)));
  MET_CHECK(rd.check_table("program", h.programs_offset, h.n_programs, sizeof(MetPktProgram)));
  MET_CHECK(rd.check_table("instruction", h.instrs_offset, h.n_instrs, sizeof(MetPktInstr)));
  MET_CHECK(rd.check_table("stream", h.streams_offset, n_streams, sizeof(MetPktStream)));
  MET_CHECK(rd.check_table("stream entry", h.entries_offset, h.n_stream_entries, sizeof(MetPktStreamEntry)));
  MET_CHECK(rd.check_table("wait", h.waits_offset, h.n_waits, sizeof(MetPktWait)));
  if (h.strings_offset > bytes.size() || h.strings_bytes > bytes.size() - h.strings_offset) {
    return rd.error(fmt::format("string table ({} bytes at offset {}) runs past end of file ({} bytes)", h.strings_bytes,
                                h.strings_offset, bytes.size()));
  }
  rd.set_strings(h.strings_offset, h.strings_bytes);

  PacketFile file;
  file.target_class = std::string(reinterpret_cast<const char*>(h.target_class),
                                  static_cast<std::size_t>(static_cast<const std::uint8_t*>(target_nul) - h.target_class));
  file.sm_count = h.sm_count;
  file.tp_ranks = h.tp_ranks;
  file.tp_rank = h.tp_rank;

  file.tensors.reserve(h.n_tensors);
  for (std::uint32_t t = 0; t < h.n_tensors; ++t) {
    const auto r = get<MetPktTensor>(bytes, h.tensors_offset + std::uint64_t{t} * sizeof(MetPktTensor));
    const std::string where = fmt::format("tensor {}", t);
    TensorDesc d;
    MET_TRY(d.name, rd.string_at(where + ": name", r.name));
    if (r.rank > kMaxRank) return rd.error(fmt::format("{} '{}': rank {} > {}", where, d.name, r.rank, kMaxRank));
    if (dtype_name(r.dtype) == nullptr) return rd.error(fmt::format("{} '{}': unknown dtype {}", where, d.name, r.dtype));
    if (source_name(r.source) == nullptr) return rd.error(fmt::format("{} '{}': unknown source {}", where, d.name, r.source));
    d.dtype = r.dtype;
    d.source = r.source;
    d.shape.assign(r.shape, r.shape + r.rank);
    d.bytes = r.bytes;
    d.ref = r.ref;
    file.tensors.push_back(std::move(d));
  }

  // Tables are laid out in order, each range starting where the previous one ended (what
  // serialize writes); so no record is read twice and the work is linear in the file size.
  std::uint64_t next_instr = 0, next_entry = 0, next_wait = 0;
  file.programs.reserve(h.n_programs);
  for (std::uint32_t p = 0; p < h.n_programs; ++p) {
    const auto r = get<MetPktProgram>(bytes, h.programs_offset + std::uint64_t{p} * sizeof(MetPktProgram));
    ProgramDesc prog;
    MET_TRY(prog.name, rd.string_at(fmt::format("program {}: name", p), r.name));
    const std::string where = fmt::format("program {} '{}'", p, prog.name);
    if (program_kind_name(r.kind) == nullptr) return rd.error(fmt::format("{}: unknown kind {}", where, r.kind));
    if (r.reserved != 0) return rd.error(fmt::format("{}: reserved field is {}, expected 0", where, r.reserved));
    if (r.first_instr != next_instr) {
      return rd.error(fmt::format("{}: first instruction {}, expected {} (programs' instructions follow each other)", where,
                                  r.first_instr, next_instr));
    }
    if (r.first_stream != std::uint64_t{p} * h.sm_count) {
      return rd.error(fmt::format("{}: first stream {}, expected {} (sm count {} per program)", where, r.first_stream,
                                  std::uint64_t{p} * h.sm_count, h.sm_count));
    }
    if (std::uint64_t{r.first_instr} + r.n_instrs > h.n_instrs) {
      return rd.error(fmt::format("{}: instructions [{}, {}) past the instruction table ({} instructions)", where, r.first_instr,
                                  std::uint64_t{r.first_instr} + r.n_instrs, h.n_instrs));
    }
    if (std::uint64_t{r.first_stream} + h.sm_count > n_streams) {
      return rd.error(fmt::format("{}: streams [{}, {}) past the stream table ({} streams)", where, r.first_stream,
                                  std::uint64_t{r.first_stream} + h.sm_count, n_streams));
    }
    next_instr += r.n_instrs;
    prog.kind = r.kind;
    prog.rows = r.rows;
    prog.plan_group_count = r.plan_group_count;

    prog.instrs.reserve(r.n_instrs);
    for (std::uint32_t i = 0; i < r.n_instrs; ++i) {
      const auto in = get<MetPktInstr>(bytes, h.instrs_offset + (std::uint64_t{r.first_instr} + i) * sizeof(MetPktInstr));
      const std::string iwhere = fmt::format("{}: instruction {}", where, i);
      InstrDesc d;
      d.opcode = in.opcode;
      d.slices = in.slices;
      d.group = in.group;
      MET_TRY(d.scope, rd.string_at(iwhere + ": scope", in.scope));
      for (std::size_t k = 0; k < kTensorSlots; ++k) {
        if (in.tensors[k] != MET_NO_TENSOR && in.tensors[k] >= h.n_tensors) {
          return rd.error(fmt::format("{}: tensor slot {} holds handle {}, but the file has {} tensors", iwhere, k, in.tensors[k],
                                      h.n_tensors));
        }
      }
      d.tensors.assign(std::begin(in.tensors), std::end(in.tensors));
      d.ints.assign(std::begin(in.ints), std::end(in.ints));
      d.imms.assign(std::begin(in.imms), std::end(in.imms));
      prog.instrs.push_back(std::move(d));
    }

    prog.streams.resize(h.sm_count);
    for (std::uint32_t s = 0; s < h.sm_count; ++s) {
      const auto st = get<MetPktStream>(bytes, h.streams_offset + (std::uint64_t{r.first_stream} + s) * sizeof(MetPktStream));
      const std::string swhere = fmt::format("{}: stream {}", where, s);
      if (st.first_entry != next_entry) {
        return rd.error(fmt::format("{}: first entry {}, expected {} (streams' entries follow each other)", swhere,
                                    st.first_entry, next_entry));
      }
      if (std::uint64_t{st.first_entry} + st.n_entries > h.n_stream_entries) {
        return rd.error(fmt::format("{}: entries [{}, {}) past the entry table ({} entries)", swhere, st.first_entry,
                                    std::uint64_t{st.first_entry} + st.n_entries, h.n_stream_entries));
      }
      next_entry += st.n_entries;
      auto& stream = prog.streams[s];
      stream.reserve(st.n_entries);
      for (std::uint32_t e = 0; e < st.n_entries; ++e) {
        const auto er =
            get<MetPktStreamEntry>(bytes, h.entries_offset + (std::uint64_t{st.first_entry} + e) * sizeof(MetPktStreamEntry));
        const std::string ewhere = fmt::format("{}: entry {}", swhere, e);
        if (er.instr >= r.n_instrs) {
          return rd.error(fmt::format("{}: instruction {} but the program has {} instructions", ewhere, er.instr, r.n_instrs));
        }
        const auto slices = prog.instrs[er.instr].slices;
        if (er.slice >= slices) {
          return rd.error(fmt::format("{}: slice {} of instruction {}, which has {} slices", ewhere, er.slice, er.instr, slices));
        }
        if (er.first_wait != next_wait) {
          return rd.error(
              fmt::format("{}: first wait {}, expected {} (entries' waits follow each other)", ewhere, er.first_wait, next_wait));
        }
        if (std::uint64_t{er.first_wait} + er.n_waits > h.n_waits) {
          return rd.error(fmt::format("{}: waits [{}, {}) past the wait table ({} waits)", ewhere, er.first_wait,
                                      std::uint64_t{er.first_wait} + er.n_waits, h.n_waits));
        }
        next_wait += er.n_waits;
        EntryDesc d;
        d.instr = er.instr;
        d.slice = er.slice;
        d.waits.reserve(er.n_waits);
        for (std::uint32_t w = 0; w < er.n_waits; ++w) {
          const auto wr = get<MetPktWait>(bytes, h.waits_offset + (std::uint64_t{er.first_wait} + w) * sizeof(MetPktWait));
          if (wr.counter >= r.n_instrs) {
            return rd.error(
                fmt::format("{}: wait {} on counter {} but the program has {} instructions", ewhere, w, wr.counter, r.n_instrs));
          }
          d.waits.push_back(WaitDesc{wr.counter, wr.value});
        }
        stream.push_back(std::move(d));
      }
    }
    file.programs.push_back(std::move(prog));
  }
  if (next_instr != h.n_instrs || next_entry != h.n_stream_entries || next_wait != h.n_waits) {
    return rd.error(fmt::format("header counts {} instructions, {} entries, {} waits but the programs use {}, {}, {}", h.n_instrs,
                                h.n_stream_entries, h.n_waits, next_instr, next_entry, next_wait));
  }
  return file;
}

}  // namespace met::emit
