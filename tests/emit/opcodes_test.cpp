// The opcode table (from kernels/common/ops.def): numbers unique and stable from 1, every name a
// kernel some class defines or some rule plans, every op's CPU reference an op with the same
// operands, families as the rules say, every kernels/cpu entry point an opcode, extents inside
// tensors.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "emit/opcodes.hpp"

namespace {

using namespace met::emit;

std::string kernel_sources(const std::string& dir) {
  std::string all;
  for (const auto& e : std::filesystem::directory_iterator(std::string(MET_SOURCE_DIR) + "/kernels/" + dir)) {
    std::ifstream in(e.path());
    std::ostringstream s;
    s << in.rdbuf();
    all += s.str();
  }
  return all;
}

}  // namespace

TEST_CASE("opcode numbers are unique, dense from 1, and find_opcode round-trips (a renumbered or duplicated row is caught)") {
  std::set<std::uint32_t> numbers;
  std::set<std::string> names;
  std::uint32_t expect = 1;
  for (const auto& op : opcode_table()) {
    CHECK(op.number == expect++);
    CHECK(numbers.insert(op.number).second);
    CHECK(names.insert(op.name).second);
    CHECK(find_opcode(op.number) == &op);
    CHECK(find_opcode(op.name) == &op);
    const OpcodeInfo* ref = find_opcode(op.cpu_ref);
    REQUIRE(ref != nullptr);
    CHECK(ref->cpu_ref == ref->name);  // a reference computes itself
    // The CPU dispatch loads the reference's operand struct from this op's instruction.
    REQUIRE(ref->tensors.size() == op.tensors.size());
    for (std::size_t k = 0; k < op.tensors.size(); ++k) {
      CHECK(ref->tensors[k].name == op.tensors[k].name);
      CHECK(ref->tensors[k].kind == op.tensors[k].kind);
      CHECK(ref->tensors[k].write == op.tensors[k].write);
    }
    CHECK(ref->ints == op.ints);
    CHECK(ref->imms == op.imms);
    CHECK(static_cast<bool>(op.extent));
    CHECK(!op.family.empty());
    REQUIRE(!op.ints.empty());
    CHECK(op.ints[0] == "rows");
    CHECK(op.tensors.size() <= 12);
    CHECK(op.ints.size() <= 16);
    CHECK(op.imms.size() <= 4);
  }
  CHECK(find_opcode(0u) == nullptr);
  CHECK(find_opcode("no_such_op") == nullptr);
}

TEST_CASE("every opcode is a kernel some class defines or some rule plans (its port-list entry), with the rule's family; every kernels/cpu entry point has an opcode") {
  const std::string cpu = kernel_sources("cpu");
  std::string gpu, rules;
  for (const char* d : {"common", "ampere", "hopper", "blackwell", "blackwell-rtx", "cdna3", "cdna4"}) {
    gpu += kernel_sources(d);
    std::ifstream in(std::string(MET_SOURCE_DIR) + "/kernels/" + d + "/FUSIONS.toml");
    std::ostringstream t;
    t << in.rdbuf();
    rules += t.str();
  }
  rules += kernel_sources("cpu");
  for (const auto& op : opcode_table()) {
    INFO(op.name);
    const bool defined = cpu.find("met_" + op.name + "(") != std::string::npos ||
                         gpu.find("MET_ENTRY(" + op.name + ")") != std::string::npos;
    const bool planned = rules.find("\"met_" + op.name + "\"") != std::string::npos;
    CHECK((defined || planned));
    // Every rule that names this kernel costs it in the registry's family.
    const std::regex rule("kernel = \\[?\"met_" + op.name + "\"[^\\n]*\\nfamily = \"([a-z_]+)\"");
    for (auto it = std::sregex_iterator(rules.begin(), rules.end(), rule); it != std::sregex_iterator(); ++it)
      CHECK((*it)[1].str() == op.family);
  }
  const std::regex entry(R"(extern "C" void met_([a-z0-9_]+)\()");
  for (auto it = std::sregex_iterator(cpu.begin(), cpu.end(), entry); it != std::sregex_iterator(); ++it) {
    INFO((*it)[1].str());
    CHECK(find_opcode((*it)[1].str()) != nullptr);
  }
}

TEST_CASE("extents of every slice lie inside their tensors and row slices tile the rows (a wrong row offset is caught)") {
  PacketFile f;
  auto tensor = [&](std::uint32_t dtype, std::vector<std::uint64_t> shape, std::uint64_t elem) {
    TensorDesc t;
    t.dtype = dtype;
    t.bytes = elem;
    for (auto d : shape) t.bytes *= d;
    t.shape = std::move(shape);
    f.tensors.push_back(t);
    return static_cast<std::uint32_t>(f.tensors.size() - 1);
  };
  const auto x = tensor(MET_DTYPE_BF16, {8, 64}, 2), w = tensor(MET_DTYPE_BF16, {96, 64}, 2), y = tensor(MET_DTYPE_BF16, {8, 96}, 2);
  InstrDesc d;
  d.opcode = find_opcode("gemv")->number;
  d.slices = 3;
  d.tensors = {x, w, y};
  d.ints = {8, 0};
  const auto* op = find_opcode(d.opcode);
  std::uint64_t covered = 0;
  for (std::uint32_t s = 0; s < d.slices; ++s) {
    const Extent ex = op->extent(d, f, 0, s);
    CHECK(ex.begin == covered);
    covered = ex.end;
    CHECK(ex.end <= f.tensors[x].bytes);
    const Extent ew = op->extent(d, f, 1, s);
    CHECK(ew.begin == 0);
    CHECK(ew.end == f.tensors[w].bytes);
    CHECK(op->extent(d, f, 2, s).end <= f.tensors[y].bytes);
  }
  CHECK(covered == f.tensors[x].bytes);
  // the head of a prefill program reads only the last row of x
  d.ints = {1, 7};
  d.slices = 1;
  const Extent last = op->extent(d, f, 0, 0);
  CHECK(last.begin == 7 * 64 * 2);
  CHECK(last.end == 8 * 64 * 2);
}

