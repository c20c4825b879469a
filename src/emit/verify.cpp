// The packet verifier. Per program: structure first (handles, slots, streams, waits), then the
// static checks (bounds, exactly-once), then one simulation of the streams with every block
// resident. The simulation finds deadlocks and carries a vector clock per stream (entries of each
// stream that happen before), from which the order and overlap checks read happens-before exactly:
// (j,t) happens before (i,s) iff clock(i,s)[stream of (j,t)] > position of (j,t).
#include "emit/verify.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace met::emit {

namespace {

constexpr std::size_t kTensorSlots = sizeof(MetPktInstr::tensors) / sizeof(MetPktInstr::tensors[0]);
constexpr std::size_t kIntSlots = sizeof(MetPktInstr::ints) / sizeof(MetPktInstr::ints[0]);
constexpr std::size_t kImmSlots = sizeof(MetPktInstr::imms) / sizeof(MetPktInstr::imms[0]);
constexpr std::size_t kMaxRank = 4;
// Slices beyond the streams' entries this far mean a corrupt count; refuse before allocating.
constexpr std::uint64_t kSliceSlack = 1u << 20;
// Clock cells (streams x (streams + instructions)) the happens-before simulation may allocate.
constexpr std::uint64_t kMaxClockCells = std::uint64_t{1} << 28;

enum Check { kStructure = 0, kOrder = 1, kDeadlock = 2, kBounds = 3, kOverlap = 4 };
const char* const kCheckNames[] = {"structure", "missing waits", "deadlock", "bounds", "overlapping writes"};

struct Problem {
  int check = kStructure;
  std::uint64_t instr = 0;
  std::uint64_t slice = 0;
  std::string text;
};

// An operand marked optional (when the opcode table has the field) may be MET_NO_TENSOR; without
// the field, read operands may be absent (attention sinks) and written ones may not.
template <class Operand>
bool operand_optional(const Operand& info) {
  if constexpr (requires { info.optional; }) {
    return info.optional;
  } else {
    return !info.write;
  }
}

bool overlap(const Extent& a, const Extent& b) { return extents_overlap(a, b); }

Extent intersect(const Extent& a, const Extent& b) { return Extent{std::max(a.begin, b.begin), std::min(a.end, b.end)}; }

std::string range(const Extent& e) { return fmt::format("[{}, {})", e.begin, e.end); }

struct Loc {
  std::uint32_t stream = 0;
  std::uint32_t pos = 0;
};

// One operand of an instruction that touches a tensor, with its extent per slice.
struct Access {
  std::size_t operand = 0;
  std::uint32_t tensor = 0;
  bool write = false;
  bool by_slot = false;        // OperandInfo::by_slot
  std::vector<Extent> slices;  // clamped to the tensor
  Extent hull;                 // union of the non-empty slice extents
};

class ProgramVerifier {
 public:
  ProgramVerifier(const PacketFile& file, const ProgramDesc& prog, const std::vector<OpcodeInfo>& table)
      : file_(file), prog_(prog), n_(prog.instrs.size()) {
    for (const auto& op : table) by_number_.emplace(op.number, &op);
    ops_.assign(n_, nullptr);
  }

  std::vector<Problem> run() {
    if (!structure()) return std::move(problems_);
    bounds();
    if (!exactly_once()) return std::move(problems_);
    waits_static();
    simulate();
    return std::move(problems_);
  }

 private:
  std::string instr_name(std::uint64_t i) const {
    const auto* op = i < n_ ? ops_[i] : nullptr;
    return fmt::format("instruction {} ({})", i, op ? op->name : fmt::format("opcode {}", i < n_ ? prog_.instrs[i].opcode : 0));
  }
  std::string tensor_name(std::uint32_t t) const { return fmt::format("t{} '{}'", t, file_.tensors[t].name); }
  std::string operand_name(std::uint64_t i, std::size_t k) const {
    const auto* op = ops_[i];
    return op && k < op->tensors.size() ? op->tensors[k].name : fmt::format("tensor{}", k);
  }

  void add(int check, std::uint64_t i, std::uint64_t s, std::string text) {
    problems_.push_back(Problem{check, i, s, std::move(text)});
  }

