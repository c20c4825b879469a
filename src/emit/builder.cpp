// Building a program's tensors: weights through the manifest (one tensor per entry, shared by every
// program), scratch buffers laid out in the program's arena (one cache line apart), IO tensors by
// field, and instructions checked against their opcode row.
#include "emit/builder.hpp"

#include "emit/opcodes.hpp"
#include "emit/tensor_parallel.hpp"
#include "model/experts.hpp"

namespace met::emit {

const char* io_field_name(IoField f) {
  switch (f) {
    case IoField::tokens:
      return "tokens";
    case IoField::positions:
      return "positions";
    case IoField::slots:
      return "slots";
    case IoField::seq_base:
      return "seq_base";
    case IoField::seq_len:
      return "seq_len";
    case IoField::out_tokens:
      return "out_tokens";
    case IoField::logits:
      return "logits";
    case IoField::sample_params:
      return "sample_params";
    case IoField::sampled_tokens:
      return "sampled_tokens";
    case IoField::head_rows:
      return "head_rows";
    case IoField::ring_slots:
      return "ring_slots";
    case IoField::ring_base:
      return "ring_base";
  }
  return "?";
}

bool io_input(IoField f) {
  switch (f) {
    case IoField::tokens:
    case IoField::positions:
    case IoField::slots:
    case IoField::seq_base:
    case IoField::seq_len:
    case IoField::sample_params:
    case IoField::head_rows:
    case IoField::ring_slots:
    case IoField::ring_base:
      return true;
    case IoField::out_tokens:
    case IoField::logits:
    case IoField::sampled_tokens:
      return false;
  }
  return false;
}

namespace detail {
namespace {

constexpr std::uint64_t kArenaAlign = 64;  // bytes: one cache line per scratch buffer

std::uint64_t dtype_bytes(std::uint32_t dtype) {
  switch (dtype) {
    case MET_DTYPE_BF16:
    case MET_DTYPE_F16:
      return 2;
    case MET_DTYPE_F32:
    case MET_DTYPE_I32:
      return 4;
    case MET_DTYPE_I64:
      return 8;
    default:
      return 1;
  }
}

}  // namespace

std::uint32_t add_tensor(PacketFile& f, TensorDesc t) {
  f.tensors.push_back(std::move(t));
  return static_cast<std::uint32_t>(f.tensors.size() - 1);
}

Expected<std::uint32_t> weight(Shared& sh, const model::Node& node, int first_layer, int layer) {
  std::vector<std::string> names;
  for (const auto& w : node.weights) names.push_back(node.tied ? w : for_layer(w, first_layer, layer));
  if (names.empty())
    return fail("node '" + node.op + (node.role.empty() ? "" : ":" + node.role) + "' (" + node.where + ") has no weight");
  const int split = sh.tp > 1 ? weight_split_dim(node) : -1;
  const std::string whole = entry_name(names, node.role, node.op);
  const std::string entry = split < 0 ? whole : whole + ".rank" + std::to_string(sh.rank);
  if (auto it = sh.weight_handle.find(entry); it != sh.weight_handle.end()) return it->second;
  MET_TRY(WeightEntry e, make_entry(whole, names, *sh.layout, sh.display));
  if (split >= 0) {
    // qkv's k and v parts (after q) in the KV heads' slices when there are fewer than ranks.
    std::vector<int> groups;
    const bool qkv = (node.op == "linear" || node.op == "bias") && node.role == "qkv";  // gpt-oss's bias too
    if (qkv && e.parts.size() < 2)
      return fail(sh.display + ": tensor '" + whole + "': a qkv projection stored as one tensor is not split for tensor "
                  "parallelism (its windows would cut across q, k and v)");
    // The node's kind's KV slices (rank_graph sets kv_groups on every qkv; Gemma-4's full layers
    // have KV heads of their own), else the graph's.
    const int kv_groups = node.params.count("kv_groups") ? static_cast<int>(node.params.at("kv_groups")) : sh.kv_groups;
    if (qkv && kv_groups < sh.tp)
      for (std::size_t k = 0; k < e.parts.size(); ++k) groups.push_back(k == 0 ? 0 : kv_groups);
    // Experts of one tensor ([experts, 2 x inter, hidden], Gemma-4): gate's rows, then up's. gpt-oss's
    // ([experts, hidden, 2 x inter] in bf16, MXFP4 rows [experts, 2 x inter, ...]) interleave gate
    // and up (2j, 2j + 1): a rank's slice is one run of them. Biases and sinks are vectors.
    const bool fused = model::fused_experts(node);
    const SplitLayout layout = node.op == "bias" || node.op == "attention" ? SplitLayout::vector
                               : fused && e.dtype == "bf16"                 ? SplitLayout::in_out
                                                                            : SplitLayout::out_in;
    MET_TRY(e, rank_slice(e, split, sh.rank, sh.tp, sh.display, groups, node.op == "moe_gate_up" && !fused ? 2 : 1, layout));
  }
  TensorDesc t;
  t.name = e.name;
  if (e.dtype == "bf16")
    t.dtype = MET_DTYPE_BF16;
  else if (e.dtype == "f16")
    t.dtype = MET_DTYPE_F16;
  else if (e.dtype == "f32")
    t.dtype = MET_DTYPE_F32;
  else if (e.dtype == "fp8-e4m3")
    t.dtype = MET_DTYPE_FP8_E4M3;
  else if (e.dtype == "mxfp4")
    t.dtype = MET_DTYPE_U8;  // the packed codes; weights.json says mxfp4 and holds the scales
  else
    return fail(sh.display + ": tensor '" + entry + "': format '" + e.dtype + "' has no packet dtype");
  t.shape = e.shape;
  for (const auto& p : e.parts) {
    const auto shape = part_shape(p);
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    std::uint64_t all = 1;
    for (auto d : p.shape) all *= d;
    t.bytes += all ? p.bytes / all * n : 0;  // a rank's window holds its share of the tensor's bytes
  }
  for (const auto& p : e.scale_parts) {  // a rank's window of MXFP4 scales holds its share of them
    std::uint64_t n = 1, all = 1;
    for (auto d : part_shape(p)) n *= d;
    for (auto d : p.shape) all *= d;
    t.bytes += all ? p.bytes / all * n : p.bytes;
  }
  t.source = MET_SOURCE_CHECKPOINT;
  t.ref = sh.manifest->tensors.size();
  sh.manifest->tensors.push_back(std::move(e));
  const auto h = add_tensor(*sh.file, std::move(t));
  sh.weight_handle[entry] = h;
  return h;
}

std::uint32_t Builder::buffer(const std::string& name_, std::uint32_t dtype, std::vector<std::uint64_t> shape,
                              std::uint32_t source, std::uint64_t ref) {
  // A buffer asked for again in another shape (the qkv, q and attention buffers of Gemma-4's layers
  // of two head sizes) is a buffer of its own, named by its shape after the first.
  std::string name = name_;
  if (auto it = bufs.find(name); it != bufs.end()) {
    if (sh->file->tensors[it->second].shape == shape && sh->file->tensors[it->second].dtype == dtype) return it->second;
    for (auto d : shape) name += "." + std::to_string(d);
    if (auto again = bufs.find(name); again != bufs.end()) return again->second;
  }
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

std::uint32_t Builder::act(const std::string& name, std::int64_t r, std::int64_t width) {
  return buffer(name, MET_DTYPE_BF16, {static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(width)});
}

std::uint32_t Builder::io(IoField f, std::int64_t r, std::int64_t width) {
  const bool wide = f == IoField::logits || f == IoField::sample_params;
  const std::uint32_t dt = f == IoField::slots || f == IoField::seq_base || f == IoField::ring_slots || f == IoField::ring_base
                               ? MET_DTYPE_I64
                           : f == IoField::logits                        ? MET_DTYPE_BF16
                           : f == IoField::sample_params                 ? MET_DTYPE_F32
                                                                         : MET_DTYPE_I32;
  std::vector<std::uint64_t> shape{static_cast<std::uint64_t>(r)};
  if (wide) shape.push_back(static_cast<std::uint64_t>(width));
  return buffer(std::string("io.") + io_field_name(f), dt, shape, MET_SOURCE_IO, static_cast<std::uint64_t>(f));
}

Expected<void> Builder::add(const std::string& kernel, std::uint32_t group, const std::string& scope,
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

const model::Node* find_node(const planner::Scope& s, const planner::Group& g, const std::string& op, const std::string& role) {
  for (int i : g.nodes) {
    const auto& n = s.nodes[static_cast<std::size_t>(i)];
    if (n.op == op && (role.empty() || n.role == role)) return &n;
  }
  return nullptr;
}

}  // namespace detail
}  // namespace met::emit
