// Test helpers for the tensor-parallel wiring of the cuda backend: a tiny Llama-3 emitted at --tp N
// for the cpu class (two streams, one slice a collective) or for h200-sxm (132 streams, the
// collectives cut into many slices), its rank packets as lists, and the first collective of program 0.
#pragma once

#include <utility>
#include <vector>

#include "cpu_run.hpp"
#include "emit/opcodes.hpp"

namespace met::testing {

inline interp::Assets tp_assets(const std::string& name, int tp, const std::string& device = "host-cpu") {
  const auto ckpt = tiny_checkpoint("collective-plan", oracle_config("tiny-llama3-kv8.json"));
  EmitSpec spec;
  spec.device = device;
  spec.tp = tp;
  const bool cpu = device == "host-cpu";
  spec.threads = cpu ? 2 : 0;  // a GPU emit has the device's streams
  spec.rungs = {1, 2};
  spec.buckets = {cpu ? 8 : 64};  // hopper's prefill GEMMs take 32 rows or more
  spec.max_ctx = cpu ? 32 : 128;
  auto a = interp::load_assets(write_assets(ckpt, spec, name).string());
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  return std::move(*a);
}

inline std::vector<const emit::PacketFile*> files_of(const interp::Assets& a) {
  std::vector<const emit::PacketFile*> f{&a.packet};
  for (const auto& p : a.other_ranks) f.push_back(&p);
  return f;
}

inline std::vector<emit::PacketFile*> mutable_files(interp::Assets& a) {
  std::vector<emit::PacketFile*> f{&a.packet};
  for (auto& p : a.other_ranks) f.push_back(&p);
  return f;
}

// The first collective of program 0: (instruction, its peers operand).
inline std::pair<std::size_t, int> first_collective(const emit::PacketFile& f) {
  const auto& instrs = f.programs[0].instrs;
  for (std::size_t i = 0; i < instrs.size(); ++i) {
    const auto* op = emit::find_opcode(instrs[i].opcode);
    for (std::size_t t = 0; t < op->tensors.size(); ++t)
      if (op->tensors[t].kind == "peers") return {i, static_cast<int>(t)};
  }
  FAIL("no collective in program 0");
  return {0, -1};
}

}  // namespace met::testing
