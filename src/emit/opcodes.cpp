// The opcode table, read from the op registry (kernels/common/ops.def), and the bytes each slice
// of an instruction touches (the verifier's extents). The bodies live in the kernel tree; the CPU
// dispatch over them is src/interp/cpu_bodies.cpp.
#include "emit/opcodes.hpp"

#include <algorithm>

#include "emit/abi_doc.hpp"
#include "kernels/common/interp/smem.h"

namespace met::emit {
namespace {

// How the bytes an operand's slice touches follow from the slice's rows.
enum class Span {
  rows,      // dim 0 of the tensor is the row; the slice touches its rows (shifted by in_row0 on operand 0)
  cols,      // as rows, and dim 1 the output column: the slice touches its column range of its rows
  whole,     // weights, caches read across sequences, small tables: the whole tensor
  seq_slots, // a KV cache written by rows that each own a region of `seq_slots` slots (decode: row r = sequence r)
  by_slot,   // a KV cache written at slots[row] of the slice's rows: the whole tensor (OperandInfo::by_slot)
  grouped,   // rows a body places at run time (moe_group's sorted slots): the whole tensor, the slices' rows
             // disjoint by construction (OperandInfo::by_slot)
  // Head-unit splits of the fused qkv ops: units are the q heads, then the k heads, then the v
  // heads (heads + 2 * kv_heads); a slice's column part is a unit range (col_slices over units).
  q_heads,   // the q columns of the slice's units, in each of its rows
  k_heads,   // the k heads of the slice's units, in every slot of its rows' regions
  v_heads,   // the v heads likewise
  splits,    // [rows, heads, splits, x] partial states: the slice's split range (col_slices over splits)
  out_heads, // [rows, heads * v_head_dim] merged heads: the slice's head range (col_slices over heads)
  // (head block, split) units of attn_decode_split_merge, blocks x splits of them (col_slices over
  // units; a block: MET_ATTN_UNIT_HEADS query heads of one KV head, smem.h):
  kv_splits, // [rows, heads, splits, x] states: the query heads of the slice's blocks at its splits
  kv_out,    // [rows, heads * v_head_dim]: the query heads of the blocks whose last split the slice holds
  slot_cols, // [rows, top_k * inter] routed-expert slots: the slice's column range of `inter` (col_slices
             // over inter) in every slot of its rows
  route,     // [rows, top_k] a router's choices: the slice's rows where it holds the last column part (a GPU's
             // last part to arrive writes them, ordered after the other parts by its arrival counter)
  k_part     // [slices, x] a split-K GEMM's fp32 parts: row `slice` (every slice, whatever its rows)
};

// One tensor operand of a registry row.
struct Operand {
  const char* name;
  const char* kind;
  bool write;
  bool optional;  // every read may be absent; a write only when the registry says `opt` or `work`
  bool work;      // a body's workspace (`work`)
  Span span;
};

struct Row {
  const char* name;
  const char* family;
  const char* cpu;
  std::vector<Operand> tensors;
  std::vector<std::string> ints;
  std::vector<std::string> imms;
};

constexpr bool kWrite_in = false, kWrite_out = true, kWrite_opt = true, kWrite_work = true;
constexpr bool kOptional_in = true, kOptional_out = false, kOptional_opt = true, kOptional_work = true;
constexpr bool kWork_in = false, kWork_out = false, kWork_opt = false, kWork_work = true;

// The rows of kernels/common/ops.def, in order (opcode number = index + 1).
std::vector<Row> rows_table() {
  std::vector<Row> t;
#define MET_OP(name, family, cpu) t.push_back(Row{#name, #family, #cpu, {}, {}, {}});
#define MET_T(name, kind, dir, span) \
  t.back().tensors.push_back(Operand{#name, #kind, kWrite_##dir, kOptional_##dir, kWork_##dir, Span::span});
#define MET_I(name) t.back().ints.emplace_back(#name);
#define MET_F(name) t.back().imms.emplace_back(#name);
#define MET_END(name)
#include "kernels/common/ops.def"
  return t;
}

std::int64_t iv(const InstrDesc& d, std::size_t k) { return k < d.ints.size() ? d.ints[k] : 0; }
const std::vector<Row>& rows() {
  static const std::vector<Row> t = rows_table();
  return t;
}

Extent extent_of(const InstrDesc& d, const PacketFile& f, std::size_t operand, std::uint32_t slice);

const std::vector<OpcodeInfo>& build_table() {
  static const std::vector<OpcodeInfo> t = [] {
    std::vector<OpcodeInfo> out;
    std::uint32_t n = 1;  // 0 is never an opcode: a zeroed instruction is invalid
    for (const auto& r : rows()) {
      OpcodeInfo o;
      o.number = n++;
      o.name = r.name;
      for (std::size_t k = 0; k < r.tensors.size(); ++k) {
        const auto& op = r.tensors[k];
        o.tensors.push_back({op.name, op.kind, op.write, op.optional, op.span == Span::by_slot || op.span == Span::grouped, op.work});
        if (op.span == Span::cols && o.cols_operand < 0) o.cols_operand = static_cast<int>(k);
      }
      o.ints = r.ints;
      o.imms = r.imms;
      o.family = r.family;
      o.extent = extent_of;
      o.cpu_ref = r.cpu;
      out.push_back(std::move(o));
    }
    return out;
  }();
  return t;
}

// Extent arithmetic over the ints of a packet, which a damaged or hostile file can set to anything:
// every value is a 128-bit integer held within +-2^62 (far past any tensor), so no operation
// overflows, and an extent that leaves [0, 2^64) comes back as one that runs past every tensor,
// which the verifier refuses.
__extension__ using Wide = __int128;
constexpr Wide kWideLimit = Wide{1} << 62;
Wide held(Wide v) { return std::clamp(v, -kWideLimit, kWideLimit); }
Wide add(Wide a, Wide b) { return held(held(a) + held(b)); }
Wide mul(Wide a, Wide b) { return held(held(a) * held(b)); }
constexpr Extent kPastEveryTensor{0, ~std::uint64_t{0}};
bool fits(Wide v) { return v >= 0 && v < kWideLimit; }

Extent contiguous(Wide begin, Wide end) {
  if (!fits(begin) || !fits(end)) return kPastEveryTensor;
  return {static_cast<std::uint64_t>(begin), static_cast<std::uint64_t>(end)};
}
Extent strided(Wide begin, Wide len, Wide stride, Wide count) {
  if (!fits(begin) || !fits(len) || !fits(stride) || !fits(count)) return kPastEveryTensor;
  if (len > 0 && count > 0 && !fits(add(add(begin, mul(count - 1, stride)), len))) return kPastEveryTensor;
  return strided_extent(static_cast<std::uint64_t>(begin), static_cast<std::uint64_t>(len), static_cast<std::uint64_t>(stride),
                        static_cast<std::uint64_t>(count));
}

Extent extent_of(const InstrDesc& d, const PacketFile& f, std::size_t operand, std::uint32_t slice) {
  const OpcodeInfo* op = find_opcode(d.opcode);
  if (!op || operand >= d.tensors.size() || d.tensors[operand] == MET_NO_TENSOR) return {};
  if (d.tensors[operand] >= f.tensors.size()) return {};
  const TensorDesc& t = f.tensors[d.tensors[operand]];
  const Row& row = rows()[op->number - 1];
  const Span span = operand < row.tensors.size() ? row.tensors[operand].span : Span::whole;
  if (span == Span::whole || span == Span::by_slot || span == Span::grouped || t.shape.empty() || t.shape[0] == 0) return {0, t.bytes};
  if (span == Span::k_part) {  // each slice's own part, the K parts that hold no rows too
    if (t.shape.size() != 2 || slice >= t.shape[0]) return kPastEveryTensor;
    const Wide part_bytes = t.bytes / t.shape[0];
    return contiguous(mul(slice, part_bytes), mul(Wide{slice} + 1, part_bytes));
  }
  const RowRange rr = slice_rows(d, slice);
  if (rr.begin >= rr.end) return {};
  if (span == Span::route && static_cast<std::int64_t>(slice % col_parts(d)) != col_parts(d) - 1) return {};
  const Wide r0 = rr.begin, r1 = rr.end, nrows = add(r1, -r0);
  const Wide row_bytes = t.bytes / t.shape[0];
  if (span == Span::q_heads || span == Span::k_heads || span == Span::v_heads) {
    // The slice's units are rows [u0 * unit_rows, u1 * unit_rows) of the fused output (q heads, then
    // k heads, then v heads; unit_rows divides head_dim). A head split over several slices is
    // finished in place by the last of them to arrive, ordered after the others' writes by its
    // arrival counter, so each slice's bytes are its own rows of the output.
    const Wide heads = named_int(*op, d, "heads"), kvh = named_int(*op, d, "kv_heads"), hd = named_int(*op, d, "head_dim");
    const Wide ur = named_int(*op, d, "unit_rows");
    if (hd <= 0 || ur <= 0 || hd % ur != 0) return kPastEveryTensor;
    const Wide units_n = mul(add(heads, mul(2, kvh)), hd / ur);
    if (units_n <= 0 || units_n > INT64_MAX) return kPastEveryTensor;
    const RowRange units = slice_cols(d, slice, static_cast<std::int64_t>(units_n));
    const Wide lo = mul(span == Span::q_heads ? 0 : span == Span::k_heads ? heads : add(heads, kvh), hd);
    const Wide n = mul(span == Span::q_heads ? heads : kvh, hd);
    const Wide c0 = std::clamp(add(mul(units.begin, ur), -lo), Wide{0}, std::max(n, Wide{0}));
    const Wide c1 = std::clamp(add(mul(units.end, ur), -lo), Wide{0}, std::max(n, Wide{0}));
    if (c0 >= c1) return {};
    const Wide eb = dtype_bytes(t.dtype);
    if (span == Span::q_heads)
      return strided(add(mul(mul(r0, n), eb), mul(c0, eb)), mul(c1 - c0, eb), mul(n, eb), nrows);
    const Wide per_seq = named_int(*op, d, "seq_slots");
    if (per_seq <= 0) return {0, t.bytes};
    return strided(add(mul(mul(r0, per_seq), row_bytes), mul(c0, eb)), mul(c1 - c0, eb), row_bytes, mul(nrows, per_seq));
  }
  if (span == Span::out_heads && t.shape.size() == 2) {
    const Wide heads = named_int(*op, d, "heads");
    if (heads <= 0) return {};
    const RowRange hr = slice_cols(d, slice, static_cast<std::int64_t>(heads));
    if (hr.begin >= hr.end) return {};
    const Wide head_bytes = row_bytes / heads;
    return strided(add(mul(r0, row_bytes), mul(hr.begin, head_bytes)), mul(add(hr.end, -Wide{hr.begin}), head_bytes), row_bytes,
                   nrows);
  }
  if ((span == Span::kv_splits && t.shape.size() == 4) || (span == Span::kv_out && t.shape.size() == 2)) {
    // Unit u is split u % splits of head block u / splits (G query heads). The last split of a
    // (row, block) to arrive merges the others' states, ordered after their writes by its arrival
    // counter; its bytes are counted here against the slice that holds the block's last split.
    const Wide heads = named_int(*op, d, "heads"), kvh = named_int(*op, d, "kv_heads"), S = named_int(*op, d, "splits");
    if (heads <= 0 || kvh <= 0 || S <= 0 || heads % kvh != 0 || heads / kvh > INT32_MAX) return kPastEveryTensor;
    const Wide G = MET_ATTN_UNIT_HEADS(heads / kvh), blocks = MET_ATTN_UNIT_BLOCKS(heads, kvh);
    if (heads % G != 0 || mul(blocks, S) > INT64_MAX) return kPastEveryTensor;
    const RowRange u = slice_cols(d, slice, static_cast<std::int64_t>(mul(blocks, S)));
    if (u.begin >= u.end) return {};
    const Wide kv0 = u.begin / S, kv_last = (u.end - 1) / S;
    if (span == Span::kv_out) {
      const Wide kv1 = u.end / S;  // blocks [kv0, kv1) have their last split here
      if (kv0 >= kv1) return {};
      const Wide head_bytes = row_bytes / heads;
      return strided(add(mul(r0, row_bytes), mul(mul(kv0, G), head_bytes)), mul(mul(kv1 - kv0, G), head_bytes), row_bytes, nrows);
    }
    const Wide x = mul(t.shape[3], dtype_bytes(t.dtype));
    if (nrows == 1 && kv0 == kv_last) {  // one block's splits [i0, i1) in each of its query heads
      const Wide i0 = u.begin % S, i1 = (u.end - 1) % S + 1;
      return strided(mul(add(mul(add(mul(r0, heads), mul(kv0, G)), S), i0), x), mul(i1 - i0, x), mul(S, x), G);
    }
    return contiguous(mul(mul(add(mul(r0, heads), mul(kv0, G)), S), x),
                      mul(mul(add(mul(add(r1, -1), heads), mul(kv_last + 1, G)), S), x));
  }
  if (span == Span::splits && t.shape.size() == 4) {
    const Wide n = t.shape[2], x = mul(t.shape[3], dtype_bytes(t.dtype));
    const RowRange sp = slice_cols(d, slice, static_cast<std::int64_t>(n));
    if (sp.begin >= sp.end) return {};
    return strided(add(mul(mul(mul(r0, t.shape[1]), n), x), mul(sp.begin, x)), mul(add(sp.end, -Wide{sp.begin}), x), mul(n, x),
                   mul(nrows, t.shape[1]));
  }
  if (span == Span::slot_cols && t.shape.size() == 2) {
    const Wide top_k = named_int(*op, d, "top_k"), inter = named_int(*op, d, "inter");
    if (top_k <= 0 || inter <= 0 || mul(top_k, inter) != static_cast<Wide>(t.shape[1]) || inter > INT64_MAX) return kPastEveryTensor;
    const RowRange cr = slice_cols(d, slice, static_cast<std::int64_t>(inter));
    if (cr.begin >= cr.end) return {};
    const Wide eb = dtype_bytes(t.dtype);
    return strided(add(mul(r0, row_bytes), mul(cr.begin, eb)), mul(add(cr.end, -Wide{cr.begin}), eb), mul(inter, eb),
                   mul(nrows, top_k));
  }
  if (span == Span::seq_slots) {
    const int k = int_index(*op, "seq_slots");
    const Wide per_seq = k >= 0 ? iv(d, static_cast<std::size_t>(k)) : 0;
    if (per_seq <= 0) return {0, t.bytes};
    const Extent e = contiguous(mul(mul(r0, per_seq), row_bytes), mul(mul(r1, per_seq), row_bytes));
    return {e.begin, std::min<std::uint64_t>(t.bytes, e.end)};
  }
  Wide row0 = 0;
  if (operand == 0) {
    const int k = int_index(*op, "in_row0");
    if (k >= 0) row0 = iv(d, static_cast<std::size_t>(k));
  }
  const Wide first = add(row0, r0), last = add(row0, r1);
  if (span == Span::cols && t.shape.size() >= 2 && t.shape[1] > 0) {
    // The column range in each of the slice's rows.
    const Wide col_bytes = row_bytes / t.shape[1];
    const RowRange cr = slice_cols(d, slice, static_cast<std::int64_t>(t.shape[1]));
    if (cr.begin >= cr.end) return {};
    return strided(add(mul(first, row_bytes), mul(cr.begin, col_bytes)), mul(add(cr.end, -Wide{cr.begin}), col_bytes), row_bytes,
                   add(last, -first));
  }
  return contiguous(mul(first, row_bytes), mul(last, row_bytes));
}

}  // namespace

Extent strided_extent(std::uint64_t begin, std::uint64_t len, std::uint64_t stride, std::uint64_t count) {
  if (len == 0 || count == 0) return {};
  if (count == 1 || len >= stride) return Extent{begin, begin + (count - 1) * stride + len};
  return Extent{begin, begin + (count - 1) * stride + len, stride, len, count};
}

bool extents_overlap(const Extent& a, const Extent& b) {
  if (a.begin >= a.end || b.begin >= b.end || a.begin >= b.end || b.begin >= a.end) return false;
  if (!a.strided() && !b.strided()) return true;
  if (a.strided() && b.strided()) {
    if (a.stride != b.stride) return true;  // conservative
    const Extent& x = a.begin <= b.begin ? a : b;
    const Extent& y = a.begin <= b.begin ? b : a;
    const std::uint64_t s = x.stride, q = (y.begin - x.begin) / s, rem = (y.begin - x.begin) % s;
    // y's block j starts `rem` bytes into x's row q + j and may run into row q + j + 1.
    return (rem < x.len && q < x.count) || (rem + y.len > s && q + 1 < x.count);
  }
  const Extent& st = a.strided() ? a : b;
  const Extent& c = a.strided() ? b : a;
  const std::uint64_t first = c.begin < st.begin + st.len ? 0 : (c.begin - st.begin - st.len) / st.stride + 1;
  return first < st.count && st.begin + first * st.stride < c.end;
}

bool gated_gemm(const OpcodeInfo& op) { return op.cpu_ref == "gemm_silu" || op.cpu_ref == "gemm_gelu"; }

std::int64_t col_parts(const InstrDesc& instr) {
  const OpcodeInfo* op = find_opcode(instr.opcode);
  const int k = op ? int_index(*op, "col_slices") : -1;
  if (k < 0 || static_cast<std::size_t>(k) >= instr.ints.size()) return 1;
  return std::max<std::int64_t>(1, instr.ints[static_cast<std::size_t>(k)]);
}

namespace {
// part * total / parts without overflow (a packet's sizes are untrusted until verified).
std::int64_t share(std::int64_t part, std::int64_t total, std::int64_t parts) {
  __extension__ using i128 = __int128;
  return static_cast<std::int64_t>(static_cast<i128>(part) * total / parts);
}
}  // namespace

std::int64_t k_parts(const InstrDesc& instr) {
  const OpcodeInfo* op = find_opcode(instr.opcode);
  const int k = op ? int_index(*op, "k_splits") : -1;
  if (k < 0 || static_cast<std::size_t>(k) >= instr.ints.size()) return 1;
  return std::max<std::int64_t>(1, instr.ints[static_cast<std::size_t>(k)]);
}

bool splits_k(const OpcodeInfo& op) { return op.family == "gemm" && op.name.ends_with("_bf16_wgmma"); }

RowRange slice_rows(const InstrDesc& instr, std::uint32_t slice) {
  const std::int64_t rows = instr.ints.empty() ? 0 : instr.ints[0];
  const std::int64_t cols = col_parts(instr);
  // Slices per K part (the tiles), K part-major; a K part before the last holds no rows.
  const std::int64_t kp = k_parts(instr), tiles = std::max<std::int64_t>(1, instr.slices / kp);
  if (kp > 1 && slice / tiles != kp - 1) return {};
  const std::int64_t n = std::max<std::int64_t>(1, tiles / cols);
  const std::int64_t part = (slice % tiles) / cols;
  return {std::min(rows, share(part, rows, n)), std::min(rows, share(part + 1, rows, n))};
}

RowRange slice_cols(const InstrDesc& instr, std::uint32_t slice, std::int64_t n) {
  const std::int64_t cols = col_parts(instr);
  const std::int64_t part = slice % cols;
  return {share(part, n, cols), share(part + 1, n, cols)};
}

int int_index(const OpcodeInfo& op, std::string_view name) {
  for (std::size_t i = 0; i < op.ints.size(); ++i)
    if (op.ints[i] == name) return static_cast<int>(i);
  return -1;
}

int tensor_index(const OpcodeInfo& op, std::string_view name) {
  for (std::size_t i = 0; i < op.tensors.size(); ++i)
    if (op.tensors[i].name == name) return static_cast<int>(i);
  return -1;
}

const std::vector<OpcodeInfo>& opcode_table() { return build_table(); }

const OpcodeInfo* find_opcode(std::uint32_t number) {
  const auto& t = opcode_table();
  if (number == 0 || number > t.size()) return nullptr;
  return &t[number - 1];
}

const OpcodeInfo* find_opcode(std::string_view name) {
  for (const auto& o : opcode_table())
    if (o.name == name) return &o;
  return nullptr;
}

std::int64_t named_int(const OpcodeInfo& op, const InstrDesc& d, std::string_view name) {
  const int k = int_index(op, name);
  return k < 0 ? 0 : iv(d, static_cast<std::size_t>(k));
}

}  // namespace met::emit
