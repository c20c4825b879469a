// What a program is built from: the tensors shared by every program (weights from the manifest,
// KV caches, generated tables), one program under construction (its named scratch buffers in the
// arena, its IO tensors, its instructions), and the scope and group a binding reads. Internal to
// src/emit; the binders (bind*.cpp) and emit() fill it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/expected.hpp"
#include "emit/config.hpp"
#include "emit/emit.hpp"
#include "emit/packet.hpp"
#include "emit/weights_manifest.hpp"
#include "model/graph.hpp"
#include "planner/plan.hpp"

namespace met::emit::detail {

// Shared across programs: weights (one tensor per manifest entry), the KV caches and the generated
// tables (one rope inv_freq per rotary_dim, when the rope is scaled).
struct Shared {
  PacketFile* file = nullptr;
  WeightsManifest* manifest = nullptr;
  const CheckpointLayout* layout = nullptr;
  std::string display;
  std::map<std::string, std::uint32_t> weight_handle;         // entry name -> tensor handle
  std::map<int, std::pair<std::uint32_t, std::uint32_t>> kv;  // layer -> (k, v)
  std::int64_t kv_fp8 = 0;                                    // the caches hold e4m3 (the ops' kv_fp8)
  std::map<int, std::pair<float, float>> kv_scale;            // layer -> (k_scale, v_scale); 1 with bf16 caches
  std::map<int, std::int64_t> kv_ring;                        // layer -> its cache's ring rows (0: linear)
  std::map<std::int64_t, std::uint32_t> inv_freq;             // rotary_dim -> generated table
  std::int64_t kv_slots = 0;
  int tp = 1, rank = 0;  // tensor parallelism: the ranks of the emit and the one being built
  int kv_groups = 1;     // the KV heads' slices across ranks (tensor_parallel.hpp kv_groups)
};

// Appends a tensor to the packet; its handle.
std::uint32_t add_tensor(PacketFile& f, TensorDesc t);

// The tensor of a node's weight at `layer` (weight names are those of the kind's first layer),
// added to the manifest the first time it is asked for.
Expected<std::uint32_t> weight(Shared& sh, const model::Node& node, int first_layer, int layer);

// One program under construction.
struct Builder {
  Shared* sh = nullptr;
  ProgramDesc prog;
  std::int64_t rows = 1;
  std::uint64_t arena = 0;
  std::map<std::string, std::uint32_t> bufs;
  Config cfg;
  std::int64_t max_ctx = 0;
  std::int64_t streams = 0;     // a GPU program's streams (0 on the cpu)
  std::int64_t splits_max = 1;  // decode attention: the most splits of a row's keys (the cpu takes them all)
  std::int64_t split_keys = 0;  // GPU decode attention: the fewest keys of context per split (0 on the cpu)
  std::uint32_t q_src = MET_NO_TENSOR;  // where attention reads q: the fused q buffer or the qkv buffer
  std::int64_t q_stride = 0;            // elements between rows of q_src
  std::int64_t q_width = 0;             // q columns of a qkv row (k starts there)
  std::uint32_t qkv = MET_NO_TENSOR;    // the qkv buffer the layer's projection last wrote
  // Tensor parallelism: the fp32 partial sums a row-parallel op left for the residual after it to
  // all-reduce (bind_residual_add); MET_NO_TENSOR when none waits.
  std::uint32_t partial = MET_NO_TENSOR;

  // The program's buffer `name` of that shape, created on first use (scratch: placed in the arena).
  std::uint32_t buffer(const std::string& name, std::uint32_t dtype, std::vector<std::uint64_t> shape,
                       std::uint32_t source = MET_SOURCE_SCRATCH, std::uint64_t ref = 0);
  // A bf16 activation buffer [r, width].
  std::uint32_t act(const std::string& name, std::int64_t r, std::int64_t width);
  // The IO tensor of a field ([r], or [r, width] for logits and sample_params).
  std::uint32_t io(IoField f, std::int64_t r, std::int64_t width = 0);
  // Appends an instruction of opcode `kernel`; refuses one that does not match its opcode row.
  Expected<void> add(const std::string& kernel, std::uint32_t group, const std::string& scope, std::vector<std::uint32_t> tensors,
                     std::vector<std::int64_t> ints, std::vector<float> imms);
};

// Where the current scope's rows live: layers run `rows` rows; a prefill head reads its gathered rows.
struct ScopeCtx {
  const planner::Scope* scope = nullptr;
  const planner::Group* group = nullptr;
  std::uint32_t group_index = 0;
  std::string label;    // "layers:full L3"
  int first_layer = 0;  // of the kind (weight names are the first layer's)
  int layer = 0;
  std::int64_t rows = 1;    // rows of this scope
  bool head = false;
  // The rows the scope reads instead of the residual stream: the prefill head's gathered rows
  // (MET_NO_TENSOR: the residual stream "x").
  std::uint32_t x = MET_NO_TENSOR;
};

// The group's first node of op `op` (and role `role` when given); null when there is none.
const model::Node* find_node(const planner::Scope& s, const planner::Group& g, const std::string& op,
                             const std::string& role = "");

}  // namespace met::emit::detail