  std::uint64_t flat(std::uint64_t i, std::uint64_t s) const { return first_slice_[i] + s; }

  // Indices, slot counts, handles and stream shape; false when later checks cannot run.
  bool structure() {
    bool ok = true;
    const auto bad = [&](std::uint64_t i, std::uint64_t s, std::string text) {
      add(kStructure, i, s, std::move(text));
      ok = false;
    };
    if (prog_.streams.size() != file_.sm_count) {
      bad(0, 0, fmt::format("{} streams but the sm count is {}", prog_.streams.size(), file_.sm_count));
    }
    first_slice_.assign(n_ + 1, 0);
    for (std::size_t i = 0; i < n_; ++i) {
      const auto& in = prog_.instrs[i];
      auto it = by_number_.find(in.opcode);
      ops_[i] = it == by_number_.end() ? nullptr : it->second;
      if (!ops_[i]) bad(i, 0, fmt::format("{}: opcode {} is not in the opcode table", instr_name(i), in.opcode));
      if (in.tensors.size() > kTensorSlots || in.ints.size() > kIntSlots || in.imms.size() > kImmSlots) {
        bad(i, 0,
            fmt::format("{}: {} tensors, {} ints, {} imms (the ABI holds {}, {}, {})", instr_name(i), in.tensors.size(),
                        in.ints.size(), in.imms.size(), kTensorSlots, kIntSlots, kImmSlots));
      }
      if (in.slices == 0) bad(i, 0, fmt::format("{}: 0 slices", instr_name(i)));
      for (std::size_t k = 0; k < in.tensors.size(); ++k) {
        const auto h = in.tensors[k];
        if (h == MET_NO_TENSOR) continue;
        if (h >= file_.tensors.size()) {
          bad(i, 0,
              fmt::format("{}: tensor slot {} holds handle {}, but the file has {} tensors", instr_name(i), k, h,
                          file_.tensors.size()));
        } else if (ops_[i] && k >= ops_[i]->tensors.size()) {
          bad(i, 0,
              fmt::format("{}: tensor slot {} holds {}, but the opcode has {} operands", instr_name(i), k, tensor_name(h),
                          ops_[i]->tensors.size()));
        }
      }
      if (ops_[i]) {
        for (std::size_t k = 0; k < ops_[i]->tensors.size(); ++k) {
          const bool absent = k >= in.tensors.size() || in.tensors[k] == MET_NO_TENSOR;
          if (absent && !operand_optional(ops_[i]->tensors[k])) {
            bad(i, 0,
                fmt::format("{}: operand '{}' (slot {}) needs a tensor but holds none", instr_name(i), ops_[i]->tensors[k].name,
                            k));
          }
        }
      }
      first_slice_[i + 1] = first_slice_[i] + in.slices;
    }
    std::uint64_t entries = 0;
    for (std::size_t k = 0; k < prog_.streams.size(); ++k) {
      for (std::size_t e = 0; e < prog_.streams[k].size(); ++e) {
        const auto& en = prog_.streams[k][e];
        ++entries;
        if (en.instr >= n_) {
          bad(n_, 0, fmt::format("stream {} entry {}: instruction {} but the program has {}", k, e, en.instr, n_));
          continue;
        }
        if (en.slice >= prog_.instrs[en.instr].slices) {
          bad(en.instr, en.slice,
              fmt::format("{} slice {}: stream {} entry {} names a slice past its {} slices", instr_name(en.instr), en.slice, k,
                          e, prog_.instrs[en.instr].slices));
        }
        for (const auto& w : en.waits) {
          if (w.counter >= n_) {
            bad(en.instr, en.slice,
                fmt::format("{} slice {}: stream {} entry {} waits on counter {} but the program has {} instructions",
                            instr_name(en.instr), en.slice, k, e, w.counter, n_));
          }
        }
      }
    }
    if (first_slice_[n_] > entries + kSliceSlack) {
      bad(0, 0, fmt::format("instructions declare {} slices but the streams hold {} entries", first_slice_[n_], entries));
    }
    return ok;
  }

