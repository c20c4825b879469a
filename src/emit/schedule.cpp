// The scheduler: dependencies by tensor handle (a conservative rule: any shared handle orders two
// instructions), reduced transitively so each instruction keeps only the waits no other kept wait
// implies; slices are dealt to the streams round-robin in instruction order, except where an
// instruction's slices differ in cost (causal prefill attention): those are placed longest first on
// the stream with the least of that instruction's work so far.
//
// Tensor parallelism: the placement is a function of the instruction list alone (opcodes, tensor
// handles, ints, slices; the costs from the same ints) and the stream count, with total tie-breaks.
// Every rank's program has the same instructions in the same order (emit builds the ranks from one
// rank graph and refuses ranks that fuse differently), so each collective slice lands on the same
// stream at the same position on every rank: a stream that waits in slice s of a collective waits
// for streams that reach slice s after the same work, and the slices pair without a deadlock (the
// cpu backend checks it when it wires the ranks).
#include "emit/schedule.hpp"

#include <algorithm>
#include <numeric>
#include <queue>
#include <set>
#include <vector>

#include "emit/opcodes.hpp"

namespace met::emit::detail {

namespace {

// A slice's fixed cost in keys a row (its setup, Q load and output), a placement weight: six
// 64-key steps. The committed binary's per-slice walls on the H200 put it nearer 12-18 steps
// (Llama-3.1-8B, Llama-3.2-1B, Qwen3-0.6B at 128, 512 and 4096 rows; perf-data/h200-sxm/
// 20261204T1920Z-flash-place); at those shapes on 132 streams either value places every slice on
// the same stream (modelled), so the weight was left as measured.
constexpr std::int64_t kSliceSetupKeys = 384;

// The relative cost of each slice of a causal prefill attention instruction (rows x keys read,
// taking row r of the bucket to sit at position r of its prompt, the first chunk's layout), or
// nothing where slices cost alike.
std::vector<std::int64_t> slice_costs(const InstrDesc& in, const OpcodeInfo& op) {
  if (op.family != "attention_prefill" || in.slices < 2) return {};
  const int wi = int_index(op, "window");
  const std::int64_t window = wi >= 0 ? in.ints[static_cast<std::size_t>(wi)] : 0;
  std::vector<std::int64_t> cost(in.slices);
  for (std::uint32_t s = 0; s < in.slices; ++s) {
    const RowRange rr = slice_rows(in, s);
    const std::int64_t n = std::max<std::int64_t>(0, rr.end - rr.begin);
    const std::int64_t keys = window > 0 ? std::min(rr.end, window + n) : rr.end;
    cost[s] = n * (kSliceSetupKeys + keys);
  }
  return cost;
}

}  // namespace

void schedule(ProgramDesc& p, std::uint32_t sm_count) {
  const std::size_t n = p.instrs.size();
  std::vector<std::set<std::uint32_t>> reads(n), writes(n);
  for (std::size_t i = 0; i < n; ++i) {
    const OpcodeInfo* op = find_opcode(p.instrs[i].opcode);
    for (std::size_t k = 0; k < p.instrs[i].tensors.size(); ++k) {
      const auto h = p.instrs[i].tensors[k];
      if (h == MET_NO_TENSOR) continue;
      (op->tensors[k].write ? writes[i] : reads[i]).insert(h);
    }
  }
  auto meets = [](const std::set<std::uint32_t>& a, const std::set<std::uint32_t>& b) {
    for (auto h : a)
      if (b.count(h)) return true;
    return false;
  };
  const std::size_t words = (n + 63) / 64;
  std::vector<std::vector<std::uint64_t>> reach(n, std::vector<std::uint64_t>(words, 0));
  std::vector<std::vector<WaitDesc>> waits(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t jj = i; jj-- > 0;) {
      const bool conflict = meets(writes[jj], reads[i]) || meets(writes[jj], writes[i]) || meets(reads[jj], writes[i]);
      if (!conflict) continue;
      if (reach[i][jj / 64] >> (jj % 64) & 1u) continue;  // implied by a later kept wait
      waits[i].push_back({static_cast<std::uint32_t>(jj), p.instrs[jj].slices});
      reach[i][jj / 64] |= std::uint64_t{1} << (jj % 64);
      for (std::size_t w = 0; w < words; ++w) reach[i][w] |= reach[jj][w];
    }
    std::reverse(waits[i].begin(), waits[i].end());
  }
  p.streams.assign(sm_count, {});
  std::size_t next = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const InstrDesc& in = p.instrs[i];
    const auto cost = slice_costs(in, *find_opcode(in.opcode));
    if (cost.empty()) {
      for (std::uint32_t s = 0; s < in.slices; ++s)
        p.streams[next++ % sm_count].push_back({static_cast<std::uint32_t>(i), s, waits[i]});
      continue;
    }
    // Longest first onto the least-loaded stream (ties: the round-robin order from `next`), so a
    // stream's share of the instruction is about the mean however the costs are spread.
    std::vector<std::uint32_t> order(in.slices);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return cost[a] > cost[b]; });
    using Load = std::pair<std::int64_t, std::uint32_t>;  // (work so far, rank from `next`)
    std::priority_queue<Load, std::vector<Load>, std::greater<>> least;
    for (std::uint32_t r = 0; r < sm_count; ++r) least.push({0, r});
    for (const std::uint32_t s : order) {
      auto [load, rank] = least.top();
      least.pop();
      p.streams[(next + rank) % sm_count].push_back({static_cast<std::uint32_t>(i), s, waits[i]});
      least.push({load + cost[s], rank});
    }
    next += in.slices;
  }
}

}  // namespace met::emit::detail
