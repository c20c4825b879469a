// The opcode table rows and their CPU bodies. Each body offsets the row pointers of its slice and
// calls the kernels/cpu entry point of the same name, so the interpreter runs exactly the op bodies
// the cpu class compiles. The kernels/cpu definitions are included here, in this one TU.
#include "emit/opcodes.hpp"

#include <algorithm>

#include "emit/abi_doc.hpp"

#include "../../kernels/cpu/attention.hpp"
#include "../../kernels/cpu/embed.hpp"
#include "../../kernels/cpu/gemm.hpp"
#include "../../kernels/cpu/gemv.hpp"
#include "../../kernels/cpu/moe.hpp"
#include "../../kernels/cpu/sample.hpp"

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

struct Operand {
  Operand(const char* n, bool w, Span s, bool opt = false) : name(n), write(w), span(s), optional(opt || !w) {}
  const char* name;
  bool write;
  Span span;
  bool optional;  // every read may be absent; a write only when marked
};

struct Row {
  const char* name;
  const char* family;
  std::vector<Operand> tensors;
  std::vector<std::string> ints;
  std::vector<std::string> imms;
  void (*cpu)(const InstrDesc&, std::uint32_t, void* const*);
};

// ---- operand access ----
using u16 = std::uint16_t;
std::int64_t iv(const InstrDesc& d, std::size_t k) { return k < d.ints.size() ? d.ints[k] : 0; }
float fv(const InstrDesc& d, std::size_t k) { return k < d.imms.size() ? d.imms[k] : 0.0f; }
std::int32_t i32(const InstrDesc& d, std::size_t k) { return static_cast<std::int32_t>(iv(d, k)); }
u16* bf(void* const* o, std::size_t k) { return static_cast<u16*>(o[k]); }
const MetHostWeight* wt(void* const* o, std::size_t k) { return static_cast<const MetHostWeight*>(o[k]); }
const u16* vec(void* const* o, std::size_t k) {  // a bf16 vector weight (norm), or null when absent
  return o[k] ? static_cast<const u16*>(wt(o, k)->data) : nullptr;
}
std::int32_t* s32(void* const* o, std::size_t k) { return static_cast<std::int32_t*>(o[k]); }
std::int64_t* s64(void* const* o, std::size_t k) { return static_cast<std::int64_t*>(o[k]); }
float* f32(void* const* o, std::size_t k) { return static_cast<float*>(o[k]); }

RowRange rows_of(const InstrDesc& d, std::uint32_t s) { return slice_rows(d, s); }
RowRange cols_of(const InstrDesc& d, std::uint32_t s, std::int64_t n) { return slice_cols(d, s, n); }
const float* table(void* const* o, std::size_t k) { return static_cast<const float*>(o[k]); }  // generated fp32, or null

MetRopeShape rope_shape(const InstrDesc& d, std::size_t heads_at, float theta) {
  return MetRopeShape{i32(d, heads_at), i32(d, heads_at + 1), i32(d, heads_at + 2), i32(d, heads_at + 3), theta};
}
// ints [.., heads, kv_heads, head_dim, v_head_dim, window, ..] from heads_at; imms [softcap, scale].
MetAttnShape attn_shape(const InstrDesc& d, std::size_t heads_at) {
  return MetAttnShape{i32(d, heads_at), i32(d, heads_at + 1), i32(d, heads_at + 2), i32(d, heads_at + 3),
                      i32(d, heads_at + 4), fv(d, 0), fv(d, 1)};
}

// ---- bodies ----
void cpu_embed(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 1);
  met_embed(s32(o, 0) + iv(d, 1) + r.begin, w, r.end - r.begin, bf(o, 2) + r.begin * w->cols);
}

void cpu_qkv_rope(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 2);
  const MetRopeShape sh = rope_shape(d, 2, fv(d, 1));
  const std::int64_t qw = static_cast<std::int64_t>(sh.heads) * sh.head_dim;
  const auto u = cols_of(d, s, sh.heads + 2 * sh.kv_heads);
  met_gemv_rmsnorm_qkv_rope(bf(o, 0) + (iv(d, 1) + r.begin) * w->cols, vec(o, 1), fv(d, 0), w, s32(o, 3) + r.begin,
                            s64(o, 4) + r.begin, r.end - r.begin, &sh, table(o, 8), bf(o, 5) + r.begin * qw, bf(o, 6),
                            bf(o, 7), u.begin, u.end);
}