  // (c): every operand's extent per slice lies within its tensor. Also records the accesses.
  void bounds() {
    accesses_.assign(n_, {});
    for (std::size_t i = 0; i < n_; ++i) {
      const auto* op = ops_[i];
      if (!op) continue;
      InstrDesc in = prog_.instrs[i];  // every slot present, as parse_packet gives it
      in.tensors.resize(kTensorSlots, MET_NO_TENSOR);
      in.ints.resize(kIntSlots, 0);
      in.imms.resize(kImmSlots, 0.0f);
      for (std::size_t k = 0; k < op->tensors.size(); ++k) {
        const auto h = in.tensors[k];
        if (h == MET_NO_TENSOR) continue;
        const auto bytes = file_.tensors[h].bytes;
        Access a{k, h, op->tensors[k].write, op->tensors[k].by_slot, {}, Extent{}};
        a.slices.reserve(in.slices);
        std::uint64_t bad = 0;
        std::uint32_t first_bad = 0;
        Extent first_extent;
        bool have_hull = false;
        for (std::uint32_t s = 0; s < in.slices; ++s) {
          Extent e = op->extent ? op->extent(in, file_, k, s) : Extent{0, bytes};
          if (e.begin > e.end || e.end > bytes) {
            if (bad++ == 0) {
              first_bad = s;
              first_extent = e;
            }
            e = Extent{std::min(e.begin, bytes), std::min(std::max(e.begin, e.end), bytes)};
          }
          if (e.begin < e.end) {
            a.hull = have_hull ? Extent{std::min(a.hull.begin, e.begin), std::max(a.hull.end, e.end)} : Extent{e.begin, e.end};
            have_hull = true;
          }
          a.slices.push_back(e);
        }
        if (bad > 0) {
          const char* why = first_extent.begin > first_extent.end ? "is inverted" : "runs past";
          add(kBounds, i, first_bad,
              fmt::format("{} slice {}: operand '{}' ({}) extent {} {} the tensor's {} bytes{}", instr_name(i), first_bad,
                          op->tensors[k].name, tensor_name(h), range(first_extent), why, bytes,
                          bad > 1 ? fmt::format(" (+{} more slices)", bad - 1) : ""));
        }
        accesses_[i].push_back(std::move(a));
      }
    }
  }

  // (b), part 1: every (instruction, slice) appears exactly once across the streams.
  bool exactly_once() {
    constexpr Loc kUnset{~0u, ~0u};
    loc_.assign(first_slice_[n_], kUnset);
    bool ok = true;
    for (std::uint32_t k = 0; k < prog_.streams.size(); ++k) {
      for (std::uint32_t e = 0; e < prog_.streams[k].size(); ++e) {
        const auto& en = prog_.streams[k][e];
        auto& l = loc_[flat(en.instr, en.slice)];
        if (l.stream != kUnset.stream) {
          add(kDeadlock, en.instr, en.slice,
              fmt::format("{} slice {}: runs twice, at stream {} entry {} and stream {} entry {}", instr_name(en.instr), en.slice,
                          l.stream, l.pos, k, e));
          ok = false;
          continue;
        }
        l = Loc{k, e};
      }
    }
    for (std::size_t i = 0; i < n_; ++i) {
      std::uint64_t missing = 0;
      std::uint32_t first = 0;
      for (std::uint32_t s = 0; s < prog_.instrs[i].slices; ++s) {
        if (loc_[flat(i, s)].stream == kUnset.stream && missing++ == 0) first = s;
      }
      if (missing > 0) {
        add(kDeadlock, i, first,
            fmt::format("{} slice {}: in no stream{}", instr_name(i), first,
                        missing > 1 ? fmt::format(" (+{} more slices)", missing - 1) : ""));
        ok = false;
      }
    }
    return ok;
  }

  // (b), part 2: waits that can never be satisfied, or that point backwards in program order.
  void waits_static() {
    for (std::uint32_t k = 0; k < prog_.streams.size(); ++k) {
      for (std::uint32_t e = 0; e < prog_.streams[k].size(); ++e) {
        const auto& en = prog_.streams[k][e];
        for (const auto& w : en.waits) {
          if (w.counter >= en.instr) {
            add(kDeadlock, en.instr, en.slice,
                fmt::format(
                    "{} slice {}: waits on counter {}, which is not an earlier instruction (streams must follow program order)",
                    instr_name(en.instr), en.slice, w.counter));
          }
          if (w.value > prog_.instrs[w.counter].slices) {
            add(kDeadlock, en.instr, en.slice,
                fmt::format("{} slice {}: waits for counter {} >= {}, but {} has {} slices", instr_name(en.instr), en.slice,
                            w.counter, w.value, instr_name(w.counter), prog_.instrs[w.counter].slices));
          }
        }
      }
    }
  }

