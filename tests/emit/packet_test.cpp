// model.pkt bytes: the layout the .def implies, a round trip through serialize/parse, and every
// corruption parse_packet must refuse, one named case each with its located message.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "emit/abi_doc.hpp"
#include "emit/packet.hpp"

using namespace met;
using namespace met::emit;

namespace {

const char* kDisplay = "assets/x/model.pkt";

// Every instruction carries all ABI slots, as parse_packet returns them.
InstrDesc instr(std::uint32_t opcode, std::uint32_t slices, std::vector<std::uint32_t> tensors, std::vector<std::int64_t> ints,
                std::vector<float> imms, std::string scope) {
  InstrDesc d;
  d.opcode = opcode;
  d.slices = slices;
  d.group = opcode + 1;
  d.scope = std::move(scope);
  d.tensors = std::move(tensors);
  d.tensors.resize(12, MET_NO_TENSOR);
  d.ints = std::move(ints);
  d.ints.resize(16, 0);
  d.imms = std::move(imms);
  d.imms.resize(4, 0.0f);
  return d;
}

PacketFile crafted() {
  PacketFile f;
  f.target_class = "hopper";
  f.sm_count = 2;
  f.tensors = {
      {"x", MET_DTYPE_BF16, {4, 8}, 64, MET_SOURCE_SCRATCH, 0},
      {"model.w", MET_DTYPE_FP8_E4M3, {8, 8}, 72, MET_SOURCE_CHECKPOINT, 3},
      {"kv.0", MET_DTYPE_BF16, {2, 16, 8}, 512, MET_SOURCE_KV, 0},
      {"x", MET_DTYPE_F32, {}, 4, MET_SOURCE_IO, 7},  // a repeated name shares its string
  };
  ProgramDesc decode;
  decode.name = "decode_4";
  decode.kind = MET_PROGRAM_DECODE;
  decode.rows = 4;
  decode.plan_group_count = 2;
  decode.instrs = {instr(0, 2, {0, 1}, {4, -1}, {1e-6f}, "layers:full L0"),
                   instr(1, 2, {0, 2, MET_NO_TENSOR, 3}, {4}, {}, "layers:full L0")};
  decode.streams = {{{0, 0, {}}, {1, 1, {{0, 2}}}}, {{0, 1, {}}, {1, 0, {{0, 2}, {0, 1}}}}};
  ProgramDesc prefill;
  prefill.name = "prefill_16";
  prefill.kind = MET_PROGRAM_PREFILL;
  prefill.rows = 16;
  prefill.instrs = {instr(2, 3, {2}, {16}, {0.5f, -2.0f}, "")};
  prefill.streams = {{{0, 0, {}}, {0, 2, {}}}, {{0, 1, {}}}};
  f.programs = {decode, prefill};
  return f;
}

void check_equal(const PacketFile& a, const PacketFile& b) {
  CHECK(a.target_class == b.target_class);
  CHECK(a.sm_count == b.sm_count);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (std::size_t t = 0; t < a.tensors.size(); ++t) {
    CAPTURE(t);
    CHECK(a.tensors[t].name == b.tensors[t].name);
    CHECK(a.tensors[t].dtype == b.tensors[t].dtype);
    CHECK(a.tensors[t].shape == b.tensors[t].shape);
    CHECK(a.tensors[t].bytes == b.tensors[t].bytes);
    CHECK(a.tensors[t].source == b.tensors[t].source);
    CHECK(a.tensors[t].ref == b.tensors[t].ref);
  }
  REQUIRE(a.programs.size() == b.programs.size());
  for (std::size_t p = 0; p < a.programs.size(); ++p) {
    CAPTURE(p);
    const auto &x = a.programs[p], &y = b.programs[p];
    CHECK(x.name == y.name);
    CHECK(x.kind == y.kind);
    CHECK(x.rows == y.rows);
    CHECK(x.plan_group_count == y.plan_group_count);
    REQUIRE(x.instrs.size() == y.instrs.size());
    for (std::size_t i = 0; i < x.instrs.size(); ++i) {
      CAPTURE(i);
      CHECK(x.instrs[i].opcode == y.instrs[i].opcode);
      CHECK(x.instrs[i].slices == y.instrs[i].slices);
      CHECK(x.instrs[i].group == y.instrs[i].group);
      CHECK(x.instrs[i].scope == y.instrs[i].scope);
      CHECK(x.instrs[i].tensors == y.instrs[i].tensors);
      CHECK(x.instrs[i].ints == y.instrs[i].ints);
      CHECK(x.instrs[i].imms == y.instrs[i].imms);
    }
    REQUIRE(x.streams.size() == y.streams.size());
    for (std::size_t s = 0; s < x.streams.size(); ++s) {
      REQUIRE(x.streams[s].size() == y.streams[s].size());
      for (std::size_t e = 0; e < x.streams[s].size(); ++e) {
        CAPTURE(s);
        CAPTURE(e);
        CHECK(x.streams[s][e].instr == y.streams[s][e].instr);
        CHECK(x.streams[s][e].slice == y.streams[s][e].slice);
        REQUIRE(x.streams[s][e].waits.size() == y.streams[s][e].waits.size());
        for (std::size_t w = 0; w < x.streams[s][e].waits.size(); ++w) {
          CHECK(x.streams[s][e].waits[w].counter == y.streams[s][e].waits[w].counter);
          CHECK(x.streams[s][e].waits[w].value == y.streams[s][e].waits[w].value);
        }
      }
    }
  }
}

template <class T>
T read_at(const std::string& bytes, std::uint64_t offset) {
  T r;
  std::memcpy(&r, bytes.data() + offset, sizeof(T));
  return r;
}
template <class T>
void write_at(std::string& bytes, std::uint64_t offset, const T& r) {
  std::memcpy(bytes.data() + offset, &r, sizeof(T));
}
MetPktHeader header_of(const std::string& bytes) { return read_at<MetPktHeader>(bytes, 0); }

// The crafted file with one record edited in place.
template <class Edit>
std::string with_header(Edit edit) {
  std::string b = serialize(crafted());
  auto h = header_of(b);
  edit(h);
  write_at(b, 0, h);
  return b;
}
template <class T, class Edit>
std::string with_record(std::uint64_t MetPktHeader::*table, std::size_t index, Edit edit) {
  std::string b = serialize(crafted());
  const auto off = header_of(b).*table + index * sizeof(T);
  auto r = read_at<T>(b, off);
  edit(r);
  write_at(b, off, r);
  return b;
}

std::string parse_error(const std::string& bytes) {
  auto p = parse_packet(bytes, kDisplay);
  return p ? std::string("no error") : p.error().message;
}

std::string located(const std::string& what) { return std::string(kDisplay) + ": " + what; }

}  // namespace

