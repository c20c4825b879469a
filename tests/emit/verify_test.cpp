// The verifier against a small fake opcode table: one correct program that passes, and one mutation
// per check that it must reject ((a) order, (b) deadlock and exactly-once, (c) bounds, (d) overlaps).
#include <doctest/doctest.h>

#include <string>

#include "emit/verify.hpp"

using namespace met;
using namespace met::emit;

namespace {

constexpr std::uint32_t kCopy = 100;   // dst rows of slice s = src rows of slice s
constexpr std::uint32_t kSplat = 101;  // every slice writes row 0 of dst (slices overlap)
constexpr std::uint32_t kRows = 4;
constexpr std::uint64_t kRowBytes = 16;

// ints: rows, row_bytes. Slice s of S covers rows [s*rows/S, (s+1)*rows/S) of every operand.
Extent row_extent(const InstrDesc& d, const PacketFile&, std::size_t, std::uint32_t slice) {
  const auto rows = static_cast<std::uint64_t>(d.ints[0]), row_bytes = static_cast<std::uint64_t>(d.ints[1]);
  return {slice * rows / d.slices * row_bytes, (slice + 1) * rows / d.slices * row_bytes};
}
Extent splat_extent(const InstrDesc& d, const PacketFile& f, std::size_t operand, std::uint32_t slice) {
  if (operand == 1) return {0, static_cast<std::uint64_t>(d.ints[1])};
  return row_extent(d, f, operand, slice);
}

const std::vector<OpcodeInfo>& fake_table() {
  static const std::vector<OpcodeInfo> table = [] {
    OpcodeInfo copy;
    copy.number = kCopy;
    copy.name = "copy";
    copy.tensors = {{"src", "act", false}, {"dst", "act", true}, {"bias", "vec", false, /*optional=*/true}};
    copy.ints = {"rows", "row_bytes"};
    copy.family = "test";
    copy.extent = row_extent;
    OpcodeInfo splat = copy;
    splat.number = kSplat;
    splat.name = "splat";
    splat.extent = splat_extent;
    return std::vector<OpcodeInfo>{copy, splat};
  }();
  return table;
}

InstrDesc op(std::uint32_t opcode, std::uint32_t src, std::uint32_t dst, std::uint32_t slices = 2) {
  InstrDesc d;
  d.opcode = opcode;
  d.slices = slices;
  d.scope = "layers:full L0";
  d.tensors = {src, dst};
  d.ints = {kRows, static_cast<std::int64_t>(kRowBytes)};
  return d;
}

EntryDesc at(std::uint32_t instr, std::uint32_t slice, std::vector<WaitDesc> waits = {}) {
  return EntryDesc{instr, slice, std::move(waits)};
}

// copy a -> b, then copy b -> c with the slices crossed between the two SMs, so instruction 1
// needs a wait on counter 0 (each of its slices reads what the other SM's slice wrote).
PacketFile good() {
  PacketFile f;
  f.target_class = "cpu";
  f.sm_count = 2;
  for (const char* name : {"a", "b", "c"})
    f.tensors.push_back({name, MET_DTYPE_BF16, {kRows, 8}, kRows * kRowBytes, MET_SOURCE_SCRATCH, 0});
  ProgramDesc p;
  p.name = "decode_1";
  p.instrs = {op(kCopy, 0, 1), op(kCopy, 1, 2)};
  p.streams = {{at(0, 0), at(1, 1, {{0, 2}})}, {at(0, 1), at(1, 0, {{0, 2}})}};
  f.programs = {p};
  return f;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

bool has(const std::vector<std::string>& problems, const std::string& text) {
  for (const auto& p : problems) {
    if (p.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a correct program passes: crossed slices ordered by a full wait") {
  const auto problems = verify(good(), fake_table());
  CHECK_MESSAGE(problems.empty(), joined(problems));
}

TEST_CASE("(a) a missing wait is caught: the reader runs on another SM than the writer") {
  PacketFile f = good();
  f.programs[0].streams[0][1].waits.clear();
  const auto problems = verify(f, fake_table());
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] ==
        "program decode_1: instruction 1 (copy) slice 1: reads t1 'b' bytes [32, 64) that instruction 0 (copy) slice 1 writes, "
        "but nothing orders them (no wait for counter 0 >= 2)");
}

TEST_CASE("(a) a partial wait (value < slices) orders nothing, so it does not cover the dependency") {
  PacketFile f = good();
  f.programs[0].streams[0][1].waits = {{0, 1}};
  const auto problems = verify(f, fake_table());
  CHECK(has(problems, "instruction 1 (copy) slice 1: reads t1 'b' bytes [32, 64)"));
}

TEST_CASE("(a) stream order alone suffices: a slice after the writer's slice on the same SM needs no wait") {
  PacketFile f = good();
  f.programs[0].streams = {{at(0, 0), at(1, 0)}, {at(0, 1), at(1, 1)}};
  const auto problems = verify(f, fake_table());
  CHECK_MESSAGE(problems.empty(), joined(problems));
}

TEST_CASE("(a) waits are transitive: waiting on counter 1 also orders what instruction 1 waited for") {
  PacketFile f = good();
  f.programs[0].instrs.push_back(op(kCopy, 1, 0));  // reads b (instr 0 wrote it), overwrites a (instr 0 read it)
  f.programs[0].streams[0].push_back(at(2, 0, {{1, 2}}));
  f.programs[0].streams[1].push_back(at(2, 1, {{1, 2}}));
  const auto problems = verify(f, fake_table());
  CHECK_MESSAGE(problems.empty(), joined(problems));
}

TEST_CASE("(a) a write-after-read is a dependency too: overwriting what an unordered earlier slice reads is caught") {
  PacketFile f = good();
  f.programs[0].instrs[1] = op(kCopy, 2, 0);  // writes a, which instruction 0 reads
  f.programs[0].streams[0][1].waits.clear();
  f.programs[0].streams[1][1].waits.clear();
  const auto problems = verify(f, fake_table());
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] ==
        "program decode_1: instruction 1 (copy) slice 1: writes t0 'a' bytes [32, 64) that instruction 0 (copy) slice 1 reads, "
        "but nothing orders them (no wait for counter 0 >= 2) (+1 more slice pairs)");
}