  // The instructions before i whose accesses may conflict with i's (same tensor, hulls overlap,
  // one of the two writes): only these need ordering.
  std::vector<std::vector<std::uint32_t>> candidates() const {
    std::map<std::uint32_t, std::vector<std::pair<std::uint32_t, const Access*>>> by_tensor;
    for (std::uint32_t i = 0; i < n_; ++i) {
      for (const auto& a : accesses_[i]) by_tensor[a.tensor].push_back({i, &a});
    }
    std::vector<std::set<std::uint32_t>> sets(n_);
    for (const auto& [t, list] : by_tensor) {
      for (std::size_t x = 0; x < list.size(); ++x) {
        for (std::size_t y = x + 1; y < list.size(); ++y) {
          const auto& [j, a] = list[x];
          const auto& [i, b] = list[y];
          if (i == j || !(a->write || b->write) || !overlap(a->hull, b->hull)) continue;
          sets[std::max(i, j)].insert(std::min(i, j));
        }
      }
    }
    std::vector<std::vector<std::uint32_t>> out(n_);
    for (std::size_t i = 0; i < n_; ++i) out[i].assign(sets[i].begin(), sets[i].end());
    return out;
  }

  // Pairs of slices of one instruction whose writes overlap (sort by begin, sweep).
  struct WritePair {
    std::uint32_t other = 0;
    std::uint32_t tensor = 0;
    Extent bytes;
  };
  std::vector<std::vector<WritePair>> write_pairs_of(std::size_t i) const {
    std::vector<std::vector<WritePair>> out(prog_.instrs[i].slices);
    std::map<std::uint32_t, std::vector<std::pair<Extent, std::uint32_t>>> by_tensor;
    for (const auto& a : accesses_[i]) {
      if (!a.write || a.by_slot) continue;  // by-slot slices: disjoint rows, distinct slots (host-checked)
      for (std::uint32_t s = 0; s < a.slices.size(); ++s) {
        if (a.slices[s].begin < a.slices[s].end) by_tensor[a.tensor].push_back({a.slices[s], s});
      }
    }
    for (auto& [t, list] : by_tensor) {
      std::sort(list.begin(), list.end(), [](const auto& x, const auto& y) {
        return std::tie(x.first.begin, x.first.end, x.second) < std::tie(y.first.begin, y.first.end, y.second);
      });
      for (std::size_t x = 0; x < list.size(); ++x) {
        for (std::size_t y = x + 1; y < list.size() && list[y].first.begin < list[x].first.end; ++y) {
          const auto s = list[x].second, u = list[y].second;
          if (s == u || !overlap(list[x].first, list[y].first)) continue;
          const Extent both = intersect(list[x].first, list[y].first);
          out[s].push_back(WritePair{u, t, both});
          out[u].push_back(WritePair{s, t, both});
        }
      }
    }
    return out;
  }

  // The first conflicting access between slice t of j and slice s of i, described from i's side.
  bool conflict(std::uint32_t j, std::uint32_t t, std::uint32_t i, std::uint32_t s, std::string& what) const {
    for (const auto& b : accesses_[i]) {
      for (const auto& a : accesses_[j]) {
        if (a.tensor != b.tensor || !(a.write || b.write) || !overlap(a.slices[t], b.slices[s])) continue;
        const Extent both = intersect(a.slices[t], b.slices[s]);
        const char* verb = b.write ? "writes" : "reads";
        const char* other = a.write ? (b.write ? "also writes" : "writes") : "reads";
        what =
            fmt::format("{} {} bytes {} that {} slice {} {}", verb, tensor_name(b.tensor), range(both), instr_name(j), t, other);
        return true;
      }
    }
    return false;
  }

