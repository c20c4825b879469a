// The emitter: for each program, the Plan at that mode and row count becomes instructions (one per
// kernel of each group's rule, layers in model order), tensors (weights from the manifest, scratch,
// KV, IO), per-stream slice entries and counter waits. Dataflow between groups goes through named
// per-program buffers fixed by the op and role of the nodes (xn, qkv, q, attn, y, gu, h).
#include "emit/emit.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "../../kernels/common/interp/smem.h"
#include "emit/opcodes.hpp"

#ifndef MET_VERSION_STRING
#define MET_VERSION_STRING "0.0.0"
#endif

namespace met::emit {

const char* io_field_name(IoField f) {
  switch (f) {
    case IoField::tokens: return "tokens";
    case IoField::positions: return "positions";
    case IoField::slots: return "slots";
    case IoField::seq_base: return "seq_base";
    case IoField::seq_len: return "seq_len";
    case IoField::out_tokens: return "out_tokens";
    case IoField::logits: return "logits";
    case IoField::sample_params: return "sample_params";
    case IoField::sampled_tokens: return "sampled_tokens";
  }
  return "?";
}

namespace {

constexpr std::uint64_t kArenaAlign = 64;     // bytes: one cache line per scratch buffer
constexpr std::int64_t kKeysPerSplit = 512;   // decode attention: one split per this many keys of context
constexpr std::int64_t kMaxSplits = 16;
constexpr std::int64_t kMinKeysPerGpuSplit = 32;  // GPU decode: at most one split per this many keys of context
// GPU slicing: a weight-bound op over at most this many rows keeps every row in each slice (the
// weights are read once) and splits output columns across the streams; a GEMM over more rows is
// cut into tiles of kGemmTile x kGemmTile outputs.
// Both are the GPU bodies' limits (kernels/common/interp: abi.h, smem.h).
constexpr std::int64_t kGpuGemvRows = MET_DEV_MAX_ROWS;
constexpr std::int64_t kGemmTile = MET_GEMM_TILE;
constexpr std::uint32_t kDefaultCpuThreads = 4;

std::uint64_t dtype_bytes(std::uint32_t dtype) {
  switch (dtype) {
    case MET_DTYPE_BF16:
    case MET_DTYPE_F16: return 2;
    case MET_DTYPE_F32:
    case MET_DTYPE_I32: return 4;
    case MET_DTYPE_I64: return 8;
    default: return 1;
  }
}

std::int64_t param(const model::Node& n, const char* key) {
  auto it = n.params.find(key);
  return it == n.params.end() ? 0 : static_cast<std::int64_t>(std::llround(it->second));
}

// "model.layers.0.mlp" -> "model.layers.7.mlp" (first layer of the kind -> layer L).
std::string for_layer(const std::string& name, int first, int layer) {
  const std::string from = "." + std::to_string(first) + ".";
  const auto at = name.find(from);
  if (at == std::string::npos || first == layer) return name;
  return name.substr(0, at) + "." + std::to_string(layer) + "." + name.substr(at + from.size());
}

struct Config {
  float eps = 1e-6f;
  float theta = 10000.0f;
  RopeConfig rope;
};

Expected<Config> read_config(const std::string& text) {
  Config c;
  if (text.empty()) return c;
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return fail("config.json: not a json object");
  if (j.contains("rms_norm_eps") && j["rms_norm_eps"].is_number()) c.eps = j["rms_norm_eps"].get<float>();
  MET_TRY(c.rope, parse_rope(text, "config.json"));
  c.theta = static_cast<float>(c.rope.theta);
  return c;
}

// Shapes of the scaling blocks: the keys each type needs (all numbers); "rope_type"/"type" name it.
struct ScalingKeys {
  const char* type;
  std::vector<const char*> keys;
};
const ScalingKeys kScalingTypes[] = {
    {"default", {}},
    {"linear", {"factor"}},
    {"llama3", {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}},
};

// Shared across programs: weights (one tensor per manifest entry), the KV caches and the generated
// tables (one rope inv_freq per rotary_dim, when the rope is scaled).
struct Shared {
  PacketFile* file = nullptr;
  WeightsManifest* manifest = nullptr;
  const CheckpointLayout* layout = nullptr;
  std::string display;
  std::map<std::string, std::uint32_t> weight_handle;  // entry name -> tensor handle
  std::map<int, std::pair<std::uint32_t, std::uint32_t>> kv;  // layer -> (k, v)
  std::map<std::int64_t, std::uint32_t> inv_freq;             // rotary_dim -> generated table
  std::int64_t kv_slots = 0;
};

std::uint32_t add_tensor(PacketFile& f, TensorDesc t) {
  f.tensors.push_back(std::move(t));
  return static_cast<std::uint32_t>(f.tensors.size() - 1);
}

// The inv_freq table the rope bodies read, or MET_NO_TENSOR for a plain (theta-based) rope.
std::uint32_t inv_freq_table(Shared& sh, const RopeConfig& rope, std::int64_t rotary_dim) {
  if (!rope.scaled() || rotary_dim < 2) return MET_NO_TENSOR;
  if (auto it = sh.inv_freq.find(rotary_dim); it != sh.inv_freq.end()) return it->second;
  TensorDesc t;
  t.name = "rope.inv_freq.r" + std::to_string(rotary_dim);
  t.dtype = MET_DTYPE_F32;
  t.shape = {static_cast<std::uint64_t>(rotary_dim / 2)};
  t.bytes = 4 * t.shape[0];
  t.source = MET_SOURCE_GENERATED;
  t.ref = static_cast<std::uint64_t>(GeneratedTable::rope_inv_freq);
  const auto h = add_tensor(*sh.file, std::move(t));
  sh.inv_freq[rotary_dim] = h;
  return h;
}

Expected<std::uint32_t> weight(Shared& sh, const model::Node& node, int first_layer, int layer) {
  std::vector<std::string> names;
  for (const auto& w : node.weights) names.push_back(node.tied ? w : for_layer(w, first_layer, layer));
  if (names.empty()) return fail("node '" + node.op + (node.role.empty() ? "" : ":" + node.role) + "' (" + node.where + ") has no weight");
  const std::string entry = entry_name(names, node.role);
  if (auto it = sh.weight_handle.find(entry); it != sh.weight_handle.end()) return it->second;
  MET_TRY(WeightEntry e, make_entry(entry, names, *sh.layout, sh.display));
  TensorDesc t;
  t.name = e.name;
  if (e.dtype == "bf16") t.dtype = MET_DTYPE_BF16;
  else if (e.dtype == "f16") t.dtype = MET_DTYPE_F16;
  else if (e.dtype == "f32") t.dtype = MET_DTYPE_F32;
  else if (e.dtype == "fp8-e4m3") t.dtype = MET_DTYPE_FP8_E4M3;
  else return fail(sh.display + ": tensor '" + entry + "': format '" + e.dtype + "' has no packet dtype");
  t.shape = e.shape;
  for (const auto& p : e.parts) t.bytes += p.bytes;
  for (const auto& p : e.scale_parts) t.bytes += p.bytes;
  t.source = MET_SOURCE_CHECKPOINT;
  t.ref = sh.manifest->tensors.size();
  sh.manifest->tensors.push_back(std::move(e));
  const auto h = add_tensor(*sh.file, std::move(t));
  sh.weight_handle[entry] = h;
  return h;
}

// One program under construction.
struct Builder {
  Shared* sh = nullptr;
  ProgramDesc prog;
  std::int64_t rows = 1;
  std::uint64_t arena = 0;
  std::map<std::string, std::uint32_t> bufs;
  Config cfg;
  std::int64_t max_ctx = 0;
  std::int64_t splits = 1;
  std::uint32_t q_src = MET_NO_TENSOR;  // where attention reads q: the fused q buffer or the qkv buffer
  std::int64_t q_stride = 0;            // elements between rows of q_src
  std::int64_t q_width = 0;             // q columns of a qkv row (k starts there)