TEST_CASE("(a) a wrong-way order (the later instruction's slice runs first on the same SM) is caught") {
  PacketFile f = good();
  f.programs[0].streams = {{at(1, 0), at(0, 0)}, {at(0, 1), at(1, 1)}};
  const auto problems = verify(f, fake_table());
  CHECK(has(problems, "instruction 1 (copy) slice 0: reads t1 'b' bytes [0, 32) that instruction 0 (copy) slice 0 writes"));
}

TEST_CASE("(b) a wait for more than the instruction's slices deadlocks and is caught") {
  PacketFile f = good();
  f.programs[0].streams[0][1].waits = {{0, 3}};
  const auto problems = verify(f, fake_table());
  CHECK(has(problems,
            "program decode_1: instruction 1 (copy) slice 1: waits for counter 0 >= 3, but instruction 0 (copy) has 2 slices"));
  CHECK(has(problems,
            "instruction 1 (copy) slice 1: stream 0 stops at entry 1 of 2, waiting forever for counter 0 >= 3 (it stops at 2)"));
}

TEST_CASE("(b) a wait on a later instruction is caught (streams must follow program order), and the cycle it closes deadlocks") {
  PacketFile f = good();
  f.programs[0].streams[0][0].waits = {{1, 2}};
  const auto problems = verify(f, fake_table());
  CHECK(has(problems, "instruction 0 (copy) slice 0: waits on counter 1, which is not an earlier instruction"));
  CHECK(has(problems, "stream 0 stops at entry 0 of 2, waiting forever for counter 1 >= 2 (it stops at 0)"));
  CHECK(has(problems, "stream 1 stops at entry 1 of 2, waiting forever for counter 0 >= 2 (it stops at 1)"));
}

TEST_CASE("(b) a stream that waits for a slice queued behind it on the same SM deadlocks") {
  PacketFile f = good();
  f.programs[0].streams = {{at(1, 1, {{0, 2}}), at(0, 0)}, {at(0, 1), at(1, 0, {{0, 2}})}};
  const auto problems = verify(f, fake_table());
  CHECK(has(problems,
            "instruction 1 (copy) slice 1: stream 0 stops at entry 0 of 2, waiting forever for counter 0 >= 2 (it stops at 1)"));
  CHECK(has(problems, "instruction 1 (copy) slice 0: stream 1 stops at entry 1 of 2"));
}