TEST_CASE("the ABI hash and version are pinned: a field-list or opcode-table change without a version bump is caught") {
  // Changing packet_fields.def or the opcode table changes abi_hash(); then bump MET_PACKET_VERSION
  // and update both pins.
  CHECK(MET_PACKET_VERSION == 27u);
  CHECK(abi_hash() == 0x3f3871d8u);
}

TEST_CASE("layout: every field sits at the offset the .def implies (packed, naturally aligned, no padding)") {
  const auto& fields = abi_fields();
  REQUIRE(!fields.empty());
  std::size_t expect = 0;
  for (std::size_t k = 0; k < fields.size(); ++k) {
    const auto& f = fields[k];
    CAPTURE(f.record);
    CAPTURE(f.name);
    if (k == 0 || fields[k - 1].record != f.record) expect = 0;
    CHECK(f.offset == expect);
    CHECK(f.offset % f.type_bytes == 0);
    expect += f.type_bytes * f.count;
    if (k + 1 == fields.size() || fields[k + 1].record != f.record) {
      CHECK(f.record_bytes == expect);
      CHECK(f.record_bytes % 8 == 0);  // tables of records stay 8-byte aligned
    }
  }
  CHECK(sizeof(MetPktHeader) == 128);
  CHECK(sizeof(MetPktTensor) == 64);
  CHECK(sizeof(MetPktProgram) == 32);
  CHECK(sizeof(MetPktInstr) == 208);
  CHECK(sizeof(MetPktStream) == 8);
  CHECK(sizeof(MetPktStreamEntry) == 16);
  CHECK(sizeof(MetPktWait) == 8);
}