  void simulate() {
    const std::uint64_t S = prog_.streams.size();
    if (S * (S + n_) > kMaxClockCells) {
      add(kStructure, 0, 0,
          fmt::format("{} streams x {} instructions is too large for the happens-before check; order and overlap not verified", S,
                      n_));
      return;
    }
    const auto cands = candidates();
    // footprint[j]: per stream, one past the last position of j's entries there (0: none).
    std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> footprint(n_);
    for (std::size_t j = 0; j < n_; ++j) {
      std::map<std::uint32_t, std::uint32_t> last;
      for (std::uint32_t t = 0; t < prog_.instrs[j].slices; ++t) {
        const auto l = loc_[flat(j, t)];
        auto& v = last[l.stream];
        v = std::max(v, l.pos + 1);
      }
      footprint[j].assign(last.begin(), last.end());
    }
    std::vector<std::vector<std::uint32_t>> clock(S, std::vector<std::uint32_t>(S, 0));
    std::vector<std::vector<std::uint32_t>> joined(n_, std::vector<std::uint32_t>(S, 0));    // join of j's entries' clocks
    std::vector<std::vector<std::uint8_t>> full_known(S, std::vector<std::uint8_t>(n_, 0));  // stream k is past all of j
    std::vector<std::uint32_t> counter(n_, 0), pos(S, 0);
    std::vector<std::uint8_t> executed(first_slice_[n_], 0);
    std::vector<std::vector<WritePair>> pairs_cur;
    std::vector<std::vector<std::vector<WritePair>>> write_pairs(n_);
    std::vector<std::uint8_t> write_pairs_done(n_, 0);
    // Missing orders, one line per (i, j) pair: first slices, and how many slice pairs.
    struct Missing {
      std::uint32_t s = 0, t = 0;
      std::string what;
      std::uint64_t count = 0;
    };
    std::map<std::pair<std::uint32_t, std::uint32_t>, Missing> missing;

    std::vector<std::vector<std::uint32_t>> waiting(n_);
    std::deque<std::uint32_t> ready;
    std::vector<std::uint8_t> queued(S, 1);
    for (std::uint32_t k = 0; k < S; ++k) ready.push_back(k);

    while (!ready.empty()) {
      const auto k = ready.front();
      ready.pop_front();
      queued[k] = 0;
      while (pos[k] < prog_.streams[k].size()) {
        const auto& en = prog_.streams[k][pos[k]];
        const WaitDesc* blocked = nullptr;
        for (const auto& w : en.waits) {
          if (counter[w.counter] < w.value) {
            blocked = &w;
            break;
          }
        }
        if (blocked) {
          waiting[blocked->counter].push_back(k);
          break;
        }
        auto& c = clock[k];
        for (const auto& w : en.waits) {
          // A wait for every slice orders all of them; a partial wait orders none (which slices
          // signalled first is not known statically).
          if (w.value != prog_.instrs[w.counter].slices) continue;
          const auto& jc = joined[w.counter];
          for (std::size_t x = 0; x < S; ++x) c[x] = std::max(c[x], jc[x]);
        }
        c[k] = pos[k] + 1;
        const auto i = en.instr, s = en.slice;

        // (a) every earlier conflicting slice happens before this one.
        for (const auto j : cands[i]) {
          if (!full_known[k][j]) {
            bool full = true;
            for (const auto& [stream, end] : footprint[j]) full = full && c[stream] >= end;
            if (full) full_known[k][j] = 1;
          }
          if (full_known[k][j]) continue;
          for (std::uint32_t t = 0; t < prog_.instrs[j].slices; ++t) {
            const auto l = loc_[flat(j, t)];
            if (c[l.stream] > l.pos) continue;
            std::string what;
            if (!conflict(j, t, i, s, what)) continue;
            auto& m = missing[{i, j}];
            if (m.count++ == 0) {
              m.s = s;
              m.t = t;
              m.what = std::move(what);
            }
          }
        }
        // (d) slices of this instruction that write the same bytes are ordered.
        if (!write_pairs_done[i]) {
          write_pairs[i] = write_pairs_of(i);
          write_pairs_done[i] = 1;
        }
        for (const auto& wp : write_pairs[i][s]) {
          if (!executed[flat(i, wp.other)]) continue;  // checked when the other one runs
          const auto l = loc_[flat(i, wp.other)];
          if (c[l.stream] > l.pos) continue;
          add(kOverlap, i, std::min(s, wp.other),
              fmt::format("{} slices {} and {}: both write {} bytes {} and nothing orders them", instr_name(i),
                          std::min(s, wp.other), std::max(s, wp.other), tensor_name(wp.tensor), range(wp.bytes)));
        }

        auto& jn = joined[i];
        for (std::size_t x = 0; x < S; ++x) jn[x] = std::max(jn[x], c[x]);
        executed[flat(i, s)] = 1;
        ++counter[i];
        ++pos[k];
        for (const auto w : waiting[i]) {
          if (!queued[w]) {
            queued[w] = 1;
            ready.push_back(w);
          }
        }
        waiting[i].clear();
      }
    }

    for (const auto& [key, m] : missing) {
      const auto [i, j] = key;
      add(kOrder, i, m.s,
          fmt::format("{} slice {}: {}, but nothing orders them (no wait for counter {} >= {}){}", instr_name(i), m.s, m.what, j,
                      prog_.instrs[j].slices, m.count > 1 ? fmt::format(" (+{} more slice pairs)", m.count - 1) : ""));
    }
    for (std::uint32_t k = 0; k < S; ++k) {
      if (pos[k] >= prog_.streams[k].size()) continue;
      const auto& en = prog_.streams[k][pos[k]];
      std::string why;
      for (const auto& w : en.waits) {
        if (counter[w.counter] < w.value) {
          why = fmt::format("counter {} >= {} (it stops at {})", w.counter, w.value, counter[w.counter]);
          break;
        }
      }
      add(kDeadlock, en.instr, en.slice,
          fmt::format("{} slice {}: stream {} stops at entry {} of {}, waiting forever for {}", instr_name(en.instr), en.slice, k,
                      pos[k], prog_.streams[k].size(), why));
    }
  }

