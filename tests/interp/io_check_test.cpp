// check_step_io (src/interp/io_check.cpp) bounds each slots field by the caches its writers write:
// a linear cache's writers by its rows, a ring cache's writers by the ring's, whatever other
// caches the packet holds.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "emit/emit.hpp"
#include "emit/opcodes.hpp"
#include "emit/packet.hpp"
#include "interp/io_check.hpp"

using namespace met;

namespace {

std::uint32_t add(emit::PacketFile& f, std::string name, std::uint32_t source, std::uint64_t ref,
                  std::vector<std::uint64_t> shape) {
  emit::TensorDesc t;
  t.name = std::move(name);
  t.source = source;
  t.ref = ref;
  t.shape = std::move(shape);
  f.tensors.push_back(t);
  return static_cast<std::uint32_t>(f.tensors.size() - 1);
}

// A 4-row program of two kv_append: one into linear caches of `linear` rows through `slots`, one
// into ring caches of `ring` rows through `ring_slots`.
emit::PacketFile two_caches(std::uint64_t linear, std::uint64_t ring) {
  emit::PacketFile f;
  const auto qkv = add(f, "qkv", MET_SOURCE_SCRATCH, 0, {4, 64});
  const auto slots = add(f, "io.slots", MET_SOURCE_IO, static_cast<std::uint64_t>(emit::IoField::slots), {4});
  const auto rslots = add(f, "io.ring_slots", MET_SOURCE_IO, static_cast<std::uint64_t>(emit::IoField::ring_slots), {4});
  const auto lk = add(f, "kv.L0.k", MET_SOURCE_KV, 0, {linear, 1, 16});
  const auto lv = add(f, "kv.L0.v", MET_SOURCE_KV, 0, {linear, 1, 16});
  const auto rk = add(f, "kv.L1.k", MET_SOURCE_KV, 1, {ring, 1, 16});
  const auto rv = add(f, "kv.L1.v", MET_SOURCE_KV, 1, {ring, 1, 16});
  const auto* op = emit::find_opcode("kv_append");
  REQUIRE(op);
  emit::ProgramDesc p;
  p.name = "prefill_4";
  p.rows = 4;
  for (auto [s, k, v] : {std::tuple{slots, lk, lv}, std::tuple{rslots, rk, rv}}) {
    emit::InstrDesc in;
    in.opcode = op->number;
    in.tensors = {qkv, s, k, v};
    in.ints = {4, 64, 16, 32, 1, 16, 16, 0};
    p.instrs.push_back(in);
  }
  f.programs.push_back(p);
  return f;
}

}  // namespace

TEST_CASE("each slots field is bounded by the rows of the caches its own writers write") {
  const auto f = two_caches(/*linear=*/100, /*ring=*/10);
  const auto b = interp::slot_bounds(f, 0);
  CHECK(b.slots == 100);
  CHECK(b.ring_slots == 10);
  CHECK(interp::slot_bounds(f, 1).slots == -1);  // no such program: nothing bounded
  std::int64_t slots[4] = {0, 1, 2, 50};
  std::int64_t ring[4] = {0, 1, 2, 9};
  CHECK(interp::check_step_io(f.programs[0], b, slots, ring).ok());
  // A linear slot past the ring's rows is fine: the ring's writers do not read it.
  slots[3] = 99;
  CHECK(interp::check_step_io(f.programs[0], b, slots, ring).ok());
  slots[3] = 100;
  auto past = interp::check_step_io(f.programs[0], b, slots, ring);
  REQUIRE_FALSE(past.ok());
  CHECK(past.error().message == "prefill_4: row 3 names KV slot 100, outside the 100 rows of the caches it writes");
  slots[3] = 3;
  ring[3] = 10;
  auto ring_past = interp::check_step_io(f.programs[0], b, slots, ring);
  REQUIRE_FALSE(ring_past.ok());
  CHECK(ring_past.error().message == "prefill_4: row 3 names ring slot 10, outside the 10 rows of the caches it writes");
  ring[3] = 1;
  auto dup = interp::check_step_io(f.programs[0], b, slots, ring);
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.error().message == "prefill_4: rows 1 and 3 both name ring slot 1; every row of a step needs its own slot");
}

TEST_CASE("a field whose writers write caches of different rows is bounded by the fewest") {
  // Both writers through `slots`: the smaller cache bounds it (a packet the emit never makes, but
  // the check must not let the larger cache's bound through).
  auto f = two_caches(100, 10);
  f.programs[0].instrs[1].tensors[1] = f.programs[0].instrs[0].tensors[1];
  const auto b = interp::slot_bounds(f, 0);
  CHECK(b.slots == 10);
  CHECK(b.ring_slots == -1);
  std::int64_t slots[4] = {0, 1, 2, 10};
  auto r = interp::check_step_io(f.programs[0], b, slots, nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "prefill_4: row 3 names KV slot 10, outside the 10 rows of the caches it writes");
}
