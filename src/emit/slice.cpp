// The slicing rule: slices of one instruction are unordered, so a split (rows, output columns, GEMM
// tiles, flash prefill rows x heads, decode splits) is only taken when its slices write disjoint
// bytes. A GPU keeps a decode's rows together in each slice, so its weights are read once.
#include "emit/slice.hpp"

#include <algorithm>
#include <functional>
#include <vector>

#include "emit/opcodes.hpp"
#include "estimate/analysis.hpp"
#include "estimate/cost.hpp"
#include "kernels/common/interp/smem.h"

namespace met::emit::detail {
namespace {

// GPU slicing: a weight-bound op over at most this many rows keeps every row in each slice (the
// weights are read once) and splits output columns across the streams; a GEMM over more rows is
// cut into tiles of kGemmTile x kGemmTile outputs.
// Both are the GPU bodies' limits (kernels/common/interp: abi.h, smem.h).
constexpr std::int64_t kGpuGemvRows = MET_DEV_MAX_ROWS;
constexpr std::int64_t kGemmTile = MET_GEMM_TILE;
constexpr std::int64_t kQkvUnitRows = MET_QKV_UNIT_ROWS;
// The grouped expert bodies: weight rows per tile (the fewest rows a row part takes is
// estimate::kMoeRowsPerPart).
constexpr std::int64_t kMoeTile = MET_MOE_MMA_BN;

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
// (a GPU runs each row's splits as separate slices), or (head block, split) units where the merge
// is folded in. A column-split lm_head cannot pick the row's
// argmax from its part; it leaves its tokens to a met_argmax over the logits right after it.
std::int64_t column_count(const InstrDesc& d, const OpcodeInfo& op, const PacketFile& f) {
  if (op.name == "attn_decode_merge" || op.family == "attention_prefill") return d.ints[1];  // heads
  if (op.name == "attn_decode_split_merge")  // head blocks x splits
    return d.ints[2] > 0 ? MET_ATTN_UNIT_BLOCKS(d.ints[1], d.ints[2]) * d.ints[6] : 0;
  // the grouped wgmma experts: their experts' output columns
  if (op.name == "moe_gate_up_silu_wgmma" || op.name == "moe_down_wgmma") return d.ints[5];
  // inter: gate and up rows j and inter + j (gpt-oss's: 2j and 2j + 1; Gemma-4's GELU experts as
  // the SiLU ones), in every routed slot
  if (op.name.starts_with("moe_gate_up")) return d.ints[2];
  if (op.cols_operand >= 0) {
    const auto h = d.tensors[static_cast<std::size_t>(op.cols_operand)];
    if (h == MET_NO_TENSOR) return 0;
    const auto& t = f.tensors[h];
    return t.shape.size() >= 2 ? static_cast<std::int64_t>(t.shape[1]) : 1;
  }
  if (const int ur = int_index(op, "unit_rows"); ur >= 0) {  // the fused qkv output rows, unit_rows at a time
    const std::int64_t rows_per = d.ints[static_cast<std::size_t>(ur)];
    return rows_per > 0 ? (d.ints[2] + 2 * d.ints[3]) * d.ints[4] / rows_per : 0;
  }
  if (const int k = int_index(op, "splits"); k >= 0) return d.ints[static_cast<std::size_t>(k)];
  return 0;
}

// Rows per column unit of a fused qkv op on a GPU. With whole heads as units, a model with fewer
// heads than streams leaves streams idle while the others read a head's weights each; units of
// fewer rows (a multiple of the mma tile that divides head_dim) spread those reads, and the last
// slice to finish a head finishes it (norm, rope). The choice is the unit that makes the largest
// slice smallest (every slice reads its rows' weights over the whole hidden size), and of equals the
// largest unit, which splits the fewest heads.
std::int64_t qkv_unit_rows(std::int64_t head_units, std::int64_t head_dim, std::uint32_t sm) {
  std::int64_t best = head_dim, best_rows = 0;
  if (head_units <= 0 || head_dim <= 0 || sm == 0) return head_dim;
  for (std::int64_t ur = head_dim; ur >= kQkvUnitRows; --ur) {
    if (head_dim % ur != 0 || ur % kQkvUnitRows != 0) continue;
    const std::int64_t units = head_units * (head_dim / ur);
    const std::int64_t rows = (units + sm - 1) / sm * ur;  // the most rows one slice carries
    if (best_rows == 0 || rows < best_rows) best = ur, best_rows = rows;
  }
  return best;
}

// A GPU GEMM's tiles: row parts of kGemmTile rows x column parts of kGemmTile (gated) or up to 256
// columns (rows: the instruction's; n: its output columns).
struct Tiles {
  std::int64_t row_parts = 1, parts = 1;
};
Tiles gemm_tiles(const OpcodeInfo& op, std::int64_t rows, std::int64_t n, std::uint32_t sm) {
  Tiles t{(rows + kGemmTile - 1) / kGemmTile, (n + kGemmTile - 1) / kGemmTile};
  // The wgmma GEMM also takes 256-column tiles (kernels/hopper/gemm_wgmma.cuh), which read less
  // per product; they are cut where they still give every stream a tile. A gated GEMM's 128
  // output columns already take 256 weight rows (the gate's and the up's).
  const std::int64_t wide = (n + MET_WGMMA_MAX_COLS - 1) / MET_WGMMA_MAX_COLS;
  if (op.name.ends_with("_wgmma") && !gated_gemm(op) && t.row_parts * wide >= sm) t.parts = wide;
  return t;
}

// A collective's slices. The cpu class: one (a host rank needs one arrival at the rendezvous). A GPU
// class: one slice is one SM reading every rank's copy of its range over the interconnect, so the
// [rows, n] range (n: width, or ranks x width gathered) is cut into row parts x column parts, up to
// one slice per stream and no fewer than kCollectiveSliceValues values a slice (one 16-byte vector
// per thread of a block). Column parts divide n into multiples of 8 values, so each slice's range
// in a row starts and ends on a 16-byte boundary and the body loads whole vectors
// (kernels/common/collective.cuh); slice s of every rank covers the same range, since every rank's
// instruction has the same ints.
constexpr std::int64_t kCollectiveSliceValues = std::int64_t{MET_INTERP_THREADS} * 8;
constexpr std::int64_t kCollectiveVector = 8;  // bf16 values of one 16-byte load

void slice_collective(InstrDesc& d, const OpcodeInfo& op, const PacketFile& f, std::uint32_t sm, bool gpu) {
  const auto ck = static_cast<std::size_t>(int_index(op, "col_slices"));
  d.slices = 1;
  d.ints[ck] = 1;
  const std::int64_t rows = d.ints[0], width = d.ints[1], ranks = d.ints[2];
  const std::int64_t n = op.name == "allgather_cols" ? width * ranks : width;
  if (!gpu || rows <= 0 || n <= 0) return;
  const std::int64_t want = std::clamp<std::int64_t>(rows * n / kCollectiveSliceValues, 1, sm);
  const std::int64_t row_parts = std::min(rows, want);
  std::int64_t cols = 1;
  if (n % kCollectiveVector == 0) {
    const std::int64_t vectors = n / kCollectiveVector;
    for (std::int64_t c = std::min(vectors, want / row_parts); c > 1 && cols == 1; --c)
      if (vectors % c == 0) cols = c;
  }
  d.ints[ck] = cols;
  d.slices = static_cast<std::uint32_t>(row_parts * cols);
  if (!disjoint_writes(d, f)) {  // by construction they are; never two slices on the same bytes
    d.slices = 1;
    d.ints[ck] = 1;
  }
}

}  // namespace

void split_gemms(ProgramDesc& p, const PacketFile& f, std::uint32_t sm, std::pair<std::int64_t, std::int64_t> split,
                 const std::function<std::uint32_t(std::uint64_t)>& part_buffer) {
  // Each GEMM whose tiles leave streams idle gets the K parts the class's split gives it (the most
  // that still fit one wave, estimate::gemm_k_parts, as the prediction counts them); every split
  // GEMM of the program shares one part buffer, so the scheduler orders them (a tile's arrival
  // counter is never in use twice at once).
  std::vector<std::size_t> split_at;
  std::uint64_t most = 0;
  for (std::size_t i = 0; i < p.instrs.size(); ++i) {
    auto& d = p.instrs[i];
    const OpcodeInfo* op = find_opcode(d.opcode);
    const int kk = int_index(*op, "k_splits");
    if (!splits_k(*op) || gated_gemm(*op) || kk < 0 || d.ints.empty()) continue;  // gated: HARDWARE.toml says why
    const std::int64_t n = column_count(d, *op, f), rows = d.ints[0];
    const auto w = d.tensors[static_cast<std::size_t>(tensor_index(*op, "w"))];
    if (n <= 0 || rows <= 0 || w == MET_NO_TENSOR || f.tensors[w].shape.size() != 2) continue;
    const Tiles t = gemm_tiles(*op, rows, n, sm);
    const std::int64_t tiles = t.row_parts * t.parts;
    const std::int64_t k = estimate::gemm_k_parts(tiles, static_cast<std::int64_t>(f.tensors[w].shape[1]), sm, split);
    if (k < 2 || tiles > MET_GEMM_SPLIT_TILES) continue;
    d.ints[static_cast<std::size_t>(kk)] = k;
    split_at.push_back(i);
    most = std::max(most, static_cast<std::uint64_t>(tiles * k));
  }
  if (split_at.empty()) return;
  const std::uint32_t part = part_buffer(most);
  for (const std::size_t i : split_at) {
    auto& d = p.instrs[i];
    d.tensors[static_cast<std::size_t>(tensor_index(*find_opcode(d.opcode), "part"))] = part;
  }
}

void slice_program(ProgramDesc& p, const PacketFile& f, std::uint32_t sm, bool gpu) {
  std::vector<InstrDesc> out;
  out.reserve(p.instrs.size());
  for (auto& d : p.instrs) {
    const OpcodeInfo* op = find_opcode(d.opcode);
    if (int_index(*op, "ranks") >= 0) {  // a collective: slice s meets slice s of every other rank
      slice_collective(d, *op, f, sm, gpu);
      out.push_back(d);
      continue;
    }
    const std::int64_t rows = d.ints.empty() ? 1 : d.ints[0];
    const auto row_slices = static_cast<std::uint32_t>(std::clamp<std::int64_t>(rows, 1, sm));
    const int ck = int_index(*op, "col_slices");
    if (const int ur = int_index(*op, "unit_rows"); gpu && ur >= 0)
      d.ints[static_cast<std::size_t>(ur)] = qkv_unit_rows(d.ints[2] + 2 * d.ints[3], d.ints[4], sm);
    const std::int64_t n = ck >= 0 ? column_count(d, *op, f) : 0;
    std::int64_t parts = 1, row_parts = row_slices;
    if (n > 0 && rows >= 1) {
      // A wgmma GEMM takes tiles at most kGemmTile rows by kGemmTile (gated) or 256 columns at any
      // row count: should a class's rules pick one for a batch of 16 or fewer rows (hopper's start
      // at 17 today, kernels/common/FUSIONS.toml), its columns are still cut into tiles, never into
      // one part per stream.
      if (gpu && op->family == "gemm" && (rows > kGpuGemvRows || op->name.ends_with("_wgmma"))) {
        const Tiles t = gemm_tiles(*op, rows, n, sm);
        // a split K (split_gemms) repeats the tiles once per K part, K part-major
        row_parts = t.row_parts * k_parts(d);
        parts = t.parts;
      } else if (gpu && op->family == "attention_prefill") {
        // Slices of rows x heads; the scheduler places them by their causal cost (longest first
        // onto the least-loaded stream, schedule.cpp), so every stream gets about the mean.
        row_parts = (rows + MET_FLASH_SLICE_ROWS - 1) / MET_FLASH_SLICE_ROWS;
        parts = (n + MET_FLASH_SLICE_HEADS - 1) / MET_FLASH_SLICE_HEADS;
      } else if (gpu && int_index(*op, "splits") >= 0) {
        row_parts = rows;  // one row and one split (merge: one head) per slice
        parts = n;
      } else if (op->name.starts_with("moe_router")) {
        // A GPU's one decode row splits the router's experts over the streams, an expert a part where
        // the streams are enough and at most MET_MOE_ROUTER_PART_EXPERTS (each part scores its experts,
        // the last to arrive takes the top k, kernels/common/moe.cuh): a slice per row read the whole
        // router on one SM. More rows keep a slice per row, as prefill rows and the cpu do: on an H100,
        // Qwen3-30B-A3B's router at 16 rows took 30 us a layer with a slice per row, 41 split an
        // expert a part and 53 split 16 experts a part; at one row 23, 15 and 17
        // (perf-data/h100-sxm/20261207T1245Z-router-parts, 20261207T1555Z-moe-grouping).
        if (gpu && rows == 1) {
          row_parts = 1;
          const std::int64_t fewest = (n + MET_MOE_ROUTER_PART_EXPERTS - 1) / MET_MOE_ROUTER_PART_EXPERTS;
          parts = std::min<std::int64_t>(n, std::max<std::int64_t>(sm, fewest));
        }
      } else if (gpu && op->family == "moe_gemv") {
        // Every row in each slice at any row count: a slice reads its columns of each expert its
        // rows picked once per chunk of routed slots (kernels/common/moe.cuh), so splitting rows
        // would read the experts once per row part.
        row_parts = 1;
        parts = std::min<std::int64_t>(sm, n);
      } else if (op->name == "moe_gate_up_silu_wgmma" || op->name == "moe_down_wgmma") {
        // The grouped wgmma experts (kernels/hopper/gemm_wgmma.cuh): a slice a (tile, column part)
        // for as many tiles as moe_group can cut (each expert's run of places in tiles of
        // MET_MOE_WGMMA_BM, the last partial), columns in the dense GEMM's widths (128 output columns
        // of a gated tile, 256 of a plain one); the tiles past the step's count return at once.
        const std::int64_t slots = rows * d.ints[4], experts = d.ints[6];
        row_parts = std::max<std::int64_t>(1, MET_MOE_WGMMA_MAX_TILES(slots, experts));
        const std::int64_t unit = op->name == "moe_gate_up_silu_wgmma" ? MET_GEMM_TILE : MET_WGMMA_MAX_COLS;
        parts = std::max<std::int64_t>(1, (n + unit - 1) / unit);
      } else if (op->name.starts_with("moe_combine")) {
        // Rows, then columns where the rows leave streams idle (elementwise over each row's slots).
        if (gpu && rows < sm) {
          row_parts = rows;
          parts = std::min<std::int64_t>((sm + rows - 1) / rows, n);
        }
      } else if (gpu && op->family == "moe_gemm") {
        // Column parts of one tile of the grouped body (kernels/common/moe_mma.cuh; gate_up's
        // tile is half gate, half up), then row parts of at least kMoeRowsPerPart rows until every
        // stream has a slice (each row part reads the experts its rows picked again, each column
        // part gathers its rows' activations again); with too few rows for that, narrower column
        // parts.
        const std::int64_t unit = op->name.starts_with("moe_gate_up") ? kMoeTile / 2 : kMoeTile;
        const std::int64_t tiles = (n + unit - 1) / unit;
        row_parts = estimate::moe_row_parts(rows, n, unit, sm);  // as the prediction counts them
        parts = std::min<std::int64_t>(n, std::max<std::int64_t>(tiles, (sm + row_parts - 1) / row_parts));
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

}  // namespace met::emit::detail