TEST_CASE("layout: the type names of the .def have the sizes the docs promise") {
  for (const auto& f : abi_fields()) {
    CAPTURE(f.name);
    const std::size_t expect = f.type == "u8" ? 1 : f.type == "u16" ? 2 : (f.type == "u32" || f.type == "f32") ? 4 : 8;
    CHECK(f.type_bytes == expect);
  }
}

TEST_CASE("round trip: serialize, parse, equal; serializing again gives identical bytes") {
  const PacketFile f = crafted();
  const std::string bytes = serialize(f);
  auto p = parse_packet(bytes, kDisplay);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  check_equal(f, *p);
  CHECK(serialize(*p) == bytes);
}

TEST_CASE("serialize lays tables out 8-byte aligned in the header's order and ends at file_bytes") {
  const std::string b = serialize(crafted());
  const auto h = header_of(b);
  CHECK(h.magic == MET_PACKET_MAGIC);
  CHECK_MESSAGE(std::memcmp(&h.magic, "METPKT01", 8) == 0,
                "MET_PACKET_MAGIC must spell \"METPKT01\" in file order: 0x3130544B5054454D (packet_abi.h)");
  CHECK(h.file_bytes == b.size());
  const std::uint64_t offsets[] = {h.tensors_offset, h.programs_offset, h.instrs_offset, h.streams_offset,
                                   h.entries_offset, h.waits_offset,    h.strings_offset};
  std::uint64_t prev = sizeof(MetPktHeader);
  for (auto o : offsets) {
    CHECK(o % 8 == 0);
    CHECK(o >= prev);
    prev = o;
  }
  CHECK(h.n_instrs == 3);
  CHECK(h.n_stream_entries == 7);
  CHECK(h.n_waits == 3);
  CHECK(h.strings_offset + h.strings_bytes == h.file_bytes);
}

TEST_CASE("serialize flattens programs: first_instr, first_stream, first_entry and first_wait run on") {
  const std::string b = serialize(crafted());
  const auto h = header_of(b);
  const auto p1 = read_at<MetPktProgram>(b, h.programs_offset + sizeof(MetPktProgram));
  CHECK(p1.first_instr == 2);
  CHECK(p1.n_instrs == 1);
  CHECK(p1.first_stream == 2);
  const auto s1 = read_at<MetPktStream>(b, h.streams_offset + sizeof(MetPktStream));
  CHECK(s1.first_entry == 2);
  const auto e3 = read_at<MetPktStreamEntry>(b, h.entries_offset + 3 * sizeof(MetPktStreamEntry));
  CHECK(e3.first_wait == 1);
  CHECK(e3.n_waits == 2);
}

TEST_CASE("the string table holds each name once (a repeated tensor name is deduplicated)") {
  const std::string b = serialize(crafted());
  const auto h = header_of(b);
  const auto t0 = read_at<MetPktTensor>(b, h.tensors_offset);
  const auto t3 = read_at<MetPktTensor>(b, h.tensors_offset + 3 * sizeof(MetPktTensor));
  CHECK(t0.name == t3.name);
  CHECK(b[h.strings_offset + t0.name + 1] == '\0');
}

