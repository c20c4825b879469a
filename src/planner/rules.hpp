// Fusion rules and kernel families of a class chain (FUSIONS.toml, KERNEL_FAMILIES.toml).
// A child class inherits its parent's rules, replaces one by defining the same id, and drops one
// with `remove`; the resulting list is ordered by priority (descending), then id.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "avail/classes.hpp"
#include "core/expected.hpp"
#include "core/format.hpp"
#include "model/expr.hpp"
#include "planner/mode.hpp"
#include "tree/kernel_tree.hpp"

namespace met::planner {

struct PatternElem {
  std::string op;
  std::string role;  // empty = any role

  // Whether a node of this op and role fills the element.
  bool matches(const std::string& node_op, const std::string& node_role) const {
    return op == node_op && (role.empty() || role == node_role);
  }
};

struct FormatEntry {
  std::optional<Format> weight;  // absent: the entry serves weightless nodes
  Format act = Format::bf16;     // the activation format the kernel reads
  // The format the kernel quantises its activations to on the fly before the math (`quantize_act`):
  // a W8A8 path reading bf16 activations. Absent: the math reads `act` as it is.
  std::optional<Format> quantize_act;
  std::string exec;              // native | emulate
  std::string math;              // peak key the unit runs at: bf16, fp8, fp4, ...

  // The activation format the math consumes: quantize_act, else act.
  Format act_math() const { return quantize_act.value_or(act); }
};

struct Rule {
  std::string id;
  std::vector<PatternElem> pattern;
  std::vector<std::string> kernels;
  std::string family;
  std::set<Mode> modes;
  struct RowRange {
    std::int64_t min = 1, max = 1;
  };
  RowRange rows;
  // `prefill_rows`: the row range of its prefill steps where it differs from `rows` (a GEMM that
  // leaves 16 rows or fewer to the gemv family in decode and batch steps, which no gemv rule
  // takes in prefill).
  std::optional<RowRange> prefill_rows;
  int priority = 0;
  std::vector<FormatEntry> formats;
  // Shapes the kernels' bodies handle (`requires`): expressions over the params of the window's
  // nodes (the first node that has a name gives its value) and `rows` (the case's row count), each
  // nonzero for the rule to apply.
  std::vector<model::Expr> requirements;
  std::string klass;     // class whose FUSIONS.toml defined it
  std::string location;  // file:line

  // The row range of its steps in `mode`.
  const RowRange& rows_in(Mode mode) const { return mode == Mode::prefill && prefill_rows ? *prefill_rows : rows; }
  // Whether the rule's modes and row range take a step of `n` rows in `mode`.
  bool takes(Mode mode, std::int64_t n) const {
    const RowRange& r = rows_in(mode);
    return modes.count(mode) && n >= r.min && n <= r.max;
  }
};

struct Family {
  std::string id;
  std::string unit;  // tensor_core | cuda_core | memory
  int rows_per_launch = 1;
  std::vector<std::string> kernels;
  std::optional<double> efficiency;  // measured share of the ceiling, when evidence exists
  // Measured shares by step rows (decode/batch: sequences; prefill: tokens per chunk), each
  // ascending in rows; a step between two points takes the share interpolated in log(rows), one
  // outside takes the nearest point's. A mode without points falls back to `efficiency`.
  std::vector<std::pair<double, double>> efficiency_decode, efficiency_prefill;
  std::string evidence;              // "unmeasured" or where the efficiency came from
  // Fixed time per instruction (microseconds; one instruction per group and layer) by step rows,
  // interpolated like the efficiency: fitted with it from two model sizes (`fixed_evidence` is the
  // second size's campaign), so the share divides only what grows with the bytes and FLOPs.
  std::vector<std::pair<double, double>> fixed_us_decode, fixed_us_prefill;
  std::string fixed_evidence;  // empty when the family carries no fixed time

  // The family's measured share of the ceiling for a step of `rows` rows, if it has one.
  std::optional<double> efficiency_at(bool prefill, std::int64_t rows) const;
  // Its fixed time per instruction in seconds (0 without points for the mode).
  double fixed_seconds_at(bool prefill, std::int64_t rows) const;
  std::string klass;
  std::string location;
};

struct RuleSet {
  std::vector<Rule> rules;                  // priority desc, then id
  std::map<std::string, Family> families;   // by id
  std::map<std::string, std::string> family_of_kernel;
  // The leaf class's measured time per fused-plan group beyond the groups' own work
  // (<class>/EVIDENCE.toml), with the campaigns it came from.
  std::optional<double> packet_overhead_us;
  std::string packet_overhead_evidence;
};

// Loads the rules and families of every class in the chain, root first, applying overrides and
// removals, then each class's EVIDENCE.toml (measured figures, docs/arch/kernel-tree.md). Every
// rule's family must exist and list the rule's kernels.
Expected<RuleSet> load_rules(const KernelTree& tree, const avail::ClassChain& chain);

std::string pattern_text(const std::vector<PatternElem>& pattern);

}  // namespace met::planner
