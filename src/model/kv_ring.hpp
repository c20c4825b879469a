// The KV cache of a sliding-window layer as a ring. A row at position p reads the keys of positions
// p - window + 1 .. p, and one launch writes up to `chunk` positions of a sequence (a prefill
// bucket) before its attention reads them, so a ring of R >= window + chunk - 1 rows never
// overwrites a key some row of the launch still reads (position p sits at row p % R). R is rounded
// up to kKvRingAlign. The emit gives each sequence R + 1 rows: the last takes the writes of idle
// decode rows (emit.hpp, runtime contract). Where a class's bodies read rings (HARDWARE.toml
// [defaults] kv_ring), the memory fit (estimate/analysis.cpp) and the emit's caches count the same
// rows.
#pragma once

#include <algorithm>
#include <cstdint>

#include "model/graph.hpp"

namespace met::model {

// A ring's rows are a multiple of this: a body's key tile of up to 64 keys, starting at a multiple
// of its size in position, then lies in consecutive rows.
inline constexpr std::int64_t kKvRingAlign = 64;

// R for a layer of `window` keys (0: full attention) when launches write up to `chunk` positions
// of a sequence and a sequence holds up to `max_ctx`; 0 where the ring would not be smaller than a
// linear cache of max_ctx rows.
inline std::int64_t kv_ring(std::int64_t window, std::int64_t chunk, std::int64_t max_ctx) {
  if (window <= 0 || chunk < 1 || max_ctx < 1) return 0;
  const std::int64_t need = window + chunk - 1;
  const std::int64_t r = (need + kKvRingAlign - 1) / kKvRingAlign * kKvRingAlign;
  return r + 1 < max_ctx ? r : 0;
}

// Cache rows one sequence owns: the ring and its spare row, or max_ctx.
inline std::int64_t kv_rows_per_seq(std::int64_t ring, std::int64_t max_ctx) { return ring > 0 ? ring + 1 : max_ctx; }

// The attention window of a layer kind (0: full attention, or no attention).
inline std::int64_t kind_window(const LayerGroup& kind) {
  for (const auto& n : kind.nodes) {
    if (n.op != "attention") continue;
    const auto it = n.params.find("window");
    return it == n.params.end() ? 0 : static_cast<std::int64_t>(it->second);
  }
  return 0;
}

// R for every sliding-window layer of a model (0: none has a ring). One size, from the widest
// window, so layers that share a cache (ModelGraph::kv_source) agree on its rows.
inline std::int64_t model_kv_ring(const ModelGraph& graph, std::int64_t chunk, std::int64_t max_ctx) {
  std::int64_t widest = 0;
  for (const auto& kind : graph.kinds) widest = std::max(widest, kind_window(kind));
  return kv_ring(widest, chunk, max_ctx);
}

}  // namespace met::model