TEST_CASE("a short instruction is padded: unused tensor slots read back as MET_NO_TENSOR, ints and imms as 0") {
  PacketFile f = crafted();
  f.programs[1].instrs[0].tensors = {2};
  f.programs[1].instrs[0].ints = {16};
  f.programs[1].instrs[0].imms = {};
  auto p = parse_packet(serialize(f), kDisplay);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  const auto& in = p->programs[1].instrs[0];
  REQUIRE(in.tensors.size() == 12);
  CHECK(in.tensors[0] == 2);
  CHECK(in.tensors[11] == MET_NO_TENSOR);
  CHECK(in.ints == std::vector<std::int64_t>{16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(in.imms == std::vector<float>(4, 0.0f));
}

TEST_CASE("an empty file (no tensors, no programs) round-trips") {
  PacketFile f;
  f.target_class = "cpu";
  auto p = parse_packet(serialize(f), kDisplay);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  CHECK(p->target_class == "cpu");
  CHECK(p->programs.empty());
}

TEST_CASE("truncated files are refused at every cut: inside the header, inside a table, one byte short") {
  const std::string b = serialize(crafted());
  CHECK(parse_error("") == located("truncated: 0 bytes, shorter than the 128-byte header"));
  CHECK(parse_error(b.substr(0, 10)) == located("truncated: 10 bytes, shorter than the 128-byte header"));
  CHECK(parse_error(b.substr(0, 127)) == located("truncated: 127 bytes, shorter than the 128-byte header"));
  for (std::size_t cut : {std::size_t{128}, std::size_t{200}, b.size() / 2, b.size() - 1}) {
    CAPTURE(cut);
    CHECK(parse_error(b.substr(0, cut)) ==
          located("truncated: header says " + std::to_string(b.size()) + " bytes, file has " + std::to_string(cut)));
  }
}

TEST_CASE("trailing bytes after file_bytes are refused") {
  const std::string b = serialize(crafted()) + "xx";
  CHECK(parse_error(b).find("2 trailing bytes") != std::string::npos);
}

TEST_CASE("wrong magic: not a packet file") {
  char expect[24];
  std::snprintf(expect, sizeof expect, "%#018llx", static_cast<unsigned long long>(MET_PACKET_MAGIC));
  CHECK(parse_error(with_header([](MetPktHeader& h) { h.magic = 0x1234; })) ==
        located(std::string("not a packet file: magic 0x0000000000001234, expected ") + expect + " (\"METPKT01\")"));
}

TEST_CASE("wrong version: the message names both versions") {
  CHECK(parse_error(with_header([](MetPktHeader& h) { h.version = MET_PACKET_VERSION + 1; })) ==
        located("packet ABI version " + std::to_string(MET_PACKET_VERSION + 1) + " but this met reads version " +
                std::to_string(MET_PACKET_VERSION) + "; re-emit the assets"));
}

TEST_CASE("wrong abi hash: the message names both hashes") {
  const auto msg = parse_error(with_header([](MetPktHeader& h) { h.abi_hash ^= 1; }));
  char theirs[16], ours[16];
  std::snprintf(theirs, sizeof theirs, "%#010x", abi_hash() ^ 1u);
  std::snprintf(ours, sizeof ours, "%#010x", abi_hash());
  CHECK(msg == located(std::string("packet ABI hash ") + theirs + " but this met was built with " + ours +
                       " (a different field list); re-emit the assets"));
}

TEST_CASE("a table offset past the end of the file is refused (and a huge one does not overflow)") {
  CHECK(parse_error(with_header([](MetPktHeader& h) {
          h.instrs_offset = 1u << 20;
        })).find("instruction table offset 1048576 past end of file") != std::string::npos);
  CHECK(parse_error(with_header([](MetPktHeader& h) { h.waits_offset = ~std::uint64_t{7}; })).find("wait table offset") !=
        std::string::npos);
}

TEST_CASE("a table that starts inside the file but runs past its end is refused") {
  const auto msg = parse_error(with_header([](MetPktHeader& h) { h.n_stream_entries = 1000; }));
  CHECK(msg.find("stream entry table (1000 records of 16 bytes") != std::string::npos);
  CHECK(msg.find("runs past end of file") != std::string::npos);
}

TEST_CASE("a count so large that count * record size would overflow 32 bits is refused by size") {
  const auto msg = parse_error(with_header([](MetPktHeader& h) { h.n_tensors = 0xFFFFFFFFu; }));
  CHECK(msg.find("tensor table (4294967295 records of 64 bytes") != std::string::npos);
}

TEST_CASE("a misaligned table offset is refused") {
  CHECK(parse_error(with_header([](MetPktHeader& h) { h.tensors_offset += 4; })).find("not 8-byte aligned") != std::string::npos);
}

TEST_CASE("a string table running past the end is refused") {
  CHECK(parse_error(with_header([](MetPktHeader& h) { h.strings_bytes += 1; })).find("string table") != std::string::npos);
}

TEST_CASE("a target class without its NUL in 16 bytes is refused") {
  CHECK(parse_error(with_header([](MetPktHeader& h) { std::memset(h.target_class, 'a', sizeof h.target_class); })) ==
        located("header: target class is not NUL-terminated within 16 bytes"));
}

TEST_CASE("a bad string offset is refused with the record it belongs to") {
  CHECK(parse_error(with_record<MetPktTensor>(&MetPktHeader::tensors_offset, 2, [](MetPktTensor& t) {
          t.name = 4096;
        })).find("tensor 2: name: string offset 4096 past end of string table") != std::string::npos);
  CHECK(parse_error(with_record<MetPktInstr>(&MetPktHeader::instrs_offset, 1, [](MetPktInstr& i) {
          i.scope = 1u << 30;
        })).find("program 0 'decode_4': instruction 1: scope: string offset") != std::string::npos);
}

TEST_CASE("a string that is not NUL-terminated inside the string table is refused") {
  std::string b = serialize(crafted());
  b.back() = 'z';  // the last string's NUL
  CHECK(parse_error(b).find("is not NUL-terminated in the string table") != std::string::npos);
}

TEST_CASE("a tensor of rank 5 is refused") {
  CHECK(parse_error(with_record<MetPktTensor>(&MetPktHeader::tensors_offset, 0, [](MetPktTensor& t) { t.rank = 5; })) ==
        located("tensor 0 'x': rank 5 > 4"));
}

TEST_CASE("an unknown dtype or source is refused") {
  CHECK(parse_error(with_record<MetPktTensor>(&MetPktHeader::tensors_offset, 1, [](MetPktTensor& t) { t.dtype = 99; })) ==
        located("tensor 1 'model.w': unknown dtype 99"));
  CHECK(parse_error(with_record<MetPktTensor>(&MetPktHeader::tensors_offset, 1, [](MetPktTensor& t) { t.source = 5; })) ==
        located("tensor 1 'model.w': unknown source 5"));
}

TEST_CASE("a tensor handle past the tensor table is refused; MET_NO_TENSOR is not") {
  CHECK(parse_error(with_record<MetPktInstr>(&MetPktHeader::instrs_offset, 0, [](MetPktInstr& i) { i.tensors[1] = 4; })) ==
        located("program 0 'decode_4': instruction 0: tensor slot 1 holds handle 4, but the file has 4 tensors"));
  CHECK(parse_error(with_record<MetPktInstr>(&MetPktHeader::instrs_offset, 0,
                                             [](MetPktInstr& i) { i.tensors[1] = MET_NO_TENSOR; })) == "no error");
}

TEST_CASE("an unknown program kind is refused") {
  CHECK(parse_error(with_record<MetPktProgram>(&MetPktHeader::programs_offset, 1, [](MetPktProgram& p) { p.kind = 2; })) ==
        located("program 1 'prefill_16': unknown kind 2"));
}

TEST_CASE("a program whose instructions run past the table is refused") {
  CHECK(parse_error(with_record<MetPktProgram>(&MetPktHeader::programs_offset, 1, [](MetPktProgram& p) { p.n_instrs = 2; })) ==
        located("program 1 'prefill_16': instructions [2, 4) past the instruction table (3 instructions)"));
}

TEST_CASE("a program whose ranges overlap the previous program's is refused (no record is read twice)") {
  CHECK(parse_error(with_record<MetPktProgram>(&MetPktHeader::programs_offset, 1, [](MetPktProgram& p) { p.first_instr = 0; })) ==
        located("program 1 'prefill_16': first instruction 0, expected 2 (programs' instructions follow each other)"));
  CHECK(parse_error(with_record<MetPktProgram>(&MetPktHeader::programs_offset, 1, [](MetPktProgram& p) {
          p.first_stream = 0;
        })) == located("program 1 'prefill_16': first stream 0, expected 2 (sm count 2 per program)"));
}

TEST_CASE("a stream whose entries run past the entry table is refused") {
  CHECK(parse_error(with_record<MetPktStream>(&MetPktHeader::streams_offset, 3, [](MetPktStream& s) { s.n_entries = 9; })) ==
        located("program 1 'prefill_16': stream 1: entries [6, 15) past the entry table (7 entries)"));
}

TEST_CASE("an entry naming an instruction past its program is refused") {
  CHECK(parse_error(with_record<MetPktStreamEntry>(&MetPktHeader::entries_offset, 4, [](MetPktStreamEntry& e) {
          e.instr = 1;
        })) == located("program 1 'prefill_16': stream 0: entry 0: instruction 1 but the program has 1 instructions"));
}

TEST_CASE("an entry slice >= the instruction's slices is refused") {
  CHECK(parse_error(with_record<MetPktStreamEntry>(&MetPktHeader::entries_offset, 1, [](MetPktStreamEntry& e) {
          e.slice = 2;
        })) == located("program 0 'decode_4': stream 0: entry 1: slice 2 of instruction 1, which has 2 slices"));
}

TEST_CASE("an entry whose waits run past the wait table is refused") {
  CHECK(parse_error(with_record<MetPktStreamEntry>(&MetPktHeader::entries_offset, 3, [](MetPktStreamEntry& e) {
          e.n_waits = 5;
        })) == located("program 0 'decode_4': stream 1: entry 1: waits [1, 6) past the wait table (3 waits)"));
}

TEST_CASE("a wait on a counter past the program's instructions is refused") {
  CHECK(parse_error(with_record<MetPktWait>(&MetPktHeader::waits_offset, 2, [](MetPktWait& w) { w.counter = 2; })) ==
        located("program 0 'decode_4': stream 1: entry 1: wait 1 on counter 2 but the program has 2 instructions"));
}

TEST_CASE("a tensor-parallel rank outside its ranks is refused") {
  CHECK(parse_error(with_header([](MetPktHeader& h) { h.tp_rank = 2; h.tp_ranks = 2; })) ==
        located("header: tensor-parallel rank 2 of 2 ranks (1 to 8 ranks, rank below them)"));
  CHECK(parse_error(with_header([](MetPktHeader& h) { h.tp_ranks = 0; })) ==
        located("header: tensor-parallel rank 0 of 0 ranks (1 to 8 ranks, rank below them)"));
  CHECK(parse_error(with_header([](MetPktHeader& h) { h.tp_ranks = 16; })) ==
        located("header: tensor-parallel rank 0 of 16 ranks (1 to 8 ranks, rank below them)"));
}

TEST_CASE("non-zero reserved fields are refused") {
  CHECK(parse_error(with_record<MetPktProgram>(&MetPktHeader::programs_offset, 0, [](MetPktProgram& p) { p.reserved = 3; })) ==
        located("program 0 'decode_4': reserved field is 3, expected 0"));
}

TEST_CASE("header counts that the programs do not use up are refused") {
  // One more wait in the header and the table: no entry points at it.
  PacketFile f = crafted();
  std::string b = serialize(f);
  auto h = header_of(b);
  h.n_waits += 1;
  // Move the string table 8 bytes on to make room for the extra wait record.
  const std::string strings = b.substr(h.strings_offset);
  b.resize(h.strings_offset);
  b += std::string(8, '\0');
  h.strings_offset += 8;
  b += strings;
  h.file_bytes = b.size();
  write_at(b, 0, h);
  CHECK(parse_error(b) == located("header counts 3 instructions, 7 entries, 4 waits but the programs use 3, 7, 3"));
}

TEST_CASE("docs/arch/packet-abi.md embeds the generated ABI reference as it is now (docs cannot drift from the .def)") {
  const std::string path = std::string(MET_SOURCE_DIR) + "/docs/arch/packet-abi.md";
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), (path + ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  auto part = abi_doc_generated_part(ss.str(), "docs/arch/packet-abi.md");
  REQUIRE_MESSAGE(part.ok(), part.error().message);
  CHECK_MESSAGE(*part == abi_markdown(),
                "docs/arch/packet-abi.md is out of date with src/emit/packet_fields.def: run `met circuit abi --update "
                "docs/arch/packet-abi.md`");
}

TEST_CASE("the doc splice replaces only the generated part and refuses a document without markers") {
  const std::string doc = std::string("intro\n") + kAbiDocBegin + "\nold\n" + kAbiDocEnd + "\ntail\n";
  auto next = abi_doc_updated(doc, "d.md");
  REQUIRE(next.ok());
  CHECK(*next == std::string("intro\n") + kAbiDocBegin + "\n" + abi_markdown() + kAbiDocEnd + "\ntail\n");
  CHECK(abi_doc_updated("no markers", "d.md").error().message == std::string("d.md: no '") + kAbiDocBegin + "' marker");
}

TEST_CASE("a huge sm count makes the stream table (programs x sm count records) run past the end") {
  const auto msg = parse_error(with_header([](MetPktHeader& h) { h.sm_count = 0xFFFFFFFFu; }));
  CHECK(msg.find("stream table (8589934590 records of 8 bytes") != std::string::npos);
}