void cpu_qkv_qknorm_rope(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 2);
  const MetRopeShape sh = rope_shape(d, 2, fv(d, 1));
  const std::int64_t qw = static_cast<std::int64_t>(sh.heads) * sh.head_dim;
  const auto u = cols_of(d, s, sh.heads + 2 * sh.kv_heads);
  met_gemv_rmsnorm_qkv_qknorm_rope(bf(o, 0) + (iv(d, 1) + r.begin) * w->cols, vec(o, 1), fv(d, 0), w, vec(o, 3),
                                   vec(o, 4), s32(o, 5) + r.begin, s64(o, 6) + r.begin, r.end - r.begin, &sh,
                                   table(o, 10), bf(o, 7) + r.begin * qw, bf(o, 8), bf(o, 9), u.begin, u.end);
}

// One row at a time so q may be a strided view (the q columns of a qkv buffer).
void cpu_attn_decode_split(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const MetAttnShape sh = attn_shape(d, 1);
  const std::int32_t splits = i32(d, 6);
  const std::int64_t per_row = static_cast<std::int64_t>(sh.heads) * splits;
  const auto part = cols_of(d, s, splits);
  for (std::int64_t row = r.begin; row < r.end; ++row)
    met_attn_decode_split(bf(o, 0) + row * iv(d, 7), bf(o, 1), bf(o, 2), s64(o, 3) + row, s32(o, 4) + row, 1, &sh,
                          splits, static_cast<std::int32_t>(part.begin), static_cast<std::int32_t>(part.end),
                          f32(o, 5) + row * per_row * sh.v_head_dim, f32(o, 6) + row * per_row * 2);
}

void cpu_attn_decode_merge(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const MetAttnShape sh = attn_shape(d, 1);
  const std::int32_t splits = i32(d, 6);
  const std::int64_t per_row = static_cast<std::int64_t>(sh.heads) * splits;
  const auto h = cols_of(d, s, sh.heads);
  met_attn_decode_merge(f32(o, 0) + r.begin * per_row * sh.v_head_dim, f32(o, 1) + r.begin * per_row * 2, bf(o, 2),
                        r.end - r.begin, &sh, splits, static_cast<std::int32_t>(h.begin), static_cast<std::int32_t>(h.end),
                        bf(o, 3) + r.begin * static_cast<std::int64_t>(sh.heads) * sh.v_head_dim);
}

// Row by row: each row reads its own (sequence base, position), so padding rows may point anywhere
// harmless and one slice may hold rows of different chunks.
void cpu_attn_prefill(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const MetAttnShape sh = attn_shape(d, 1);
  const std::int64_t out_w = static_cast<std::int64_t>(sh.heads) * sh.v_head_dim;
  const auto h = cols_of(d, s, sh.heads);
  for (std::int64_t row = r.begin; row < r.end; ++row)
    met_attn_prefill(bf(o, 0) + row * iv(d, 6), bf(o, 1), bf(o, 2), s64(o, 4)[row], s32(o, 3)[row], 1, &sh,
                     static_cast<std::int32_t>(h.begin), static_cast<std::int32_t>(h.end), bf(o, 5), bf(o, 6) + row * out_w);
}

// The weight-bound bodies below take the slice's output column range (cols_of) as well as its rows.
void cpu_gemv_o_residual(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 1);
  const auto c = cols_of(d, s, w->rows);
  met_gemv_o_residual(bf(o, 0) + (iv(d, 1) + r.begin) * w->cols, w, bf(o, 2) + r.begin * w->rows, r.end - r.begin,
                      c.begin, c.end);
}

void cpu_gate_up_silu(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 2);
  const auto c = cols_of(d, s, w->rows / 2);
  met_gemv_rmsnorm_gate_up_silu(bf(o, 0) + (iv(d, 1) + r.begin) * w->cols, vec(o, 1), fv(d, 0), w,
                                bf(o, 3) + r.begin * (w->rows / 2), r.end - r.begin, c.begin, c.end);
}

void cpu_gate_up_gelu(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 2);
  const auto c = cols_of(d, s, w->rows / 2);
  met_gemv_rmsnorm_gate_up_gelu(bf(o, 0) + (iv(d, 1) + r.begin) * w->cols, vec(o, 1), fv(d, 0), w,
                                bf(o, 3) + r.begin * (w->rows / 2), r.end - r.begin, c.begin, c.end);
}