  std::uint32_t buffer(const std::string& name, std::uint32_t dtype, std::vector<std::uint64_t> shape,
                       std::uint32_t source = MET_SOURCE_SCRATCH, std::uint64_t ref = 0) {
    if (auto it = bufs.find(name); it != bufs.end()) return it->second;
    TensorDesc t;
    t.name = prog.name + "." + name;
    t.dtype = dtype;
    t.bytes = dtype_bytes(dtype);
    for (auto d : shape) t.bytes *= d;
    t.shape = std::move(shape);
    t.source = source;
    if (source == MET_SOURCE_SCRATCH) {
      t.ref = arena;
      arena += (t.bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
    } else {
      t.ref = ref;
    }
    const auto h = add_tensor(*sh->file, std::move(t));
    bufs[name] = h;
    return h;
  }
  std::uint32_t act(const std::string& name, std::int64_t r, std::int64_t width) {
    return buffer(name, MET_DTYPE_BF16, {static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(width)});
  }
  std::uint32_t io(IoField f, std::int64_t r, std::int64_t width = 0) {
    const bool wide = f == IoField::logits || f == IoField::sample_params;
    const std::uint32_t dt = f == IoField::slots || f == IoField::seq_base ? MET_DTYPE_I64
                             : f == IoField::logits                       ? MET_DTYPE_BF16
                             : f == IoField::sample_params                ? MET_DTYPE_F32
                                                                          : MET_DTYPE_I32;
    std::vector<std::uint64_t> shape{static_cast<std::uint64_t>(r)};
    if (wide) shape.push_back(static_cast<std::uint64_t>(width));
    return buffer(std::string("io.") + io_field_name(f), dt, shape, MET_SOURCE_IO, static_cast<std::uint64_t>(f));
  }

  Expected<void> add(const std::string& kernel, std::uint32_t group, const std::string& scope,
                     std::vector<std::uint32_t> tensors, std::vector<std::int64_t> ints, std::vector<float> imms) {
    const OpcodeInfo* op = find_opcode(kernel);
    if (!op) return fail("emit: kernel 'met_" + kernel + "' (" + scope + ") is not in the opcode table");
    InstrDesc d;
    d.opcode = op->number;
    d.group = group;
    d.scope = scope;
    d.tensors = std::move(tensors);
    d.ints = std::move(ints);
    d.imms = std::move(imms);
    if (d.tensors.size() != op->tensors.size() || d.ints.size() != op->ints.size() || d.imms.size() != op->imms.size())
      return fail("emit: instruction '" + kernel + "' (" + scope + ") does not match its opcode row");
    prog.instrs.push_back(std::move(d));
    return {};
  }
};

const model::Node* find_node(const planner::Scope& s, const planner::Group& g, const std::string& op,
                             const std::string& role = "") {
  for (int i : g.nodes) {
    const auto& n = s.nodes[static_cast<std::size_t>(i)];
    if (n.op == op && (role.empty() || n.role == role)) return &n;
  }
  return nullptr;
}

// Where the current scope's rows live: layers run `rows` rows; the head may read one row.
struct ScopeCtx {
  const planner::Scope* scope = nullptr;
  const planner::Group* group = nullptr;
  std::uint32_t group_index = 0;
  std::string label;     // "layers:full L3"
  int first_layer = 0;   // of the kind (weight names are the first layer's)
  int layer = 0;
  std::int64_t rows = 1;  // rows of this scope
  std::int64_t x_row0 = 0;  // row of x the scope's first read starts at (prefill head: rows-1)
  bool head = false;
};

Expected<void> emit_group(Builder& b, const ScopeCtx& c, const model::ModelGraph& graph) {
  const auto& s = *c.scope;
  const auto& g = *c.group;
  const std::int64_t R = c.rows;
  const std::int64_t hidden = static_cast<std::int64_t>(graph.params.at("hidden"));
  const std::uint32_t x = b.act("x", b.rows, hidden);
  auto where = [&](const std::string& what) { return fail("emit: " + c.label + " group '" + g.rule + "': " + what); };
  auto W = [&](const model::Node* n) { return weight(*b.sh, *n, c.first_layer, c.layer); };
  const std::string pre = c.head ? "head." : "";
  const std::int64_t x_row0 = c.x_row0;
  for (const auto& kname : g.kernels) {
    const std::string k = kname.rfind("met_", 0) == 0 ? kname.substr(4) : kname;
    const OpcodeInfo* op = find_opcode(k);
    if (!op) return where("kernel '" + kname + "' is not in the opcode table");
    if (k == "embed") {
      const auto* n = find_node(s, g, "embed");
      MET_TRY(auto w, W(n));
      MET_CHECK(b.add(k, c.group_index, c.label, {b.io(IoField::tokens, R), w, x}, {R, 0}, {}));
    } else if (k == "gemv_rmsnorm_qkv_rope" || k == "gemv_rmsnorm_qkv_qknorm_rope") {
      const auto* norm = find_node(s, g, "rmsnorm", "attn_norm");
      const auto* lin = find_node(s, g, "linear", "qkv");
      const auto* rope = find_node(s, g, "rope");
      if (!norm || !lin || !rope) return where("expects rmsnorm:attn_norm, linear:qkv and rope");
      MET_TRY(auto nw, W(norm));
      MET_TRY(auto wq, W(lin));
      const std::int64_t heads = param(*rope, "heads"), hd = param(*rope, "head_dim");
      const auto q = b.act("q", R, heads * hd);
      const auto& kv = b.sh->kv.at(c.layer);
      std::vector<std::uint32_t> t{x, nw, wq};
      if (k == "gemv_rmsnorm_qkv_qknorm_rope") {
        const auto* qn = find_node(s, g, "rmsnorm", "q_norm");
        const auto* kn = find_node(s, g, "rmsnorm", "k_norm");
        if (!qn || !kn) return where("expects rmsnorm:q_norm and rmsnorm:k_norm");
        MET_TRY(auto qw, W(qn));
        MET_TRY(auto kw, W(kn));
        t.push_back(qw);
        t.push_back(kw);
      }
      const std::int64_t rotary = param(*rope, "rotary_dim");
      t.insert(t.end(), {b.io(IoField::positions, R), b.io(IoField::slots, R), q, kv.first, kv.second,
                         inv_freq_table(*b.sh, b.cfg.rope, rotary)});
      MET_CHECK(b.add(k, c.group_index, c.label, t,
                      {R, x_row0, heads, param(*rope, "kv_heads"), hd, rotary, b.max_ctx, /*col_slices=*/1},
                      {b.cfg.eps, b.cfg.theta}));
      b.q_src = q;
      b.q_stride = heads * hd;
    } else if (k == "attn_decode_split" || k == "attn_decode_merge" || op->family == "attention_prefill") {
      const auto* at = find_node(s, g, "attention");
      if (!at) return where("expects attention");
      const std::int64_t heads = param(*at, "heads"), kvh = param(*at, "kv_heads"), hd = param(*at, "head_dim");
      const std::int64_t vhd = param(*at, "v_head_dim") > 0 ? param(*at, "v_head_dim") : hd;
      std::uint32_t sinks = MET_NO_TENSOR;
      if (param(*at, "sinks") != 0) {
        MET_TRY(auto sw, W(at));
        sinks = sw;
      }
      const float softcap = static_cast<float>(at->params.count("softcap") ? at->params.at("softcap") : 0.0);
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      if (b.q_src == MET_NO_TENSOR) return where("attention before any q producer");
      const auto qsrc = b.q_src;
      const std::int64_t qstride = b.q_stride;
      const auto& kv = b.sh->kv.at(c.layer);
      const auto out = b.act("attn", R, heads * vhd);
      const std::uint64_t S = static_cast<std::uint64_t>(b.splits);
      const bool split_state = k == "attn_decode_split" || k == "attn_decode_merge";
      const auto po = split_state ? b.buffer("part_o", MET_DTYPE_F32, {static_cast<std::uint64_t>(R),
                                                                       static_cast<std::uint64_t>(heads), S,
                                                                       static_cast<std::uint64_t>(vhd)})
                                  : MET_NO_TENSOR;
      const auto pml = split_state ? b.buffer("part_ml", MET_DTYPE_F32,
                                              {static_cast<std::uint64_t>(R), static_cast<std::uint64_t>(heads), S, 2})
                                   : MET_NO_TENSOR;
      const std::int64_t window = param(*at, "window");
      if (k == "attn_decode_split") {
        MET_CHECK(b.add(k, c.group_index, c.label,
                        {qsrc, kv.first, kv.second, b.io(IoField::seq_base, R), b.io(IoField::seq_len, R), po, pml},
                        {R, heads, kvh, hd, vhd, window, b.splits, qstride, /*col_slices=*/1}, {softcap, scale}));
      } else if (k == "attn_decode_merge") {
        MET_CHECK(b.add(k, c.group_index, c.label, {po, pml, sinks, out}, {R, heads, kvh, hd, vhd, window, b.splits, /*col_slices=*/1},
                        {softcap, scale}));
      } else {
        MET_CHECK(b.add(k, c.group_index, c.label,
                        {qsrc, kv.first, kv.second, b.io(IoField::positions, R), b.io(IoField::seq_base, R), sinks, out},
                        {R, heads, kvh, hd, vhd, window, qstride, /*col_slices=*/1}, {softcap, scale}));
      }
    } else if (k == "gemv_o_residual" || k == "gemv_down_residual") {
      const bool o = k == "gemv_o_residual";
      const auto* lin = find_node(s, g, "linear", o ? "o" : "down");
      if (!lin) return where(std::string("expects linear:") + (o ? "o" : "down"));
      MET_TRY(auto w, W(lin));
      const auto in = o ? b.act("attn", R, param(*lin, "in")) : b.act("h", R, param(*lin, "in"));
      MET_CHECK(b.add(k, c.group_index, c.label, {in, w, x}, {R, 0, /*col_slices=*/1}, {}));
    } else if (k == "gemv_rmsnorm_gate_up_silu" || k == "gemv_rmsnorm_gate_up_gelu") {
      const auto* norm = find_node(s, g, "rmsnorm");
      const auto* lin = find_node(s, g, "linear", "gate_up");
      if (!norm || !lin) return where("expects rmsnorm and linear:gate_up");
      MET_TRY(auto nw, W(norm));
      MET_TRY(auto w, W(lin));
      MET_CHECK(b.add(k, c.group_index, c.label, {x, nw, w, b.act("h", R, param(*lin, "out") / 2)},
                      {R, x_row0, /*col_slices=*/1}, {b.cfg.eps}));
    } else if (k == "gemv_rmsnorm_lm_head_argmax" || k == "gemv_rmsnorm_lm_head_softcap_argmax") {
      const auto* norm = find_node(s, g, "rmsnorm");
      const auto* lin = find_node(s, g, "linear", "lm_head");
      if (!norm || !lin) return where("expects rmsnorm and linear:lm_head");
      MET_TRY(auto nw, W(norm));
      MET_TRY(auto w, W(lin));
      const std::int64_t vocab = param(*lin, "out");
      std::vector<float> imms{b.cfg.eps};
      if (k == "gemv_rmsnorm_lm_head_softcap_argmax") {
        const auto* sc = find_node(s, g, "softcap");
        imms.push_back(sc ? static_cast<float>(sc->params.count("cap") ? sc->params.at("cap") : 0.0) : 0.0f);
      }
      MET_CHECK(b.add(k, c.group_index, c.label, {x, nw, w, b.io(IoField::logits, R, vocab), b.io(IoField::out_tokens, R)},
                      {R, x_row0, /*col_slices=*/1}, imms));
    } else if (k == "rmsnorm") {
      const auto* n = find_node(s, g, "rmsnorm");
      MET_TRY(auto w, W(n));
      const std::int64_t dim = param(*n, "dim"), count = std::max<std::int64_t>(1, param(*n, "count"));
      if (n->role == "q_norm" || n->role == "k_norm") {
        if (!b.bufs.count("qkv")) return where("q/k norm before the qkv projection");
        const auto qkv = b.bufs.at("qkv");
        const std::int64_t stride = static_cast<std::int64_t>(b.sh->file->tensors[qkv].shape[1]);
        const std::int64_t col0 = n->role == "q_norm" ? 0 : b.q_width;
        MET_CHECK(b.add(k, c.group_index, c.label, {qkv, w, qkv}, {R, 0, count, dim, stride, col0, stride, col0}, {b.cfg.eps}));
      } else {
        const auto y = b.act(pre + "xn", R, dim * count);
        MET_CHECK(b.add(k, c.group_index, c.label, {x, w, y}, {R, x_row0, count, dim, hidden, 0, dim * count, 0}, {b.cfg.eps}));
      }
    } else if (k == "gemv" || op->family == "gemm") {
      const auto* lin = find_node(s, g, "linear");
      if (!lin) return where("expects linear");
      MET_TRY(auto w, W(lin));
      const std::int64_t in = param(*lin, "in"), out_w = param(*lin, "out");
      const std::string& role = lin->role;
      std::uint32_t src = 0, dst = 0;
      if (role == "qkv") {
        src = b.act("xn", R, in);
        dst = b.act("qkv", R, out_w);
        b.q_src = dst;
        b.q_stride = out_w;
        b.q_width = static_cast<std::int64_t>(graph.params.at("heads") * graph.params.at("head_dim"));
      } else if (role == "o") {
        src = b.act("attn", R, in);
        dst = b.act("y", R, out_w);
      } else if (role == "gate_up") {
        src = b.act("xn", R, in);
        dst = b.act("gu", R, out_w);
      } else if (role == "down") {
        src = b.act("h", R, in);
        dst = b.act("y", R, out_w);
      } else if (role == "lm_head") {
        src = b.act(pre + "xn", R, in);
        dst = b.io(IoField::logits, R, out_w);
      } else {
        return where("linear role '" + role + "' has no emitter yet");
      }
      std::vector<std::int64_t> ints{R, 0};
      if (int_index(*op, "col_slices") >= 0) ints.push_back(/*col_slices=*/1);
      MET_CHECK(b.add(k, c.group_index, c.label, {src, w, dst}, ints, {}));
    } else if (k == "rope") {
      const auto* n = find_node(s, g, "rope");
      if (!b.bufs.count("qkv")) return where("rope without a qkv buffer");
      const auto qkv = b.bufs.at("qkv");
      const std::int64_t stride = static_cast<std::int64_t>(b.sh->file->tensors[qkv].shape[1]);
      const std::int64_t heads = param(*n, "heads"), hd = param(*n, "head_dim");
      const std::int64_t rotary = param(*n, "rotary_dim");
      MET_CHECK(b.add(k, c.group_index, c.label, {qkv, b.io(IoField::positions, R), inv_freq_table(*b.sh, b.cfg.rope, rotary)},
                      {R, stride, heads, param(*n, "kv_heads"), hd, rotary, heads * hd}, {b.cfg.theta}));
    } else if (k == "kv_append") {
      const auto* n = find_node(s, g, "kv_append");
      if (!b.bufs.count("qkv")) return where("kv_append without a qkv buffer");
      const auto qkv = b.bufs.at("qkv");
      const std::int64_t stride = static_cast<std::int64_t>(b.sh->file->tensors[qkv].shape[1]);
      const std::int64_t kvh = param(*n, "kv_heads"), hd = param(*n, "head_dim");
      const std::int64_t vhd = param(*n, "v_head_dim") > 0 ? param(*n, "v_head_dim") : hd;
      const std::int64_t kcol = stride - kvh * (hd + vhd);
      const auto& kv = b.sh->kv.at(c.layer);
      MET_CHECK(b.add(k, c.group_index, c.label, {qkv, b.io(IoField::slots, R), kv.first, kv.second},
                      {R, stride, kcol, kcol + kvh * hd, kvh, hd, vhd}, {}));
    } else if (k == "residual_add") {
      MET_CHECK(b.add(k, c.group_index, c.label, {x, b.act("y", R, hidden)}, {R, hidden}, {}));
    } else if (k == "silu_mul" || k == "gelu_mul") {
      const auto* n = find_node(s, g, k);
      const std::int64_t dim = param(*n, "dim");
      MET_CHECK(b.add(k, c.group_index, c.label, {b.act("gu", R, 2 * dim), b.act("h", R, dim)}, {R, dim}, {}));
    } else if (k == "argmax") {
      const auto* n = find_node(s, g, "argmax");
      const std::int64_t vocab = param(*n, "vocab");
      MET_CHECK(b.add(k, c.group_index, c.label, {b.io(IoField::logits, R, vocab), b.io(IoField::out_tokens, R)},
                      {R, 0, vocab}, {}));
    } else if (k == "softcap" && c.head) {
      const auto* n = find_node(s, g, "softcap");
      const std::int64_t vocab = static_cast<std::int64_t>(graph.params.at("vocab"));
      MET_CHECK(b.add(k, c.group_index, c.label, {b.io(IoField::logits, R, vocab)}, {R, vocab},
                      {static_cast<float>(n->params.count("cap") ? n->params.at("cap") : 0.0)}));
    } else {
      return where("kernel '" + kname + "' has no emitter yet");
    }
  }
  return {};
}

// Slices of one instruction are unordered: they may only write disjoint bytes. A by-slot write
// (kv_append's slots in prefill) claims its whole tensor; its slices' rows are disjoint, and the
// host gives each row its own slot (OperandInfo::by_slot), so it does not count here.
bool disjoint_writes(const InstrDesc& d, const PacketFile& f) {
  const OpcodeInfo* op = find_opcode(d.opcode);
  for (std::size_t k = 0; k < d.tensors.size(); ++k) {
    if (!op->tensors[k].write || op->tensors[k].by_slot || d.tensors[k] == MET_NO_TENSOR) continue;
    std::vector<Extent> e;
    for (std::uint32_t s = 0; s < d.slices; ++s) e.push_back(op->extent(d, f, k, s));
    std::sort(e.begin(), e.end(), [](const Extent& x, const Extent& y) { return x.begin < y.begin; });
    for (std::size_t i = 0; i < e.size(); ++i)
      for (std::size_t j = i + 1; j < e.size() && e[j].begin < e[i].end; ++j)
        if (extents_overlap(e[i], e[j])) return false;
  }
  return true;
}

// Slices per instruction: its rows split across the streams. An op with a column split and fewer
// rows than streams splits its output columns as well ("col_slices" parts, never more than there
// are columns), so a 1-row decode keeps every stream busy on the weight-bound ops. The cpu puts one
// row in each row part (ceil(streams / rows) column parts); a GPU keeps every row of a decode
// (<= kGpuGemvRows) in each slice, so its weights are read once, and cuts GEMMs into output tiles.
// The columns of the fused qkv ops are head units; those of split-KV decode attention are splits
// (a GPU runs each row's splits as separate slices). A column-split lm_head cannot pick the row's
// argmax from its part; it leaves its tokens to a met_argmax over the logits right after it.
std::int64_t column_count(const InstrDesc& d, const OpcodeInfo& op, const PacketFile& f) {
  if (op.name == "attn_decode_merge" || op.family == "attention_prefill") return d.ints[1];  // heads
  if (op.cols_operand >= 0) {
    const auto h = d.tensors[static_cast<std::size_t>(op.cols_operand)];
    if (h == MET_NO_TENSOR) return 0;
    const auto& t = f.tensors[h];
    return t.shape.size() >= 2 ? static_cast<std::int64_t>(t.shape[1]) : 1;
  }
  if (int_index(op, "seq_slots") >= 0) return d.ints[2] + 2 * d.ints[3];  // heads + 2 * kv_heads units
  if (const int k = int_index(op, "splits"); k >= 0) return d.ints[static_cast<std::size_t>(k)];
  return 0;
}

void slice_program(ProgramDesc& p, const PacketFile& f, std::uint32_t sm, bool gpu) {
  std::vector<InstrDesc> out;
  out.reserve(p.instrs.size());
  for (auto& d : p.instrs) {
    const OpcodeInfo* op = find_opcode(d.opcode);
    const std::int64_t rows = d.ints.empty() ? 1 : d.ints[0];
    const auto row_slices = static_cast<std::uint32_t>(std::clamp<std::int64_t>(rows, 1, sm));
    const int ck = int_index(*op, "col_slices");
    const std::int64_t n = ck >= 0 ? column_count(d, *op, f) : 0;
    std::int64_t parts = 1, row_parts = row_slices;
    if (n > 0 && rows >= 1) {
      if (gpu && op->family == "gemm" && rows > kGpuGemvRows) {
        row_parts = (rows + kGemmTile - 1) / kGemmTile;
        parts = (n + kGemmTile - 1) / kGemmTile;
      } else if (gpu && op->family == "attention_prefill") {
        // Slices of rows x heads, placed round-robin: each stream gets early (short) and late
        // (long) causal rows alike.
        row_parts = (rows + MET_FLASH_SLICE_ROWS - 1) / MET_FLASH_SLICE_ROWS;
        parts = (n + MET_FLASH_SLICE_HEADS - 1) / MET_FLASH_SLICE_HEADS;
      } else if (gpu && int_index(*op, "splits") >= 0) {
        row_parts = rows;  // one row and one split (merge: one head) per slice
        parts = n;
      } else if (gpu && rows <= kGpuGemvRows) {
        row_parts = 1;
        parts = std::min<std::int64_t>(sm, n);
      } else if (rows < sm) {
        row_parts = rows;
        parts = std::min<std::int64_t>((sm + rows - 1) / rows, n);
      }
    }
    const int tk = tensor_index(*op, "tokens");
    std::uint32_t tokens = MET_NO_TENSOR;
    if (parts > 1 || row_parts != row_slices) {
      d.ints[static_cast<std::size_t>(ck)] = parts;
      d.slices = static_cast<std::uint32_t>(row_parts * parts);
      if (tk >= 0 && parts > 1) std::swap(tokens, d.tensors[static_cast<std::size_t>(tk)]);
      if (!disjoint_writes(d, f)) {  // the column split is only taken when its writes are disjoint
        d.ints[static_cast<std::size_t>(ck)] = 1;
        if (tokens != MET_NO_TENSOR) std::swap(tokens, d.tensors[static_cast<std::size_t>(tk)]);
        parts = 1;
        row_parts = row_slices;
      }
    }
    if (parts == 1 && row_parts == row_slices) {
      d.slices = row_slices;
      if (!disjoint_writes(d, f)) d.slices = 1;
    }
    out.push_back(d);
    if (tokens != MET_NO_TENSOR) {
      const auto logits = d.tensors[static_cast<std::size_t>(tensor_index(*op, "logits"))];
      InstrDesc am;
      am.opcode = find_opcode("argmax")->number;
      am.group = d.group;
      am.scope = d.scope;
      am.tensors = {logits, tokens};
      am.ints = {rows, /*in_row0=*/0, static_cast<std::int64_t>(f.tensors[logits].shape[1])};
      am.slices = row_slices;
      out.push_back(std::move(am));
    }
  }
  p.instrs = std::move(out);
}

// Instruction i waits on every earlier j it conflicts with (RAW, WAR, WAW by tensor handle), minus
// the waits another kept wait already implies.
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
  for (std::size_t i = 0; i < n; ++i)
    for (std::uint32_t s = 0; s < p.instrs[i].slices; ++s)
      p.streams[next++ % sm_count].push_back({static_cast<std::uint32_t>(i), s, waits[i]});
}

}  // namespace

std::vector<std::string> plan_group_rules(const planner::Plan& plan, const model::ModelGraph& graph) {
  std::vector<std::string> out;
  auto scope_rules = [&](const planner::Scope& s) {
    for (const auto& g : s.groups) out.push_back(g.gap ? "gap" : g.rule);
  };
  const std::size_t first_kind = graph.pre.empty() ? 0 : 1;
  if (!graph.pre.empty()) scope_rules(plan.scopes.front());
  for (std::size_t l = 0; l < graph.layer_kinds.size(); ++l)
    scope_rules(plan.scopes[first_kind + static_cast<std::size_t>(graph.layer_kinds[l])]);
  if (!graph.post.empty()) scope_rules(plan.scopes.back());
  return out;
}

Expected<Assets> emit(const planner::Library& lib, const planner::Target& target, const model::ModelGraph& graph,
                      const CheckpointLayout& layout, const EmitOptions& options) {
  const auto& cls = target.chain.leaf();
  const bool cpu = cls.vendor == "host";
  Assets a;
  MET_TRY(Config cfg, read_config(options.config_json));
  std::vector<std::int64_t> rungs = options.decode_rungs, buckets = options.prefill_buckets;
  if (rungs.empty())
    for (int r : cls.defaults.decode_rungs) rungs.push_back(r);
  if (buckets.empty())
    for (int r : cls.defaults.prefill_buckets) buckets.push_back(r);
  std::sort(rungs.begin(), rungs.end());
  std::sort(buckets.begin(), buckets.end());
  rungs.erase(std::unique(rungs.begin(), rungs.end()), rungs.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  if (rungs.empty() || rungs.front() < 1) return fail("emit: --decode-rungs: need at least one rung >= 1");
  if (buckets.empty() || buckets.front() < 1) return fail("emit: --prefill-buckets: need at least one bucket >= 1");
  if (options.max_ctx < 1) return fail("emit: --max-ctx must be >= 1");
  if (buckets.back() > options.max_ctx)
    return fail("emit: prefill bucket " + std::to_string(buckets.back()) + " exceeds --max-ctx " + std::to_string(options.max_ctx));
  const bool gpu = !cpu;
  const std::uint32_t sm = options.sm_count ? options.sm_count
                           : cpu            ? kDefaultCpuThreads
                                            : static_cast<std::uint32_t>(std::max(1, target.device->units));
  a.max_ctx = options.max_ctx;
  a.max_seqs = options.max_seqs > 0 ? options.max_seqs : rungs.back();
  if (a.max_seqs < rungs.back()) return fail("emit: max_seqs " + std::to_string(a.max_seqs) + " is below the largest decode rung");
  a.pad_slots = buckets.back();

  a.packet.target_class = cls.id;
  a.packet.sm_count = sm;
  a.weights.network = options.network;
  a.weights.checkpoint = options.checkpoint;
  Shared sh;
  sh.file = &a.packet;
  sh.manifest = &a.weights;
  sh.layout = &layout;
  sh.display = options.checkpoint.empty() ? graph.id : options.checkpoint;
  sh.kv_slots = a.max_seqs * a.max_ctx + a.pad_slots;

  // KV caches: one k and one v tensor per attention layer, shared by every program.
  for (std::size_t l = 0; l < graph.layer_kinds.size(); ++l) {
    const auto& kind = graph.kinds[static_cast<std::size_t>(graph.layer_kinds[l])];
    for (const auto& n : kind.nodes) {
      if (n.op != "kv_append") continue;
      const std::int64_t kvh = param(n, "kv_heads"), hd = param(n, "head_dim");
      const std::int64_t vhd = param(n, "v_head_dim") > 0 ? param(n, "v_head_dim") : hd;
      auto make = [&](const char* which, std::int64_t dim) {
        TensorDesc t;
        t.name = "kv.L" + std::to_string(l) + "." + which;
        t.dtype = MET_DTYPE_BF16;
        t.shape = {static_cast<std::uint64_t>(sh.kv_slots), static_cast<std::uint64_t>(kvh), static_cast<std::uint64_t>(dim)};
        t.bytes = 2 * t.shape[0] * t.shape[1] * t.shape[2];
        t.source = MET_SOURCE_KV;
        t.ref = l;
        return add_tensor(a.packet, std::move(t));
      };
      const auto kh = make("k", hd);
      sh.kv[static_cast<int>(l)] = {kh, make("v", vhd)};
    }
  }

  struct Want {
    planner::Mode mode;
    std::int64_t rows;
    std::string name;
  };
  std::vector<Want> wants;
  for (auto t : buckets) wants.push_back({planner::Mode::prefill, t, "prefill_" + std::to_string(t)});
  for (auto c : rungs) wants.push_back({c == 1 ? planner::Mode::decode : planner::Mode::batch, c, "decode_" + std::to_string(c)});

  const std::int64_t splits = std::clamp<std::int64_t>(options.max_ctx / kKeysPerSplit, 1, kMaxSplits);
  nlohmann::json programs = nlohmann::json::array();
  for (const auto& want : wants) {
    planner::PlanInput in;
    in.tree = lib.tree;
    in.registry = &lib.registry;
    in.device = target.device;
    in.chain = &target.chain;
    in.availability = &target.availability;
    in.rules = &target.rules;
    in.model = &graph;
    in.mode = want.mode;
    in.rows = want.rows;
    const planner::Plan plan = planner::build_plan(in);
    if (plan.gap_groups > 0) {
      std::string gaps;
      for (const auto& s : plan.scopes)
        for (const auto& g : s.groups) {
          if (!g.gap) continue;
          std::string ops;
          for (int i : g.nodes) {
            const auto& n = s.nodes[static_cast<std::size_t>(i)];
            ops += (ops.empty() ? "" : " ") + n.op + (n.role.empty() ? "" : ":" + n.role);
          }
          std::string why = "no rule covers it";
          if (!g.blocked.empty()) why = g.blocked.front().rule + ": " + g.blocked.front().why;
          gaps += "\n  " + s.name + ": " + ops + " (" + why + ")";
        }
      return fail("emit: program " + want.name + " (" + std::string(planner::mode_name(want.mode)) + ", " +
                  std::to_string(want.rows) + " rows) on class '" + cls.id + "' has " + std::to_string(plan.gap_groups) +
                  " gap group(s); emit only runs a plan without gaps:" + gaps);
    }
    Builder b;
    b.sh = &sh;
    b.prog.name = want.name;
    b.prog.kind = want.mode == planner::Mode::prefill ? MET_PROGRAM_PREFILL : MET_PROGRAM_DECODE;
    b.prog.rows = static_cast<std::uint32_t>(want.rows);
    b.rows = want.rows;
    b.cfg = cfg;
    b.max_ctx = options.max_ctx;
    // A GPU decode splits each row's keys across the streams (the split-KV slices run in parallel);
    // the cpu keeps one split per kKeysPerSplit keys of context.
    b.splits = gpu ? std::clamp<std::int64_t>(static_cast<std::int64_t>(sm) / want.rows, 1,
                                              std::max<std::int64_t>(1, options.max_ctx / kMinKeysPerGpuSplit))
                   : splits;
    std::vector<std::uint32_t> scope_base;  // flat index of each scope's first group
    std::uint32_t flat = 0;
    for (const auto& s : plan.scopes) {
      scope_base.push_back(flat);
      flat += static_cast<std::uint32_t>(s.groups.size());
    }
    b.prog.plan_group_count = flat;
    ProgramInfo info;
    info.name = want.name;
    info.mode = std::string(planner::mode_name(want.mode));
    info.rows = want.rows;
    info.digest = plan.digest;
    auto run_scope = [&](std::size_t si, int layer, int first_layer, const std::string& label) -> Expected<void> {
      const auto& s = plan.scopes[si];
      for (std::size_t gi = 0; gi < s.groups.size(); ++gi) {
        ScopeCtx c;
        c.scope = &s;
        c.group = &s.groups[gi];
        c.group_index = scope_base[si] + static_cast<std::uint32_t>(gi);
        c.label = label;
        c.layer = layer;
        c.first_layer = first_layer;
        c.rows = s.rows;
        c.head = s.name == "post";
        c.x_row0 = c.head && s.rows < want.rows ? want.rows - s.rows : 0;
        MET_CHECK(emit_group(b, c, graph));
        info.groups.push_back(s.groups[gi].rule);
      }
      return {};
    };
    std::size_t si = 0;
    if (!graph.pre.empty()) MET_CHECK(run_scope(si++, 0, 0, "pre"));
    for (std::size_t l = 0; l < graph.layer_kinds.size(); ++l) {
      const auto k = static_cast<std::size_t>(graph.layer_kinds[l]);
      const auto& kind = graph.kinds[k];
      MET_CHECK(run_scope(si + k, static_cast<int>(l), kind.layers.empty() ? 0 : kind.layers.front(),
                          plan.scopes[si + k].name + " L" + std::to_string(l)));
    }
    if (!graph.post.empty()) MET_CHECK(run_scope(plan.scopes.size() - 1, 0, 0, "post"));
    // Sampling on the device, after the head (same group): non-greedy rows draw their token from
    // the logits with the host's per-step parameters; greedy rows skip it and read the argmax.
    if (auto it = b.bufs.find("io.logits"); it != b.bufs.end() && !b.prog.instrs.empty()) {
      const auto& lt = sh.file->tensors[it->second];
      const auto head_rows = static_cast<std::int64_t>(lt.shape[0]), vocab = static_cast<std::int64_t>(lt.shape[1]);
      const auto& last = b.prog.instrs.back();
      MET_CHECK(b.add("sample", last.group, last.scope,
                      {it->second, b.io(IoField::sample_params, head_rows, 4), b.io(IoField::sampled_tokens, head_rows)},
                      {head_rows, /*in_row0=*/0, vocab}, {}));
    }
    slice_program(b.prog, a.packet, sm, gpu);
    schedule(b.prog, sm);
    a.packet.programs.push_back(std::move(b.prog));
    programs.push_back({{"name", info.name}, {"mode", info.mode}, {"rows", info.rows}, {"digest", info.digest},
                        {"groups", info.groups}});
    a.programs.push_back(std::move(info));
  }

  nlohmann::json j;
  j["schema"] = "met-build/1";
  j["met_version"] = MET_VERSION_STRING;
  j["flags"] = options.flags;
  j["target"] = {{"class", cls.id}, {"device", target.device->id}, {"sm_count", sm}};
  j["abi"] = {{"version", MET_PACKET_VERSION}, {"hash", abi_hash()}};
  j["checkpoint"] = options.checkpoint;
  j["network"] = options.network;
  j["model"] = graph.id;
  j["max_ctx"] = a.max_ctx;
  j["max_seqs"] = a.max_seqs;
  j["pad_slots"] = a.pad_slots;
  j["decode_rungs"] = rungs;
  j["prefill_buckets"] = buckets;
  j["attn_splits"] = splits;
  j["rms_norm_eps"] = cfg.eps;
  j["rope_theta"] = cfg.theta;
  j["rope"] = {{"theta", cfg.rope.theta}, {"type", cfg.rope.type}};
  if (cfg.rope.type != "default") j["rope"]["factor"] = cfg.rope.factor;
  if (cfg.rope.type == "llama3") {
    j["rope"]["low_freq_factor"] = cfg.rope.low_freq_factor;
    j["rope"]["high_freq_factor"] = cfg.rope.high_freq_factor;
    j["rope"]["original_max_position_embeddings"] = cfg.rope.original_max_position_embeddings;
  }
  j["programs"] = programs;
  a.build_json = j.dump(2) + "\n";
  return a;
}

Expected<BuildInfo> parse_build_json(const std::string& text, const std::string& display) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return fail(display + ": not a json object");
  if (j.value("schema", "") != "met-build/1") return fail(display + ": schema is not 'met-build/1'");
  BuildInfo b;
  try {
    b.target_class = j.at("target").at("class").get<std::string>();
    b.device = j.at("target").at("device").get<std::string>();
    b.sm_count = j.at("target").at("sm_count").get<std::uint32_t>();
    b.max_ctx = j.at("max_ctx").get<std::int64_t>();
    b.max_seqs = j.at("max_seqs").get<std::int64_t>();
    b.pad_slots = j.at("pad_slots").get<std::int64_t>();
    b.abi_hash = j.at("abi").at("hash").get<std::uint32_t>();
    b.checkpoint = j.at("checkpoint").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    return fail(display + ": " + e.what());
  }
  // "rope" is written by every emit that can carry a generated table; without it the rope is plain.
  if (j.contains("rope")) {
    nlohmann::json cfg = nlohmann::json::object();
    const auto& r = j["rope"];
    if (!r.is_object()) return fail(display + ": rope: not an object");
    if (r.contains("theta")) cfg["rope_theta"] = r["theta"];
    nlohmann::json scaling = r;
    scaling.erase("theta");
    if (scaling.contains("type")) {
      scaling["rope_type"] = scaling["type"];
      scaling.erase("type");
    }
    cfg["rope_scaling"] = scaling;
    MET_TRY(b.rope, parse_rope(cfg.dump(), display + ": rope"));
  }
  return b;
}

Expected<RopeConfig> parse_rope(const std::string& config_json, const std::string& display) {
  RopeConfig r;
  const auto j = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return fail(display + ": not a json object");
  // transformers 5 writes rope_parameters (theta inside); older configs rope_theta + rope_scaling.
  // A rope_parameters keyed by layer type (Gemma) is a circuit's business, not read here.
  const nlohmann::json* block = nullptr;
  std::string where = "rope_scaling";
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    block = &j["rope_scaling"];
  } else if (j.contains("rope_parameters") && j["rope_parameters"].is_object() &&
             j["rope_parameters"].contains("rope_type")) {
    block = &j["rope_parameters"];
    where = "rope_parameters";
  }
  const nlohmann::json* theta = j.contains("rope_theta") ? &j["rope_theta"] : nullptr;
  if (block && block->is_object() && block->contains("rope_theta")) theta = &(*block)["rope_theta"];
  if (theta && !theta->is_null()) {
    if (!theta->is_number() || theta->get<double>() <= 0) return fail(display + ": rope_theta: not a positive number");
    r.theta = theta->get<double>();
  }
  if (!block) return r;
  const std::string at = display + ": " + where;
  if (!block->is_object()) return fail(at + ": not an object");
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (!block->contains(key)) continue;
    if (!(*block)[key].is_string()) return fail(at + ": " + key + ": not a string");
    const std::string t = (*block)[key].get<std::string>();
    if (!type.empty() && t != type) return fail(at + ": rope_type '" + type + "' and type '" + t + "' disagree");
    type = t;
  }
  if (type.empty()) return fail(at + ": no rope_type");
  const ScalingKeys* shape = nullptr;
  for (const auto& k : kScalingTypes)
    if (type == k.type) shape = &k;
  if (!shape)
    return fail(at + ": rope type '" + type + "' is not implemented (met runs default, linear and llama3 rope)");
  for (const auto& item : block->items()) {
    const std::string& key = item.key();
    if (key == "rope_type" || key == "type" || key == "rope_theta") continue;
    const bool known = std::any_of(shape->keys.begin(), shape->keys.end(), [&](const char* k) { return key == k; });
    if (!known) return fail(at + ": unknown key '" + key + "' for rope type '" + type + "'");
  }
  std::map<std::string, double> v;
  for (const char* key : shape->keys) {
    if (!block->contains(key)) return fail(at + ": rope type '" + type + "' needs '" + key + "'");
    const auto& x = (*block)[key];
    if (!x.is_number() || !(x.get<double>() > 0)) return fail(at + ": " + key + ": not a positive number");
    v[key] = x.get<double>();
  }
  r.type = type;
  if (type == "default") return r;
  r.factor = v.at("factor");
  if (type == "llama3") {
    r.low_freq_factor = v.at("low_freq_factor");
    r.high_freq_factor = v.at("high_freq_factor");
    r.original_max_position_embeddings = v.at("original_max_position_embeddings");
    if (!(r.high_freq_factor > r.low_freq_factor))
      return fail(at + ": high_freq_factor " + std::to_string(r.high_freq_factor) + " must exceed low_freq_factor " +
                  std::to_string(r.low_freq_factor));
  }
  return r;
}