TEST_CASE("extents from hostile ints run past the tensor instead of overflowing or wrapping back inside it (found by packet_fuzz)") {
  PacketFile f;
  auto tensor = [&](std::vector<std::uint64_t> shape) {
    TensorDesc t;
    t.dtype = MET_DTYPE_BF16;
    t.bytes = 2;
    for (auto d : shape) t.bytes *= d;
    t.shape = std::move(shape);
    f.tensors.push_back(t);
    return static_cast<std::uint32_t>(f.tensors.size() - 1);
  };
  const auto x = tensor({8, 64}), w = tensor({96, 64}), y = tensor({8, 96});
  InstrDesc d;
  d.opcode = find_opcode("gemv")->number;
  d.slices = 1;
  d.tensors = {x, w, y};
  const auto* op = find_opcode(d.opcode);
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  // in_row0 near the top of int64 (the fuzzer's 7883942983910973812 + 8030481085555015681), or
  // one whose byte offset wraps 2^64 back to a small number: both must lie past the tensor's end.
  for (const std::int64_t row0 : std::initializer_list<std::int64_t>{kMax - 3, 7883942983910973812, std::int64_t{1} << 57, -5}) {
    d.ints = {8, row0};
    const Extent e = op->extent(d, f, 0, 0);
    CAPTURE(row0);
    CHECK((e.end > f.tensors[x].bytes || e.begin > e.end));
  }
  d.ints = {kMax, 0};  // more rows than any tensor holds
  CHECK(op->extent(d, f, 2, 0).end > f.tensors[y].bytes);
}

TEST_CASE("slice s of S covers rows [s*R/S, (s+1)*R/S)") {
  InstrDesc d;
  d.ints = {10};
  d.slices = 4;
  std::int64_t next = 0;
  for (std::uint32_t s = 0; s < 4; ++s) {
    const auto r = slice_rows(d, s);
    CHECK(r.begin == next);
    CHECK(r.end == (s + 1) * 10 / 4);
    next = r.end;
  }
  CHECK(next == 10);
  // sizes from an unverified packet: the products do not overflow (found by packet_fuzz)
  d.ints = {std::numeric_limits<std::int64_t>::max()};
  d.slices = 3;
  CHECK(slice_rows(d, 2).end == std::numeric_limits<std::int64_t>::max());
  CHECK(slice_rows(d, 1).begin == std::numeric_limits<std::int64_t>::max() / 3);
  CHECK(slice_cols(d, 0, std::numeric_limits<std::int64_t>::max()).end == std::numeric_limits<std::int64_t>::max());
}

namespace {
// The bytes an extent touches, listed: the brute-force meaning of strided extents.
std::set<std::uint64_t> bytes_of(const Extent& e) {
  std::set<std::uint64_t> out;
  if (e.begin >= e.end) return out;
  if (!e.strided()) {
    for (std::uint64_t b = e.begin; b < e.end; ++b) out.insert(b);
    return out;
  }
  for (std::uint64_t i = 0; i < e.count; ++i)
    for (std::uint64_t b = 0; b < e.len; ++b) out.insert(e.begin + i * e.stride + b);
  return out;
}
}  // namespace

TEST_CASE("extents_overlap agrees with the byte sets of strided and contiguous extents (exact where it claims to be)") {
  std::mt19937 g(5);
  auto pick = [&](int n) { return static_cast<std::uint64_t>(g() % static_cast<unsigned>(n)); };
  int strided_pairs = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const std::uint64_t stride = 4 + pick(12);
    auto make = [&](bool strided, std::uint64_t s) {
      if (!strided) {
        const std::uint64_t b = pick(80);
        return Extent{b, b + 1 + pick(20)};
      }
      return strided_extent(pick(60), 1 + pick(static_cast<int>(s)), s, 1 + pick(6));
    };
    const bool sa = g() % 2 == 0, sb = g() % 2 == 0;
    const bool same_stride = g() % 4 != 0;
    const Extent a = make(sa, stride), b = make(sb, same_stride ? stride : stride + 1 + pick(5));
    const auto x = bytes_of(a), y = bytes_of(b);
    bool truth = false;
    for (auto v : x) truth = truth || y.count(v);
    const bool claim = extents_overlap(a, b);
    CAPTURE(trial);
    CHECK(claim == extents_overlap(b, a));
    // Exact for contiguous pairs, mixed pairs and strided pairs of one stride; conservative otherwise.
    if (!a.strided() || !b.strided() || a.stride == b.stride) {
      CHECK(claim == truth);
      strided_pairs += a.strided() && b.strided();
    } else {
      CHECK((claim || !truth));
    }
  }
  CHECK(strided_pairs > 1000);
}

TEST_CASE("strided_extent: a block as wide as its stride is contiguous; the hull spans every block") {
  const Extent c = strided_extent(10, 8, 8, 4);
  CHECK(!c.strided());
  CHECK(c.begin == 10);
  CHECK(c.end == 42);
  const Extent s = strided_extent(10, 3, 8, 4);
  CHECK(s.strided());
  CHECK(s.end == 10 + 3 * 8 + 3);
  CHECK(strided_extent(0, 0, 8, 4).begin == strided_extent(0, 0, 8, 4).end);  // empty
}