void cpu_gemv_down_residual(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 1);
  const auto c = cols_of(d, s, w->rows);
  met_gemv_down_residual(bf(o, 0) + (iv(d, 1) + r.begin) * w->cols, w, bf(o, 2) + r.begin * w->rows, r.end - r.begin,
                         c.begin, c.end);
}

void cpu_lm_head_argmax(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 2);
  const auto c = cols_of(d, s, w->rows);
  u16* logits = o[3] ? bf(o, 3) + r.begin * w->rows : nullptr;
  std::int32_t* tokens = o[4] ? s32(o, 4) + r.begin : nullptr;
  met_gemv_rmsnorm_lm_head_argmax(bf(o, 0) + (iv(d, 1) + r.begin) * w->cols, vec(o, 1), fv(d, 0), w, logits, tokens,
                                  r.end - r.begin, c.begin, c.end);
}

void cpu_lm_head_softcap_argmax(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 2);
  const auto c = cols_of(d, s, w->rows);
  u16* logits = o[3] ? bf(o, 3) + r.begin * w->rows : nullptr;
  std::int32_t* tokens = o[4] ? s32(o, 4) + r.begin : nullptr;
  met_gemv_rmsnorm_lm_head_softcap_argmax(bf(o, 0) + (iv(d, 1) + r.begin) * w->cols, vec(o, 1), fv(d, 0), w, fv(d, 1),
                                          logits, tokens, r.end - r.begin, c.begin, c.end);
}

void cpu_gemv(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 1);
  const auto c = cols_of(d, s, w->rows);
  met_gemv(bf(o, 0) + (iv(d, 1) + r.begin) * w->cols, w, bf(o, 2) + r.begin * w->rows, r.end - r.begin, c.begin, c.end);
}

void cpu_gemm(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 1);
  const auto c = cols_of(d, s, w->rows);
  met_gemm(bf(o, 0) + (iv(d, 1) + r.begin) * w->cols, w, bf(o, 2) + r.begin * w->rows, r.end - r.begin, c.begin, c.end);
}

// ints [rows, in_row0, count, dim, x_stride, x_col0, y_stride, y_col0]: normalises `count` vectors
// of `dim` starting at column x_col0 of each row (q/k norms read the q or k columns of a qkv row).
void cpu_rmsnorm(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  for (std::int64_t row = r.begin; row < r.end; ++row)
    met_rmsnorm(bf(o, 0) + (iv(d, 1) + row) * iv(d, 4) + iv(d, 5), vec(o, 1), bf(o, 2) + row * iv(d, 6) + iv(d, 7),
                /*rows=*/1, iv(d, 2), iv(d, 3), fv(d, 0));
}

// ints [rows, stride, heads, kv_heads, head_dim, rotary_dim, k_col0]: q at column 0, k at k_col0.
void cpu_rope(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const MetRopeShape sh = rope_shape(d, 2, fv(d, 0));
  u16* base = bf(o, 0) + r.begin * iv(d, 1);
  met_rope(base, iv(d, 1), base + iv(d, 6), iv(d, 1), s32(o, 1) + r.begin, r.end - r.begin, &sh, table(o, 2));
}

// ints [rows, stride, k_col0, v_col0, kv_heads, head_dim, v_head_dim].
void cpu_kv_append(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const u16* base = bf(o, 0) + r.begin * iv(d, 1);
  met_kv_append(base + iv(d, 2), iv(d, 1), base + iv(d, 3), iv(d, 1), bf(o, 2), bf(o, 3), s64(o, 1) + r.begin,
                r.end - r.begin, i32(d, 4), i32(d, 5), i32(d, 6));
}

void cpu_residual_add(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  met_residual_add(bf(o, 0) + r.begin * iv(d, 1), bf(o, 1) + r.begin * iv(d, 1), (r.end - r.begin) * iv(d, 1));
}

void cpu_silu_mul(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  met_silu_mul(bf(o, 0) + r.begin * 2 * iv(d, 1), bf(o, 1) + r.begin * iv(d, 1), r.end - r.begin, iv(d, 1));
}

void cpu_gelu_mul(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  met_gelu_mul(bf(o, 0) + r.begin * 2 * iv(d, 1), bf(o, 1) + r.begin * iv(d, 1), r.end - r.begin, iv(d, 1));
}

