// Plan: the typed value the report prints and the emitter consumes. For one model on one device
// class, in one mode at one row count: the fused groups of every scope (pre, each layer kind,
// post), the gaps with the reasons no rule covers them, the port list, the tensor-core audit and
// a SHA-256 digest of the canonical plan text (device-independent: same class, same digest).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "avail/availability.hpp"
#include "avail/classes.hpp"
#include "device/registry.hpp"
#include "model/graph.hpp"
#include "planner/mode.hpp"
#include "planner/rules.hpp"

namespace met::planner {

// How a group runs one weighted node's format pair. The activation precision is an axis of its
// own: `act` is what the kernel reads, `act_math` what the math consumes (the node's declared
// activation format, or a format the kernel quantises `act` to on the fly), and `path` names
// both precisions the way checkpoints do (W8A16: weight-only fp8; W8A8: activations quantised).
struct Exec {
  std::string weight;    // "fp8-e4m3"
  std::string act;       // "bf16"
  std::string act_math;  // "fp8-e4m3" when the kernel quantises activations, else act; gaps: the declared one
  std::string path;      // "W8A8"
  std::string how;       // native | emulate | no path (no format route) | no kernel (a route, no kernel covers it)
  std::string math;      // peak key when native/emulate

  bool quantizes_act() const { return act_math != act; }
};

// "W8A16": the bits of the weight and of the activations the math consumes.
std::string path_name(Format weight, Format act_math);

// A rule that matched a node's op pattern but could not take it, and why.
struct Blocked {
  std::string rule;
  std::vector<std::string> kernels;  // the kernels it would have used
  std::string why;
  std::vector<std::string> needs;    // instruction kinds the device lacks, when that is the reason
  bool format = false;               // blocked by the format pair, not by availability
  std::string pair;                  // the format pair it lacks ("fp8-e4m3 x bf16") when format
};

struct Group {
  std::vector<int> nodes;            // indices into the scope's node list, ascending, contiguous
  bool gap = false;                  // a placeholder: no available rule covers these nodes
  std::string rule;                  // empty for a gap
  std::vector<std::string> kernels;
  std::string family;                // empty for a gap
  std::string unit;                  // tensor_core | cuda_core | memory; gaps run as reference ops on cuda_core
  std::optional<Exec> exec;          // for groups with weighted nodes
  std::vector<Blocked> blocked;      // for gaps: the candidates and why each failed
};

struct Scope {
  std::string name;                  // "pre", "layers:full", "post"
  std::string kind;                  // layer kind, or "" for pre/post
  int count = 1;                     // layers of this kind (1 for pre/post)
  Mode mode = Mode::decode;          // prefill plans the head (post) at its head rows (one: a decode row)
  std::int64_t rows = 1;
  std::vector<model::Node> nodes;
  std::vector<Group> groups;
};

struct PortItem {
  std::string kernel;                // the missing kernel, or "(none)" when no rule exists
  std::string rule;                  // the rule that would run it
  std::string op;                    // pattern or op text it covers
  std::string why;
  std::vector<std::string> needs;
  int nodes = 0;                     // gap nodes (per step, layers counted) it would cover
};

struct TcFinding {
  std::string scope;
  std::string group;                 // rule id or "gap"
  std::string op;
  std::string unit;
  std::int64_t rows = 0;
  std::string message;
};

struct Plan {
  std::string model;                 // model graph id
  std::string device;                // device id (not part of the digest)
  std::string klass;
  std::vector<std::string> chain;    // class ids, root first
  Mode mode = Mode::decode;
  std::int64_t rows = 1;             // rows per launch: decode 1, batch C, prefill chunk of T
  std::vector<Scope> scopes;
  std::vector<PortItem> ports;
  std::vector<TcFinding> tc_audit;
  std::string canonical;             // the text the digest hashes
  std::string digest;                // sha256 hex of canonical
  int gap_groups = 0;
};

struct PlanInput {
  const KernelTree* tree = nullptr;
  const device::Registry* registry = nullptr;
  const device::Device* device = nullptr;
  const avail::ClassChain* chain = nullptr;
  const avail::Availability* availability = nullptr;
  const RuleSet* rules = nullptr;
  const model::ModelGraph* model = nullptr;
  Mode mode = Mode::decode;
  std::int64_t rows = 1;
};

// The rows the head of a prefill chunk of `rows` rows runs: one per prompt a packed launch can
// finish, at most kPrefillHeadRows (the rows a GPU gemv slice holds, so the head still reads its
// weight once) and at most one per row.
inline constexpr std::int64_t kPrefillHeadRows = 16;
inline std::int64_t prefill_head_rows(std::int64_t rows) { return std::clamp<std::int64_t>(rows, 1, kPrefillHeadRows); }

// Fuses every scope, marks gaps, builds the port list and the tensor-core audit, and digests.
Plan build_plan(const PlanInput& in);

// Greedy fusion of one node list (exposed for tests): rules by priority then id, each taking the
// leftmost non-overlapping matches whose formats and kernels are available; what is left is gaps.
// kv_refusal, when not empty, is why the class's bodies cannot read the graph's KV cache format
// (avail::Defaults::kv_formats): every rule over a kv_append or attention node is blocked by it, as
// a format the rule has no path for.
std::vector<Group> fuse(const std::vector<model::Node>& nodes, const RuleSet& rules, const avail::Availability& availability,
                        Mode mode, std::int64_t rows, Format activation, const std::string& kv_refusal = {});

}  // namespace met::planner
