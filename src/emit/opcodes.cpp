// The opcode table, read from the op registry (kernels/common/ops.def), and the bytes each slice
// of an instruction touches (the verifier's extents). The bodies live in the kernel tree; the CPU
// dispatch over them is src/interp/cpu_bodies.cpp.
#include "emit/opcodes.hpp"

#include <algorithm>

#include "emit/abi_doc.hpp"

namespace met::emit {
namespace {

// How the bytes an operand's slice touches follow from the slice's rows.
enum class Span {
  rows,      // dim 0 of the tensor is the row; the slice touches its rows (shifted by in_row0 on operand 0)
  cols,      // as rows, and dim 1 the output column: the slice touches its column range of its rows
  whole,     // weights, caches read across sequences, small tables: the whole tensor
  seq_slots, // a KV cache written by rows that each own a region of `seq_slots` slots (decode: row r = sequence r)
  by_slot,   // a KV cache written at slots[row] of the slice's rows: the whole tensor (OperandInfo::by_slot)
  // Head-unit splits of the fused qkv ops: units are the q heads, then the k heads, then the v
  // heads (heads + 2 * kv_heads); a slice's column part is a unit range (col_slices over units).
  q_heads,   // the q columns of the slice's units, in each of its rows
  k_heads,   // the k heads of the slice's units, in every slot of its rows' regions
  v_heads,   // the v heads likewise
  splits,    // [rows, heads, splits, x] partial states: the slice's split range (col_slices over splits)
  out_heads  // [rows, heads * v_head_dim] merged heads: the slice's head range (col_slices over heads)
};

// One tensor operand of a registry row.
struct Operand {
  const char* name;
  const char* kind;
  bool write;
  bool optional;  // every read may be absent; a write only when the registry says `opt`
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

constexpr bool kWrite_in = false, kWrite_out = true, kWrite_opt = true;
constexpr bool kOptional_in = true, kOptional_out = false, kOptional_opt = true;

// The rows of kernels/common/ops.def, in order (opcode number = index + 1).
std::vector<Row> rows_table() {
  std::vector<Row> t;
#define MET_OP(name, family, cpu) t.push_back(Row{#name, #family, #cpu, {}, {}, {}});
#define MET_T(name, kind, dir, span) t.back().tensors.push_back(Operand{#name, #kind, kWrite_##dir, kOptional_##dir, Span::span});
#define MET_I(name) t.back().ints.emplace_back(#name);
#define MET_F(name) t.back().imms.emplace_back(#name);
#define MET_END(name)
#include "kernels/common/ops.def"
  return t;
}

std::int64_t iv(const InstrDesc& d, std::size_t k) { return k < d.ints.size() ? d.ints[k] : 0; }
// The int named `name` of an instruction (0 when its opcode has none).
std::int64_t named_int(const OpcodeInfo& op, const InstrDesc& d, std::string_view name) {
  const int k = int_index(op, name);
  return k < 0 ? 0 : iv(d, static_cast<std::size_t>(k));
}

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
        o.tensors.push_back({op.name, op.kind, op.write, op.optional, op.span == Span::by_slot});
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

Extent extent_of(const InstrDesc& d, const PacketFile& f, std::size_t operand, std::uint32_t slice) {
  const OpcodeInfo* op = find_opcode(d.opcode);
  if (!op || operand >= d.tensors.size() || d.tensors[operand] == MET_NO_TENSOR) return {};
  if (d.tensors[operand] >= f.tensors.size()) return {};
  const TensorDesc& t = f.tensors[d.tensors[operand]];
  const Row& row = rows()[op->number - 1];
  const Span span = operand < row.tensors.size() ? row.tensors[operand].span : Span::whole;
  if (span == Span::whole || span == Span::by_slot || t.shape.empty() || t.shape[0] == 0) return {0, t.bytes};
  const RowRange rr = slice_rows(d, slice);
  if (rr.begin >= rr.end) return {};
  const auto U = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  if (span == Span::q_heads || span == Span::k_heads || span == Span::v_heads) {
    const std::int64_t heads = named_int(*op, d, "heads"), kvh = named_int(*op, d, "kv_heads"), hd = named_int(*op, d, "head_dim");
    const RowRange units = slice_cols(d, slice, heads + 2 * kvh);
    const std::int64_t lo = span == Span::q_heads ? 0 : span == Span::k_heads ? heads : heads + kvh;
    const std::int64_t n = span == Span::q_heads ? heads : kvh;
    const std::int64_t h0 = std::clamp(units.begin - lo, std::int64_t{0}, n), h1 = std::clamp(units.end - lo, std::int64_t{0}, n);
    if (h0 >= h1) return {};
    const std::uint64_t head_bytes = U(hd) * dtype_bytes(t.dtype);
    if (span == Span::q_heads)
      return strided_extent(U(rr.begin) * U(heads) * head_bytes + U(h0) * head_bytes, U(h1 - h0) * head_bytes,
                            U(heads) * head_bytes, U(rr.end - rr.begin));
    const std::int64_t per_seq = named_int(*op, d, "seq_slots");
    const std::uint64_t slot_bytes = t.bytes / t.shape[0];
    if (per_seq <= 0) return {0, t.bytes};
    return strided_extent(U(rr.begin * per_seq) * slot_bytes + U(h0) * head_bytes, U(h1 - h0) * head_bytes, slot_bytes,
                          U((rr.end - rr.begin) * per_seq));
  }
  if (span == Span::out_heads && t.shape.size() == 2) {
    const std::int64_t heads = named_int(*op, d, "heads");
    const RowRange hr = slice_cols(d, slice, heads);
    if (hr.begin >= hr.end || heads <= 0) return {};
    const std::uint64_t row_bytes = t.bytes / t.shape[0], head_bytes = row_bytes / U(heads);
    return strided_extent(U(rr.begin) * row_bytes + U(hr.begin) * head_bytes, U(hr.end - hr.begin) * head_bytes, row_bytes,
                          U(rr.end - rr.begin));
  }
  if (span == Span::splits && t.shape.size() == 4) {
    const std::uint64_t n = t.shape[2], x = t.shape[3] * dtype_bytes(t.dtype);
    const RowRange sp = slice_cols(d, slice, static_cast<std::int64_t>(n));
    if (sp.begin >= sp.end) return {};
    return strided_extent(U(rr.begin) * t.shape[1] * n * x + U(sp.begin) * x, U(sp.end - sp.begin) * x, n * x,
                          U(rr.end - rr.begin) * t.shape[1]);
  }
  if (span == Span::seq_slots) {
    const int k = int_index(*op, "seq_slots");
    const std::int64_t per_seq = k >= 0 ? iv(d, static_cast<std::size_t>(k)) : 0;
    if (per_seq <= 0) return {0, t.bytes};
    const std::uint64_t slot_bytes = t.bytes / t.shape[0];
    return {static_cast<std::uint64_t>(rr.begin * per_seq) * slot_bytes,
            std::min<std::uint64_t>(t.bytes, static_cast<std::uint64_t>(rr.end * per_seq) * slot_bytes)};
  }
  const std::uint64_t row_bytes = t.bytes / t.shape[0];
  std::int64_t row0 = 0;
  if (operand == 0) {
    const int k = int_index(*op, "in_row0");
    if (k >= 0) row0 = iv(d, static_cast<std::size_t>(k));
  }
  const auto first = static_cast<std::uint64_t>(row0 + rr.begin), last = static_cast<std::uint64_t>(row0 + rr.end);
  if (span == Span::cols && t.shape.size() >= 2 && t.shape[1] > 0) {
    // The column range in each of the slice's rows.
    const std::uint64_t col_bytes = row_bytes / t.shape[1];
    const RowRange cr = slice_cols(d, slice, static_cast<std::int64_t>(t.shape[1]));
    if (cr.begin >= cr.end) return {};
    return strided_extent(first * row_bytes + U(cr.begin) * col_bytes, U(cr.end - cr.begin) * col_bytes, row_bytes,
                          last - first);
  }
  return {first * row_bytes, last * row_bytes};
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

RowRange slice_rows(const InstrDesc& instr, std::uint32_t slice) {
  const std::int64_t rows = instr.ints.empty() ? 0 : instr.ints[0];
  const std::int64_t cols = col_parts(instr);
  const std::int64_t n = std::max<std::int64_t>(1, instr.slices / cols);
  const std::int64_t part = slice / cols;
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

}  // namespace met::emit