void cpu_scale(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  met_scale(bf(o, 0) + r.begin * iv(d, 1), (r.end - r.begin) * iv(d, 1), fv(d, 0));
}

void cpu_softcap(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  met_softcap(bf(o, 0) + r.begin * iv(d, 1), (r.end - r.begin) * iv(d, 1), fv(d, 0));
}

void cpu_argmax(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  met_argmax(bf(o, 0) + (iv(d, 1) + r.begin) * iv(d, 2), s32(o, 1) + r.begin, r.end - r.begin, iv(d, 2));
}

void cpu_sample(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  met_sample(bf(o, 0) + (iv(d, 1) + r.begin) * iv(d, 2), f32(o, 1) + r.begin * 4, s32(o, 2) + r.begin, r.end - r.begin, iv(d, 2));
}

void cpu_moe_router_topk(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 1);
  met_moe_router_topk(bf(o, 0) + r.begin * w->cols, w, r.end - r.begin, i32(d, 1), i32(d, 2),
                      s32(o, 2) + r.begin * iv(d, 1), f32(o, 3) + r.begin * iv(d, 1));
}

void cpu_moe_gate_up_silu(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 1);
  met_moe_gate_up_silu(bf(o, 0) + r.begin * w->cols, w, s32(o, 2) + r.begin * iv(d, 1), r.end - r.begin, i32(d, 1),
                       i32(d, 2), bf(o, 3) + r.begin * iv(d, 1) * iv(d, 2));
}

void cpu_moe_down(const InstrDesc& d, std::uint32_t s, void* const* o) {
  const auto r = rows_of(d, s);
  const auto* w = wt(o, 1);
  met_moe_down(bf(o, 0) + r.begin * iv(d, 1) * w->cols, w, s32(o, 2) + r.begin * iv(d, 1),
               f32(o, 3) + r.begin * iv(d, 1), r.end - r.begin, i32(d, 1), i32(d, 2), bf(o, 4) + r.begin * iv(d, 2));
}

// ---- rows ----
constexpr Span R = Span::rows;
constexpr Span W = Span::whole;
constexpr Span C = Span::cols;

const std::vector<std::string> kRowInts = {"rows", "in_row0"};
const std::vector<std::string> kColInts = {"rows", "in_row0", "col_slices"};

Row gemm_like(const char* name) {
  return {name, "gemm", {{"x", false, R}, {"w", false, W}, {"y", true, C}}, kColInts, {}, cpu_gemm};
}
Row prefill_like(const char* name) {
  return {name,
          "attention_prefill",
          {{"q", false, R}, {"k_cache", false, W}, {"v_cache", false, W}, {"positions", false, R},
           {"seq_base", false, R}, {"sinks", false, W}, {"out", true, Span::out_heads}},
          {"rows", "heads", "kv_heads", "head_dim", "v_head_dim", "window", "q_stride", "col_slices"},
          {"softcap", "scale"},
          cpu_attn_prefill};
}