std::vector<float> rope_inv_freq(const RopeConfig& rope, std::int64_t rotary_dim) {
  constexpr double kTwoPi = 6.283185307179586;
  std::vector<float> out;
  for (std::int64_t i = 0; i < rotary_dim / 2; ++i) {
    double f = std::pow(rope.theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim));
    if (rope.type == "linear") {
      f /= rope.factor;
    } else if (rope.type == "llama3") {
      const double wavelen = kTwoPi / f;
      const double long_wavelen = rope.original_max_position_embeddings / rope.low_freq_factor;
      const double short_wavelen = rope.original_max_position_embeddings / rope.high_freq_factor;
      if (wavelen > long_wavelen) {
        f /= rope.factor;
      } else if (wavelen >= short_wavelen) {
        const double smooth = (rope.original_max_position_embeddings / wavelen - rope.low_freq_factor) /
                              (rope.high_freq_factor - rope.low_freq_factor);
        f = (1.0 - smooth) * f / rope.factor + smooth * f;
      }
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

Expected<std::string> generated_table(const TensorDesc& t, const BuildInfo& build, const std::string& display) {
  const std::string at = display + ": generated tensor '" + t.name + "'";
  if (t.ref != static_cast<std::uint64_t>(GeneratedTable::rope_inv_freq))
    return fail(at + ": unknown table " + std::to_string(t.ref));
  if (t.dtype != MET_DTYPE_F32 || t.shape.size() != 1 || t.bytes != 4 * t.shape[0])
    return fail(at + ": a rope inv_freq table is f32 [rotary_dim / 2]");
  if (!build.rope.scaled()) return fail(at + ": build.json has no scaled rope to compute it from");
  const auto f = rope_inv_freq(build.rope, static_cast<std::int64_t>(2 * t.shape[0]));
  std::string bytes(t.bytes, '\0');
  std::memcpy(bytes.data(), f.data(), bytes.size());
  return bytes;
}

}  // namespace met::emit