  const PacketFile& file_;
  const ProgramDesc& prog_;
  const std::size_t n_;
  std::map<std::uint32_t, const OpcodeInfo*> by_number_;
  std::vector<const OpcodeInfo*> ops_;
  std::vector<std::uint64_t> first_slice_;  // prefix sums of slices: flat index of (i, 0)
  std::vector<std::vector<Access>> accesses_;
  std::vector<Loc> loc_;
  std::vector<Problem> problems_;
};

}  // namespace

std::vector<std::string> verify(const PacketFile& file, const std::vector<OpcodeInfo>& table) {
  std::vector<std::string> out;
  if (file.target_class.size() >= sizeof(MetPktHeader::target_class)) {
    out.push_back(fmt::format("packet: target class '{}' is longer than {} bytes", file.target_class,
                              sizeof(MetPktHeader::target_class) - 1));
  }
  for (std::size_t t = 0; t < file.tensors.size(); ++t) {
    if (file.tensors[t].shape.size() > kMaxRank) {
      out.push_back(
          fmt::format("packet: tensor {} '{}': rank {} > {}", t, file.tensors[t].name, file.tensors[t].shape.size(), kMaxRank));
    }
  }
  for (const auto& prog : file.programs) {
    auto problems = ProgramVerifier(file, prog, table).run();
    std::stable_sort(problems.begin(), problems.end(), [](const Problem& a, const Problem& b) {
      return std::tie(a.check, a.instr, a.slice) < std::tie(b.check, b.instr, b.slice);
    });
    std::size_t shown = 0;
    for (std::size_t k = 0; k < problems.size(); ++k) {
      if (k > 0 && problems[k].check != problems[k - 1].check) shown = 0;
      if (shown == kMaxProblemsPerCheck) {
        std::size_t more = 0;
        while (k + more < problems.size() && problems[k + more].check == problems[k].check) ++more;
        out.push_back(fmt::format("program {}: ... {} more {} problems", prog.name, more, kCheckNames[problems[k].check]));
        k += more - 1;
        shown = 0;
        continue;
      }
      ++shown;
      out.push_back(fmt::format("program {}: {}", prog.name, problems[k].text));
    }
  }
  return out;
}

}  // namespace met::emit