std::vector<Row> rows_table() {
  const std::vector<std::string> qkv_ints = {"rows", "in_row0", "heads", "kv_heads", "head_dim", "rotary_dim", "seq_slots",
                                             "col_slices"};
  const std::vector<std::string> attn_ints = {"rows", "heads", "kv_heads", "head_dim", "v_head_dim", "window", "splits",
                                              "q_stride", "col_slices"};
  return {
      {"embed", "memory", {{"tokens", false, R}, {"table", false, W}, {"out", true, R}}, kRowInts, {}, cpu_embed},
      {"gemv_rmsnorm_qkv_rope", "gemv",
       {{"x", false, R}, {"norm_w", false, W}, {"w_qkv", false, W}, {"positions", false, R}, {"slots", false, R},
        {"q_out", true, Span::q_heads}, {"k_cache", true, Span::k_heads}, {"v_cache", true, Span::v_heads},
        {"inv_freq", false, W}},
       qkv_ints, {"eps", "theta"}, cpu_qkv_rope},
      {"gemv_rmsnorm_qkv_qknorm_rope", "gemv",
       {{"x", false, R}, {"norm_w", false, W}, {"w_qkv", false, W}, {"q_norm_w", false, W}, {"k_norm_w", false, W},
        {"positions", false, R}, {"slots", false, R}, {"q_out", true, Span::q_heads}, {"k_cache", true, Span::k_heads},
        {"v_cache", true, Span::v_heads}, {"inv_freq", false, W}},
       qkv_ints, {"eps", "theta"}, cpu_qkv_qknorm_rope},
      {"attn_decode_split", "attention_decode",
       {{"q", false, R}, {"k_cache", false, W}, {"v_cache", false, W}, {"seq_base", false, R}, {"seq_len", false, R},
        {"part_o", true, Span::splits}, {"part_ml", true, Span::splits}},
       attn_ints, {"softcap", "scale"}, cpu_attn_decode_split},
      {"attn_decode_merge", "attention_decode",
       {{"part_o", false, R}, {"part_ml", false, R}, {"sinks", false, W}, {"out", true, Span::out_heads}},
       {"rows", "heads", "kv_heads", "head_dim", "v_head_dim", "window", "splits", "col_slices"}, {"softcap", "scale"},
       cpu_attn_decode_merge},
      prefill_like("attn_prefill"),
      {"gemv_o_residual", "gemv", {{"attn", false, R}, {"w_o", false, W}, {"x", true, C}}, kColInts, {},
       cpu_gemv_o_residual},
      {"gemv_rmsnorm_gate_up_silu", "gemv",
       {{"x", false, R}, {"norm_w", false, W}, {"w_gate_up", false, W}, {"out", true, C}}, kColInts, {"eps"},
       cpu_gate_up_silu},
      {"gemv_rmsnorm_gate_up_gelu", "gemv",
       {{"x", false, R}, {"norm_w", false, W}, {"w_gate_up", false, W}, {"out", true, C}}, kColInts, {"eps"},
       cpu_gate_up_gelu},
      {"gemv_down_residual", "gemv", {{"h", false, R}, {"w_down", false, W}, {"x", true, C}}, kColInts, {},
       cpu_gemv_down_residual},
      // tokens is absent when the lm_head is split by columns: a met_argmax over the logits follows.
      {"gemv_rmsnorm_lm_head_argmax", "gemv",
       {{"x", false, R}, {"norm_w", false, W}, {"w_lm_head", false, W}, {"logits", true, C},
        {"tokens", true, R, /*optional=*/true}},
       kColInts, {"eps"}, cpu_lm_head_argmax},
      {"gemv_rmsnorm_lm_head_softcap_argmax", "gemv",
       {{"x", false, R}, {"norm_w", false, W}, {"w_lm_head", false, W}, {"logits", true, C},
        {"tokens", true, R, /*optional=*/true}},
       kColInts, {"eps", "cap"}, cpu_lm_head_softcap_argmax},
      {"gemv", "gemv", {{"x", false, R}, {"w", false, W}, {"y", true, C}}, kColInts, {}, cpu_gemv},
      gemm_like("gemm"),
      {"rmsnorm", "elementwise", {{"x", false, R}, {"w", false, W}, {"y", true, R}},
       {"rows", "in_row0", "count", "dim", "x_stride", "x_col0", "y_stride", "y_col0"}, {"eps"}, cpu_rmsnorm},
      {"rope", "elementwise", {{"qkv", true, R}, {"positions", false, R}, {"inv_freq", false, W}},
       {"rows", "stride", "heads", "kv_heads", "head_dim", "rotary_dim", "k_col0"}, {"theta"}, cpu_rope},
      {"kv_append", "memory", {{"qkv", false, R}, {"slots", false, R}, {"k_cache", true, Span::by_slot}, {"v_cache", true, Span::by_slot}},
       {"rows", "stride", "k_col0", "v_col0", "kv_heads", "head_dim", "v_head_dim"}, {}, cpu_kv_append},
      {"residual_add", "elementwise", {{"x", true, R}, {"y", false, R}}, {"rows", "width"}, {}, cpu_residual_add},
      {"silu_mul", "elementwise", {{"gate_up", false, R}, {"out", true, R}}, {"rows", "dim"}, {}, cpu_silu_mul},
      {"gelu_mul", "elementwise", {{"gate_up", false, R}, {"out", true, R}}, {"rows", "dim"}, {}, cpu_gelu_mul},
      {"scale", "elementwise", {{"x", true, R}}, {"rows", "width"}, {"scale"}, cpu_scale},
      {"softcap", "elementwise", {{"x", true, R}}, {"rows", "width"}, {"cap"}, cpu_softcap},
      {"argmax", "memory", {{"logits", false, R}, {"tokens", true, R}}, {"rows", "in_row0", "vocab"}, {}, cpu_argmax},
      {"moe_router_topk", "gemv", {{"x", false, R}, {"w_router", false, W}, {"ids", true, R}, {"weights", true, R}},
       {"rows", "top_k", "renormalize"}, {}, cpu_moe_router_topk},
      {"moe_gate_up_silu", "moe_gemv", {{"x", false, R}, {"w_gate_up", false, W}, {"ids", false, R}, {"h", true, R}},
       {"rows", "top_k", "inter"}, {}, cpu_moe_gate_up_silu},
      {"moe_down", "moe_gemv",
       {{"h", false, R}, {"w_down", false, W}, {"ids", false, R}, {"weights", false, R}, {"y", true, R}},
       {"rows", "top_k", "hidden"}, {}, cpu_moe_down},
      // GPU-class kernels: the same operands as their cpu counterparts; on the cpu backend (the
      // oracle for these packets) they run the counterpart's body.
      gemm_like("gemm_bf16_mma"),
      gemm_like("gemm_bf16_wgmma"),
      gemm_like("gemm_fp8_wgmma"),
      gemm_like("gemm_bf16_tcgen05"),
      gemm_like("gemm_fp8_tcgen05"),
      gemm_like("gemm_nvfp4_tcgen05"),
      gemm_like("gemm_fp8_mma_sm120"),
      gemm_like("gemm_bf16_mfma"),
      prefill_like("flash_prefill_mma"),
      prefill_like("flash_prefill_wgmma"),
      // Appended by emit after the head (no plan group of its own): temperature / top-k / top-p
      // sampling of the rows whose params ask for it (kernels/cpu/sample.hpp).
      {"sample", "memory", {{"logits", false, R}, {"params", false, R}, {"tokens", true, R}}, {"rows", "in_row0", "vocab"}, {},
       cpu_sample},
  };
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
        o.tensors.push_back({op.name, op.write, op.optional, op.span == Span::by_slot});
        if (op.span == Span::cols && o.cols_operand < 0) o.cols_operand = static_cast<int>(k);
      }
      o.ints = r.ints;
      o.imms = r.imms;
      o.family = r.family;
      o.extent = extent_of;
      o.cpu = r.cpu;
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
    const std::int64_t heads = iv(d, 2), kvh = iv(d, 3), hd = iv(d, 4);
    const RowRange units = slice_cols(d, slice, heads + 2 * kvh);
    const std::int64_t lo = span == Span::q_heads ? 0 : span == Span::k_heads ? heads : heads + kvh;
    const std::int64_t n = span == Span::q_heads ? heads : kvh;
    const std::int64_t h0 = std::clamp(units.begin - lo, std::int64_t{0}, n), h1 = std::clamp(units.end - lo, std::int64_t{0}, n);
    if (h0 >= h1) return {};
    const std::uint64_t head_bytes = U(hd) * dtype_bytes(t.dtype);
    if (span == Span::q_heads)
      return strided_extent(U(rr.begin) * U(heads) * head_bytes + U(h0) * head_bytes, U(h1 - h0) * head_bytes,
                            U(heads) * head_bytes, U(rr.end - rr.begin));
    const std::int64_t per_seq = iv(d, 6);
    const std::uint64_t slot_bytes = t.bytes / t.shape[0];
    if (per_seq <= 0) return {0, t.bytes};
    return strided_extent(U(rr.begin * per_seq) * slot_bytes + U(h0) * head_bytes, U(h1 - h0) * head_bytes, slot_bytes,
                          U((rr.end - rr.begin) * per_seq));
  }
  if (span == Span::out_heads && t.shape.size() == 2) {
    const std::int64_t heads = iv(d, 1);
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

RowRange slice_rows(const InstrDesc& instr, std::uint32_t slice) {
  const std::int64_t rows = instr.ints.empty() ? 0 : instr.ints[0];
  const std::int64_t cols = col_parts(instr);
  const std::int64_t n = std::max<std::int64_t>(1, instr.slices / cols);
  const std::int64_t part = slice / cols;
  return {std::min(rows, part * rows / n), std::min(rows, (part + 1) * rows / n)};
}

RowRange slice_cols(const InstrDesc& instr, std::uint32_t slice, std::int64_t n) {
  const std::int64_t cols = col_parts(instr);
  const std::int64_t part = slice % cols;
  return {part * n / cols, (part + 1) * n / cols};
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