TEST_CASE("(b) a slice that runs twice, or never, is caught") {
  PacketFile twice = good();
  twice.programs[0].streams[1][0] = at(0, 0);
  const auto p1 = verify(twice, fake_table());
  CHECK(has(p1, "instruction 0 (copy) slice 0: runs twice, at stream 0 entry 0 and stream 1 entry 0"));
  CHECK(has(p1, "instruction 0 (copy) slice 1: in no stream"));
}

TEST_CASE("(c) an extent past the end of its tensor is caught") {
  PacketFile f = good();
  f.tensors[2].bytes = 32;  // c holds two rows; instruction 1 slice 1 writes rows 2..4
  const auto problems = verify(f, fake_table());
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] ==
        "program decode_1: instruction 1 (copy) slice 1: operand 'dst' (t2 'c') extent [32, 64) runs past the tensor's 32 bytes");
}

TEST_CASE("(c) an operand the opcode needs but that holds MET_NO_TENSOR is caught; an optional read may be absent") {
  PacketFile f = good();
  f.programs[0].instrs[0].tensors = {0, MET_NO_TENSOR, MET_NO_TENSOR};
  const auto problems = verify(f, fake_table());
  CHECK(has(problems, "instruction 0 (copy): operand 'dst' (slot 1) needs a tensor but holds none"));
  CHECK(!has(problems, "'bias'"));
}

TEST_CASE("(d) two unordered slices writing the same bytes are caught; the same two on one SM pass") {
  PacketFile f = good();
  f.programs[0].instrs[1].opcode = kSplat;
  const auto problems = verify(f, fake_table());
  CHECK(has(problems,
            "program decode_1: instruction 1 (splat) slices 0 and 1: both write t2 'c' bytes [0, 16) and nothing orders them"));

  PacketFile same_sm = f;
  same_sm.programs[0].streams = {{at(0, 0), at(0, 1), at(1, 0), at(1, 1)}, {}};
  const auto ok = verify(same_sm, fake_table());
  CHECK_MESSAGE(ok.empty(), joined(ok));
}

TEST_CASE("structure: an opcode missing from the table, a handle past the tensors, an entry past the slices") {
  PacketFile f = good();
  f.programs[0].instrs[0].opcode = 7;
  CHECK(has(verify(f, fake_table()), "instruction 0 (opcode 7): opcode 7 is not in the opcode table"));
  PacketFile g = good();
  g.programs[0].instrs[1].tensors[0] = 9;
  CHECK(has(verify(g, fake_table()), "instruction 1 (copy): tensor slot 0 holds handle 9, but the file has 3 tensors"));
  PacketFile h = good();
  h.programs[0].streams[0][0].slice = 5;
  CHECK(has(verify(h, fake_table()), "instruction 0 (copy) slice 5: stream 0 entry 0 names a slice past its 2 slices"));
}

TEST_CASE("problems are capped per check so a broken program prints a screen, not a book") {
  PacketFile f = good();
  auto& p = f.programs[0];
  p.instrs[0].slices = 64;
  p.instrs[1].slices = 64;
  p.instrs[0].ints[0] = 64;
  p.instrs[1].ints[0] = 64;
  f.tensors[0].bytes = f.tensors[1].bytes = f.tensors[2].bytes = 64 * kRowBytes;
  p.streams = {{}, {}};
  for (std::uint32_t s = 0; s < 64; ++s) {
    p.streams[s % 2].push_back(at(0, s));
  }
  // Every slice of instruction 1 waits for a value that never comes: 64 deadlock lines, capped.
  for (std::uint32_t s = 0; s < 64; ++s) p.streams[s % 2].push_back(at(1, s, {{0, 65}}));
  const auto problems = verify(f, fake_table());
  CHECK(problems.size() == kMaxProblemsPerCheck + 1);
  CHECK(problems.back().find("more deadlock problems") != std::string::npos);
}

TEST_CASE("verification is deterministic: the same file gives the same lines in the same order") {
  PacketFile f = good();
  f.programs[0].streams[0][1].waits.clear();
  f.programs[0].streams[1][1].waits.clear();
  f.tensors[2].bytes = 32;
  CHECK(verify(f, fake_table()) == verify(f, fake_table()));
}
