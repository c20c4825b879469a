// build.json, written by emit: the record of an emit (flags, target, ABI, shapes, the rope, each
// program's plan digest and groups). parse_build_json (emit.hpp) reads back what the interpreter
// needs. Internal to src/emit.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "emit/config.hpp"
#include "emit/emit.hpp"

namespace met::emit::detail {

struct BuildRecord {
  const EmitOptions* options = nullptr;  // flags, checkpoint, network
  std::string target_class, device, model;
  std::uint32_t sm_count = 0;
  std::int64_t max_ctx = 0, max_seqs = 0, pad_slots = 0, kv_ring = 0;
  std::vector<std::int64_t> decode_rungs, prefill_buckets;
  std::int64_t attn_splits = 0;
  Config cfg;
  const std::vector<ProgramInfo>* programs = nullptr;
};

// The build.json text (two-space indented, a trailing newline).
std::string write_build_json(const BuildRecord& r);

}  // namespace met::emit::detail
