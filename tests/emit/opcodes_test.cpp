// The opcode table: numbers unique and stable from 1, every name a kernel entry point (met_<name>)
// some class defines, every cpu row backed by a kernels/cpu function, and extents inside tensors.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
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
    CHECK(static_cast<bool>(op.cpu));
    CHECK(static_cast<bool>(op.extent));
    CHECK(!op.family.empty());
    REQUIRE(!op.ints.empty());
    CHECK(op.ints[0] == "rows");
    CHECK(op.tensors.size() <= 12);
    CHECK(op.ints.size() <= 12);
    CHECK(op.imms.size() <= 4);
  }
  CHECK(find_opcode(0u) == nullptr);
  CHECK(find_opcode("no_such_op") == nullptr);
}

TEST_CASE("every opcode name is an entry point of the kernel tree, and every kernels/cpu entry point has an opcode") {
  const std::string cpu = kernel_sources("cpu");
  std::string gpu;
  for (const char* d : {"common", "hopper", "blackwell", "blackwell-rtx", "cdna3"}) gpu += kernel_sources(d);
  for (const auto& op : opcode_table()) {
    INFO(op.name);
    const std::string fn = "met_" + op.name + "(";
    CHECK((cpu.find(fn) != std::string::npos || gpu.find(fn) != std::string::npos));
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
}
