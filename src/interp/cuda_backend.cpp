// cuda backend: device storage for every tensor of the packet, the device view of each program
// (kernels/common/interp/abi.h), and one cooperative launch of the embedded interpreter per run.
#include "interp/cuda_backend.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string_view>

#include "emit/opcodes.hpp"
#include "interp/collective_plan.hpp"
#include "interp/cuda_driver.hpp"
#include "interp/io_check.hpp"
#include "interp/nccl.hpp"
#include "interp/weights.hpp"
#include "kernels/common/interp/abi.h"
#include "kernels/common/interp/smem.h"
#include "model/kv_ring.hpp"

namespace met::interp {

using emit::named_int;

namespace {

// Shared memory of the bodies (kernels/common/interp/smem.h): the gemv family's fixed part plus
// rows x K normalised activations, the GEMMs' stages, the flash V tiles, the split-KV decode
// chunks, the merge weights. Each program launches with what its own bodies need.
constexpr std::uint64_t kGemvFixedSmem = MET_GEMV_FIXED_SMEM;

// A bf16 tensor map of `rank` dims (innermost first; strides in bytes of dims 1..) with the
// 128-byte swizzle the wgmma descriptors read and zeros past the tensor.
Expected<cu::TensorMap> encode_bf16_tmap(const cu::Api& api, cu::DevicePtr base, std::uint32_t rank,
                                         std::array<std::uint64_t, 3> dims, std::array<std::uint64_t, 2> strides,
                                         std::array<std::uint32_t, 3> box) {
  cu::TensorMap map{};
  const std::uint32_t step[3] = {1, 1, 1};
  MET_CU(api, TensorMapEncodeTiled(&map, cu::kTmapBf16, rank, reinterpret_cast<void*>(base), dims.data(), strides.data(), box.data(),
                                   step, cu::kTmapInterleaveNone, cu::kTmapSwizzle128, cu::kTmapL2Promote256, cu::kTmapOobZero));
  return map;
}

// A TMA descriptor of a bf16 matrix [rows, cols] (row-major, `cols` apart) at `base`, for the
// wgmma bodies (kernels/hopper/*.cuh): boxes of box_rows x 64 values (128 bytes) with the 128-byte
// swizzle their wgmma descriptors read; rows and columns past the matrix arrive as zeros.
Expected<cu::TensorMap> bf16_tmap(const cu::Api& api, cu::DevicePtr base, std::int64_t rows, std::int64_t cols,
                                  std::uint32_t box_rows) {
  if (rows <= 0 || cols <= 0 || rows >= (std::int64_t{1} << 31) || cols % 8 != 0 || base % 16 != 0)
    return fail("a TMA view needs a 16-byte aligned matrix with rows of a multiple of 8 values and fewer than 2^31 rows, not [" +
                std::to_string(rows) + ", " + std::to_string(cols) + "]");
  const auto c = static_cast<std::uint64_t>(cols);
  return encode_bf16_tmap(api, base, 2, {c, static_cast<std::uint64_t>(rows)}, {c * 2}, {64, box_rows});
}

// The wgmma GEMM's B view of a weight [rows, K] (kernels/hopper/gemm_wgmma.cuh): 3-D, boxes of 128
// rows x 64 values with the 128-byte swizzle. Plain: [rows][1][K], a box is 128 consecutive rows.
// Gated (gate rows, then up rows `gap` rows further: rows / 2 for one [2 x dim, K] weight, an
// expert's cols for the grouped experts' stack of [2 x cols, K] experts): [rows - gap][gate, up][K],
// a box is 64 output columns, each column's gate row followed by its up row (row r's up row is r + gap,
// so the view ends where the last up row does).
Expected<cu::TensorMap> gemm_b_tmap(const cu::Api& api, cu::DevicePtr base, std::int64_t rows, std::int64_t K, bool gated,
                                    std::int64_t gap) {
  if (rows <= 0 || K <= 0 || rows >= (std::int64_t{1} << 31) || K % 8 != 0 || base % 16 != 0 || (gated && (gap <= 0 || gap >= rows)))
    return fail("a TMA view of a GEMM weight needs a 16-byte aligned matrix with rows of a multiple of 8 values, fewer than 2^31 "
                "rows (up rows within it when gated), not [" + std::to_string(rows) + ", " + std::to_string(K) + "]");
  const auto k = static_cast<std::uint64_t>(K), n = static_cast<std::uint64_t>(gated ? rows - gap : rows);
  return encode_bf16_tmap(api, base, 3, {k, gated ? 2u : 1u, n}, {gated ? static_cast<std::uint64_t>(gap) * k * 2 : k * 2, k * 2},
                          {64, gated ? 2u : 1u, gated ? 64u : 128u});
}

}  // namespace

namespace {

// One GPU of the run: a tensor-parallel rank (rank r on device r), or the only one. Its primary
// context, module, stream and events, and the device state of its packet.
struct DeviceRank {
  const cu::Api* api = nullptr;
  std::uint32_t rank = 0;
  cu::Device dev = 0;
  cu::Context ctx = nullptr;
  cu::Module mod = nullptr;
  cu::Function fn = nullptr;
  cu::Stream stream = nullptr;
  cu::Event ev0 = nullptr, ev1 = nullptr;
  std::vector<cu::DevicePtr> allocs;
  std::uint64_t held = 0;
  std::string dev_name;
  int sms = 0, smem_optin = 0;
  GpuFacts facts;
  const emit::PacketFile* packet = nullptr;
  std::string file;                   // its packet file, for errors
  std::vector<cu::DevicePtr> tensor;  // per tensor handle
  std::vector<std::size_t> kv;        // KV tensor handles

  struct Io {
    std::vector<std::byte> host;  // rank 0 only: what the host fills and reads
    cu::DevicePtr dev = 0;
    std::uint64_t bytes = 0;
  };
  struct Prog {
    cu::DevicePtr instrs = 0, streams = 0, entries = 0, waits = 0, counters = 0, stamps = 0;
    std::uint32_t n_instrs = 0, n_entries = 0;
    std::map<emit::IoField, Io> io;
    std::vector<std::uint32_t> entry_instr;
    std::vector<unsigned long long> stamps_host;
    std::vector<MetDevInstr> host_instrs;
    unsigned smem = 0;  // dynamic shared memory of its launches: the largest need of its bodies
    SlotBounds bounds;  // what its slots fields may name (io_check.hpp)
  };
  std::vector<Prog> progs;
  std::vector<bool> has_body;  // per opcode number: the loaded image defines its body
  float last_ms = 0;

  // The context is current on the thread that created it only; every entry point binds it, since
  // a caller may run the backend from another thread (serve's engine thread does), and with
  // several ranks every switch between them.
  Expected<void> bind() const {
    MET_CU(*api, CtxSetCurrent(ctx));
    return {};
  }

  // Best effort (a destructor cannot report): the device memory, then the context's objects.
  void release_memory() {
    if (!api || !ctx) return;
    api->CtxSetCurrent(ctx);
    for (auto p : allocs) api->MemFree(p);
    allocs.clear();
  }
  void release_device() {
    if (!api || !ctx) return;
    api->CtxSetCurrent(ctx);
    if (ev0) api->EventDestroy(ev0);
    if (ev1) api->EventDestroy(ev1);
    if (stream) api->StreamDestroy(stream);
    if (mod) api->ModuleUnload(mod);
    api->DevicePrimaryCtxRelease(dev);
    ctx = nullptr;
  }

  Expected<cu::DevicePtr> alloc(std::uint64_t bytes) {
    cu::DevicePtr p = 0;
    MET_CU(*api, MemAlloc(&p, std::max<std::uint64_t>(bytes, 16)));
    allocs.push_back(p);
    held += bytes;
    return p;
  }
  // One cooperative launch between the two events, not waited for.
  Expected<void> issue(const MetInterpParams& params, unsigned smem) {
    MetInterpParams p = params;
    void* args[] = {&p};
    MET_CU(*api, EventRecord(ev0, stream));
    MET_CU(*api, LaunchCooperativeKernel(fn, packet->sm_count, 1, 1, MET_INTERP_THREADS, 1, 1, smem, stream, args));
    MET_CU(*api, EventRecord(ev1, stream));
    return {};
  }
  Expected<void> wait() {
    MET_CU(*api, StreamSynchronize(stream));
    MET_CU(*api, EventElapsedTime(&last_ms, ev0, ev1));
    return {};
  }
  Expected<void> launch(const MetInterpParams& params, unsigned smem) {
    MET_CHECK(issue(params, smem));
    return wait();
  }
  Expected<cu::DevicePtr> upload(const void* data, std::uint64_t bytes) {
    MET_TRY(cu::DevicePtr p, alloc(bytes));
    if (bytes) MET_CU(*api, MemcpyHtoD(p, data, bytes));
    return p;
  }
  template <class T>
  Expected<cu::DevicePtr> upload_vec(const std::vector<T>& v) {
    return upload(v.data(), v.size() * sizeof(T));
  }
};

// What the ranks share through NCCL (tensor parallelism only): one communicator per rank, each
// rank's arena (ncclMemAlloc) registered as one symmetric window, and its device communicator.
struct RankComms {
  const nccl::Api* api = nullptr;
  std::vector<nccl::Comm> comms;
  std::vector<void*> arenas;
  std::vector<nccl::Window> windows;
  std::vector<nccl::DevComm> dev;
  std::uint64_t window_bytes = 0;
};

// Rank m.rank's device (ordinal m.rank): its checks against the emit, primary context, module,
// stream, events and the bodies its image defines.
Expected<void> open_device(DeviceRank& m, const emit::PacketFile& pf, const std::string& dir, const InterpImage& image) {
  const cu::Api* api = m.api;
  MET_CU(*api, DeviceGet(&m.dev, static_cast<int>(m.rank)));
  char name[256] = {};
  MET_CU(*api, DeviceGetName(name, sizeof name, m.dev));
  m.dev_name = name;
  int major = 0, minor = 0, coop = 0;
  int &sms = m.sms, &smem_optin = m.smem_optin;
  MET_CU(*api, DeviceGetAttribute(&major, cu::kAttrComputeMajor, m.dev));
  MET_CU(*api, DeviceGetAttribute(&minor, cu::kAttrComputeMinor, m.dev));
  MET_CU(*api, DeviceGetAttribute(&sms, cu::kAttrMultiprocessorCount, m.dev));
  MET_CU(*api, DeviceGetAttribute(&coop, cu::kAttrCooperativeLaunch, m.dev));
  MET_CU(*api, DeviceGetAttribute(&smem_optin, cu::kAttrMaxSmemPerBlockOptin, m.dev));
  if (major != 9 || minor != 0)
    return fail("cuda: " + m.dev_name + " is compute capability " + std::to_string(major) + "." + std::to_string(minor) +
                "; the hopper interpreter is built for sm_90a");
  if (static_cast<std::uint32_t>(sms) != pf.sm_count)
    return fail(dir + " were emitted for " + std::to_string(pf.sm_count) + " SMs; " + m.dev_name + " has " + std::to_string(sms) +
                " (emit for this device, or with --threads " + std::to_string(sms) + ")");
  if (!coop) return fail("cuda: " + m.dev_name + " does not support cooperative launches");
  std::size_t total = 0;
  MET_CU(*api, DeviceTotalMem(&total, m.dev));
  m.facts = {m.dev_name, sms, major, minor, total};
  MET_CU(*api, DevicePrimaryCtxRetain(&m.ctx, m.dev));
  MET_CU(*api, CtxSetCurrent(m.ctx));
  MET_CU(*api, ModuleLoadData(&m.mod, image.data));
  MET_CU(*api, ModuleGetFunction(&m.fn, m.mod, "metinterp_hopper"));
  // The bodies this image defines: one met_entry_<op> marker per MET_ENTRY (kernels/common/interp/args.cuh).
  m.has_body.assign(emit::opcode_table().size() + 1, false);
  for (const auto& op : emit::opcode_table()) {
    cu::DevicePtr marker = 0;
    std::size_t bytes = 0;
    m.has_body[op.number] = api->ModuleGetGlobal(&marker, &bytes, m.mod, ("met_entry_" + op.name).c_str()) == 0;
  }
  MET_CU(*api, StreamCreate(&m.stream, 0));
  MET_CU(*api, EventCreate(&m.ev0, 0));
  MET_CU(*api, EventCreate(&m.ev1, 0));
  return {};
}

// Rank m's device state over its packet: the weights it names (each rank's window of a split
// entry is its own entry of the shared weights.json), the scratch arena (`arena`: the rank's NCCL
// window under --tp, else allocated here), generated tables, KV, IO, and every program's tables;
// each collective's peers operand points at its MetDevPeers record (`peers`: per program, in plan
// order; empty without --tp).
Expected<void> load_rank(DeviceRank& m, const Assets& a, const emit::PacketFile& pf, const LoadedWeights& w, cu::DevicePtr arena,
                         std::uint64_t arena_bytes, const CollectivePlan* plan,
                         const std::vector<std::vector<MetDevPeers>>& peers) {
  const cu::Api* api = m.api;
  const std::string& at = m.file;
  MET_CHECK(m.bind());
  m.packet = &pf;

  // Weights: bf16, fp8 e4m3 with f32 block scales (W8A16: the gemv family and the mma.sync GEMM),
  // or MXFP4 with its e8m0 bytes (gpt-oss's experts); each entry and its scales in their own
  // allocations (256-byte aligned for 16-byte loads).
  static_assert(MET_DEV_WEIGHT_BF16 == MET_WEIGHT_BF16 && MET_DEV_WEIGHT_FP8_E4M3 == MET_WEIGHT_FP8_E4M3 &&
                MET_DEV_WEIGHT_MXFP4 == MET_WEIGHT_MXFP4);
  // Under --tp a rank uploads the entries its packet names: its windows and the replicated ones
  // (also rank 0 loaded alone for optest: plan null, tp_ranks > 1).
  std::vector<bool> named_here(w.size(), plan == nullptr && pf.tp_ranks <= 1);
  for (const auto& t : pf.tensors)
    if (t.source == MET_SOURCE_CHECKPOINT && t.ref < w.size()) named_here[t.ref] = true;
  std::vector<cu::DevicePtr> wdev, wscales;
  std::vector<MetHostWeight> whost;
  for (std::size_t e = 0; e < w.size(); ++e) {
    MET_TRY(MetHostWeight h, w.host_weight(e));
    if (!named_here[e]) {
      wdev.push_back(0);
      wscales.push_back(0);
      whost.push_back(h);
      continue;
    }
    const std::string wname = a.dir + "/weights.json: weight '" + w.entry(e).name + "'";
    cu::DevicePtr sdev = 0;
    if (h.format == MET_WEIGHT_FP8_E4M3) {
      if (h.act_scale > 0.0f)
        return fail(wname + " declares static fp8 activations (an input_scale: W8A8); the hopper interpreter's fp8 bodies "
                            "read bf16 activations (W8A16) and no W8A8 body is built");
      const bool whole_row = h.block_cols >= h.cols;
      const bool pow2 = h.block_cols >= 64 && h.block_cols % 64 == 0 && ((h.block_cols / 64) & (h.block_cols / 64 - 1)) == 0;
      if (!h.scales || h.block_rows <= 0 || (!whole_row && !pow2))
        return fail(wname + ": fp8 scale blocks of " + std::to_string(h.block_rows) + " x " + std::to_string(h.block_cols) +
                    "; the hopper fp8 bodies take blocks of 64 x 2^n columns or whole rows");
      MET_TRY(sdev, m.upload(w.scales(e), w.scale_bytes(e)));
    } else if (h.format == MET_WEIGHT_MXFP4) {
      if (!h.scales || h.cols % 32 != 0)
        return fail(wname + ": mxfp4 needs its e8m0 scales and rows of whole 32-column blocks, not " + std::to_string(h.cols));
      MET_TRY(sdev, m.upload(w.scales(e), w.scale_bytes(e)));
    } else if (h.format != MET_WEIGHT_BF16) {
      return fail(wname + " is neither bf16, fp8-e4m3 nor mxfp4; the hopper interpreter has no nvfp4 bodies");
    }
    MET_TRY(cu::DevicePtr p, m.upload(w.data(e), w.bytes(e)));
    wdev.push_back(p);
    wscales.push_back(sdev);
    whost.push_back(h);
  }

  const auto& tensors = pf.tensors;
  cu::DevicePtr arena_dev = arena;
  if (arena_dev == 0) {
    std::uint64_t need = 0;
    for (const auto& t : tensors)
      if (t.source == MET_SOURCE_SCRATCH) need = std::max(need, t.ref + t.bytes);
    MET_TRY(arena_dev, m.alloc(need));
    arena_bytes = need;
  }
  for (const auto& t : tensors)
    if (t.source == MET_SOURCE_SCRATCH && t.ref + t.bytes > arena_bytes)
      return fail(at + ": scratch tensor '" + t.name + "' ends at byte " + std::to_string(t.ref + t.bytes) + " of an arena of " +
                  std::to_string(arena_bytes));
  MET_CU(*api, MemsetD8(arena_dev, 0, std::max<std::uint64_t>(arena_bytes, 16)));
  m.tensor.assign(tensors.size(), 0);
  m.progs.resize(pf.programs.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    switch (t.source) {
      case MET_SOURCE_CHECKPOINT:
        if (t.ref >= wdev.size())
          return fail(at + ": tensor '" + t.name + "' names weights.json entry " + std::to_string(t.ref) + " of " +
                      std::to_string(wdev.size()));
        m.tensor[i] = wdev[t.ref];
        break;
      case MET_SOURCE_SCRATCH: m.tensor[i] = arena_dev + t.ref; break;
      case MET_SOURCE_GENERATED: {
        MET_TRY(std::string bytes, emit::generated_table(t, a.build, at));
        MET_TRY(cu::DevicePtr p, m.upload(bytes.data(), bytes.size()));
        m.tensor[i] = p;
        break;
      }
      case MET_SOURCE_KV: {
        if (t.dtype != MET_DTYPE_BF16)
          return fail(at + ": KV cache '" + t.name +
                      "' is not bf16; the hopper interpreter's attention bodies read a bf16 cache (fp8 KV bodies are not "
                      "built yet)");
        MET_TRY(cu::DevicePtr p, m.alloc(t.bytes));
        MET_CU(*api, MemsetD8(p, 0, t.bytes));
        m.tensor[i] = p;
        m.kv.push_back(i);
        break;
      }
      case MET_SOURCE_IO: {
        MET_TRY(cu::DevicePtr p, m.alloc(t.bytes));
        MET_CU(*api, MemsetD8(p, 0, std::max<std::uint64_t>(t.bytes, 16)));
        m.tensor[i] = p;
        for (std::size_t k = 0; k < pf.programs.size(); ++k) {
          if (t.name.rfind(pf.programs[k].name + ".io.", 0) != 0) continue;
          DeviceRank::Io io;
          if (m.rank == 0) io.host.assign(t.bytes, std::byte{0});  // the other ranks' inputs come from rank 0's
          io.dev = p;
          io.bytes = t.bytes;
          m.progs[k].io[static_cast<emit::IoField>(t.ref)] = std::move(io);
        }
        break;
      }
      default: return fail(at + ": tensor '" + t.name + "': source " + std::to_string(t.source) + " is not run by the cuda backend");
    }
  }

  // Programs: device instructions with resolved operands, streams, entries, waits, counters.
  std::uint64_t max_smem = 0;
  for (std::size_t k = 0; k < pf.programs.size(); ++k) {
    const auto& p = pf.programs[k];
    auto& prog = m.progs[k];
    prog.bounds = slot_bounds(pf, k);
    std::vector<MetDevInstr> ins;
    std::vector<cu::TensorMap> tmaps;                               // the wgmma bodies' descriptors
    std::vector<std::pair<std::size_t, std::size_t>> tmap_instr;   // (instruction, its first descriptor)
    std::uint64_t rows_k = 0, need = std::max<std::uint64_t>(kGemvFixedSmem, MET_MERGE_SMEM);
    // The collectives' MetDevPeers records, one per collective in instruction order (plan order).
    cu::DevicePtr peers_dev = 0;
    std::size_t next_collective = 0;
    if (plan) {
      if (k >= peers.size() || peers[k].size() != plan->programs[k].size())
        return fail(at + ": program " + p.name + ": " + std::to_string(k < peers.size() ? peers[k].size() : 0) +
                    " peers records for " + std::to_string(plan->programs[k].size()) + " collectives");
      if (!peers[k].empty()) {
        MET_TRY(peers_dev, m.upload_vec(peers[k]));
      }
    }
    for (std::size_t i = 0; i < p.instrs.size(); ++i) {
      const auto& d = p.instrs[i];
      const auto* op = emit::find_opcode(d.opcode);
      const std::string where = at + ": program " + p.name + " instruction " + std::to_string(i);
      if (!op) return fail(where + ": unknown opcode " + std::to_string(d.opcode));
      MetDevInstr di{};
      di.opcode = d.opcode;
      if (!m.has_body[d.opcode])
        return fail(where + ": opcode " + op->name + " has no body in the hopper interpreter (its image defines no met_entry_" +
                    op->name + ")");
      // Rings (HARDWARE.toml kv_ring): the fused split-KV decode and both flash prefill bodies read
      // them; another attention body would read a ring as linear, silently wrong.
      if (const int r = emit::int_index(*op, "ring"); r >= 0 && static_cast<std::size_t>(r) < d.ints.size() && d.ints[static_cast<std::size_t>(r)] != 0) {
        const std::int64_t ring = d.ints[static_cast<std::size_t>(r)];
        if (op->name != "attn_decode_split_merge" && op->name != "flash_prefill_wgmma" && op->name != "flash_prefill_mma")
          return fail(where + ": " + op->name + " reads a KV ring of " + std::to_string(ring) +
                      " rows; the hopper bodies that read rings are attn_decode_split_merge, flash_prefill_wgmma and flash_prefill_mma");
        if (ring % model::kKvRingAlign != 0 || ring >= (std::int64_t{1} << 31))
          return fail(where + ": " + op->name + " reads a KV ring of " + std::to_string(ring) + " rows, not a multiple of " +
                      std::to_string(model::kKvRingAlign) + " below 2^31 (model/kv_ring.hpp)");
      }
      di.slices = d.slices;
      di.col_parts = static_cast<std::uint32_t>(emit::col_parts(d));
      for (std::size_t j = 0; j < d.ints.size() && j < MET_DEV_INTS; ++j) di.ints[j] = d.ints[j];
      for (std::size_t j = 0; j < d.imms.size() && j < MET_DEV_IMMS; ++j) di.imms[j] = d.imms[j];
      for (std::size_t j = 0; j < d.tensors.size() && j < MET_DEV_OPERANDS; ++j) {
        const auto h = d.tensors[j];
        if (h == MET_NO_TENSOR) continue;
        di.ops[j] = m.tensor[h];
        const auto& t = tensors[h];
        // The matrix weight: the first 2-D checkpoint operand, or an MXFP4 one (its packet shape is
        // the blocks' [experts, rows, cols / 32, 16]), or an expert body's one tensor over every
        // expert ([experts, rows, cols]: Gemma-4's layout 2); its matrix the cpu view's rows x cols,
        // each expert's rows stacked.
        const bool expert_tensor = (op->family == "moe_gemv" || op->family == "moe_gemm") && t.shape.size() == 3;
        if (t.source == MET_SOURCE_CHECKPOINT &&  // t.ref < whost.size(): the tensor loop above holds it
            (t.shape.size() == 2 || expert_tensor || whost[t.ref].format == MET_WEIGHT_MXFP4) && di.w_rows == 0) {
          const MetHostWeight& hw = whost[t.ref];
          di.w_rows = hw.rows;
          di.w_cols = hw.cols;
          di.w_format = static_cast<std::uint32_t>(hw.format);
          if (hw.format == MET_WEIGHT_MXFP4) di.w_scales = wscales[t.ref];  // [w_rows, w_cols / 32] e8m0 bytes
          if (hw.format == MET_WEIGHT_FP8_E4M3) {
            di.w_scales = wscales[t.ref];
            di.w_block_rows = hw.block_rows;
            di.w_block_cols = hw.block_cols;
            di.w_scale_cols = static_cast<std::uint32_t>((hw.cols + hw.block_cols - 1) / hw.block_cols);
            std::uint32_t shift = 0;
            while ((std::int64_t{64} << shift) < hw.block_cols) ++shift;
            di.w_kb_shift = hw.block_cols >= hw.cols ? MET_DEV_KB_WHOLE_ROW : shift;
          }
        }
      }
      // Shapes the bodies cover (kernels/common/*.cuh).
      const bool gemv = op->family == "gemv", gemm = op->family == "gemm";
      const bool fp8_w = di.w_format == MET_DEV_WEIGHT_FP8_E4M3;
      if (fp8_w && !gemv && op->name != "gemm_bf16_mma" && op->name != "gemm_f32")
        return fail(where + ": " + op->name + " reads an fp8 weight; the hopper interpreter's fp8 bodies are the gemv family "
                    "and the mma.sync GEMMs gemm_bf16_mma and gemm_f32 (W8A16)");
      // gpt-oss's experts (layout 1): the bodies read MXFP4 rows; bf16 ones are stored [experts, in, out].
      const bool fused_experts = op->name == "moe_gate_up_swiglu" || op->name == "moe_down_bias" || op->name == "moe_down_bias_f32";
      if ((di.w_format == MET_DEV_WEIGHT_MXFP4) != fused_experts)
        return fail(where + ": " + op->name + (fused_experts ? " reads a weight that is not mxfp4" : " reads an mxfp4 weight") +
                    "; the hopper interpreter reads mxfp4 in gpt-oss's expert bodies (moe_gate_up_swiglu, moe_down_bias) only, and "
                    "those only in mxfp4");
      const bool qkv = emit::int_index(*op, "rotary_dim") >= 0 && emit::tensor_index(*op, "w_qkv") >= 0;
      const std::int64_t rows = d.ints.empty() ? 0 : d.ints[0];
      const std::int64_t row_parts = std::max<std::int64_t>(1, d.slices / std::max<std::uint32_t>(1, di.col_parts));
      const std::int64_t slice_rows = (rows + row_parts - 1) / row_parts;
      // The wgmma GEMMs' last K step reads zeros past K through the tensor maps (16-byte rows); the
      // mma.sync GEMM steps whole MET_GEMM_BK tiles, the gemv family 32-value groups.
      const std::int64_t k_align = gemm ? (op->name.ends_with("_wgmma") ? 8 : MET_GEMM_BK) : 32;
      if ((gemv || gemm) && di.w_cols % k_align != 0)
        return fail(where + ": " + op->name + " needs a reduction length divisible by " + std::to_string(k_align) + ", not " +
                    std::to_string(di.w_cols));
      // The wgmma bodies' TMA views: the GEMM's A (activation rows [in_row0 + rows, K], 128-row
      // boxes) and B (the weight, 3-D: gemm_b_tmap); flash prefill's Q ([rows, q_stride]) and K and V caches
      // ([slots, kv width]) in 64-row boxes, for the head dims that body keeps (the others go to
      // the mma.sync body: met_entry_route_flash_prefill_wgmma).
      auto view = [&](const char* operand, std::int64_t r, std::int64_t c, std::uint32_t box) -> Expected<void> {
        const int ti = emit::tensor_index(*op, operand);
        if (ti < 0 || di.ops[ti] == 0) return fail(where + ": " + op->name + " has no " + operand + " operand");
        auto map = bf16_tmap(*api, di.ops[ti], r, c, box);
        if (!map) return fail(where + ": " + op->name + " " + operand + ": " + map.error().message);
        tmaps.push_back(*map);
        return {};
      };
      auto shape_of = [&](const char* operand) -> std::pair<std::int64_t, std::int64_t> {  // [rows, the rest flattened]
        const int ti = emit::tensor_index(*op, operand);
        if (ti < 0 || d.tensors[ti] == MET_NO_TENSOR || tensors[d.tensors[ti]].shape.size() < 2) return {0, 0};
        const auto& sh = tensors[d.tensors[ti]].shape;
        std::int64_t cols = 1;
        for (std::size_t j = 1; j < sh.size(); ++j) cols *= static_cast<std::int64_t>(sh[j]);
        return {static_cast<std::int64_t>(sh[0]), cols};
      };
      if (gemm && op->name.ends_with("_wgmma")) {
        // A slice is one tile: at most 128 rows and 256 output columns, or 128 for a gated GEMM,
        // whose two B tiles are the gate's and the up's rows of the [2 x dim, K] weight.
        const bool gated = emit::gated_gemm(*op);
        const std::int64_t n_out = gated ? di.w_rows / 2 : di.w_rows, parts = std::max<std::int64_t>(1, di.col_parts);
        const std::int64_t max_cols = gated ? MET_GEMM_TILE : MET_WGMMA_MAX_COLS;
        if (gated && di.w_rows % 2 != 0)
          return fail(where + ": " + op->name + " weight has " + std::to_string(di.w_rows) + " rows; a gated GEMM needs gate and up halves");
        if (slice_rows > MET_GEMM_TILE || (n_out + parts - 1) / parts > max_cols)
          return fail(where + ": " + op->name + " tiles of " + std::to_string(slice_rows) + " x " +
                      std::to_string((n_out + parts - 1) / parts) + "; the body takes at most " + std::to_string(MET_GEMM_TILE) +
                      " x " + std::to_string(max_cols));
        tmap_instr.emplace_back(ins.size(), tmaps.size());
        MET_CHECK(view("x", named_int(*op, d, "in_row0") + rows, di.w_cols, MET_GEMM_TILE));
        auto wmap = gemm_b_tmap(*api, di.ops[emit::tensor_index(*op, "w")], di.w_rows, di.w_cols, gated, di.w_rows / 2);
        if (!wmap) return fail(where + ": " + op->name + " w: " + wmap.error().message);
        tmaps.push_back(*wmap);
        need = std::max<std::uint64_t>(need, MET_WGMMA_SMEM);
      } else if (op->family == "attention_prefill" && op->name.ends_with("_wgmma") &&
                 MET_FLASH_WGMMA_ROUTE(named_int(*op, d, "head_dim"), named_int(*op, d, "heads"),
                                       named_int(*op, d, "kv_heads"))) {
        tmap_instr.emplace_back(ins.size(), tmaps.size());
        const auto kc = shape_of("k_cache"), vc = shape_of("v_cache");
        MET_CHECK(view("q", rows, named_int(*op, d, "q_stride"), 64));
        MET_CHECK(view("k_cache", kc.first, kc.second, 64));
        MET_CHECK(view("v_cache", vc.first, vc.second, 64));
        need = std::max<std::uint64_t>(need, MET_FLASH_WGMMA_SMEM(named_int(*op, d, "head_dim")));
      } else if (gemm) {
        need = std::max<std::uint64_t>(need, fp8_w ? MET_GEMM_FP8_SMEM : MET_GEMM_SMEM);
      }
      const bool grouped_gemm = op->name == "moe_gate_up_silu_wgmma" || op->name == "moe_down_wgmma";
      if (grouped_gemm || op->name == "moe_group" || op->name.starts_with("moe_combine")) {
        // The grouped wgmma experts (ops.def): moe_group's counts by expert in shared memory, its
        // rows copied 16 bytes at a time; the GEMMs' A view over the sorted places and B view over
        // the stacked experts (gemm_b_tmap); moe_combine's ranks by thread.
        const std::int64_t top_k = named_int(*op, d, "top_k"), experts = named_int(*op, d, "experts");
        if (top_k < 1 || top_k > MET_INTERP_THREADS || rows < 0 || rows > INT32_MAX / top_k)
          return fail(where + ": " + op->name + " routes " + std::to_string(rows) + " rows, top_k " + std::to_string(top_k) +
                      "; the bodies take top_k 1 to " + std::to_string(MET_INTERP_THREADS) + " and fewer than 2^31 slots");
        if (op->name == "moe_group") {
          if (experts < 1 || experts > MET_MOE_MAX_EXPERTS || named_int(*op, d, "hidden") % 8 != 0)
            return fail(where + ": moe_group over " + std::to_string(experts) + " experts of " +
                        std::to_string(named_int(*op, d, "hidden")) + " values a row; the body takes 1 to " +
                        std::to_string(MET_MOE_MAX_EXPERTS) + " experts and rows of a multiple of 8");
          need = std::max<std::uint64_t>(need, MET_MOE_GROUP_SMEM);
        } else if (!grouped_gemm) {
          need = std::max<std::uint64_t>(need, MET_MOE_COMBINE_SMEM);
        } else {
          const bool gated = op->name == "moe_gate_up_silu_wgmma";
          const std::int64_t cols = named_int(*op, d, "cols"), parts = std::max<std::int64_t>(1, di.col_parts);
          if (di.w_format != MET_DEV_WEIGHT_BF16 || experts < 1 || cols < 1 || di.w_rows != experts * (gated ? 2 : 1) * cols ||
              di.w_cols % 8 != 0)
            return fail(where + ": " + op->name + " weight [" + std::to_string(di.w_rows) + ", " + std::to_string(di.w_cols) +
                        "] is not " + std::to_string(experts) + " bf16 experts of " + std::to_string((gated ? 2 : 1) * cols) +
                        " rows with a reduction of a multiple of 8");
          if ((cols + parts - 1) / parts > (gated ? MET_GEMM_TILE : MET_WGMMA_MAX_COLS))
            return fail(where + ": " + op->name + " column parts of " + std::to_string((cols + parts - 1) / parts) + "; the body takes at most " +
                        std::to_string(gated ? MET_GEMM_TILE : MET_WGMMA_MAX_COLS));
          tmap_instr.emplace_back(ins.size(), tmaps.size());
          MET_CHECK(view("x", rows * top_k, di.w_cols, MET_GEMM_TILE));
          auto wmap = gemm_b_tmap(*api, di.ops[emit::tensor_index(*op, "w")], di.w_rows, di.w_cols, gated, cols);
          if (!wmap) return fail(where + ": " + op->name + " w: " + wmap.error().message);
          tmaps.push_back(*wmap);
          need = std::max<std::uint64_t>(need, MET_WGMMA_SMEM);
        }
      } else if (op->family == "moe_gemm") {  // kernels/common/moe_mma.cuh: 16-byte cp.async chunks along the reduction
        if (di.w_cols % 8 != 0)
          return fail(where + ": " + op->name + " needs a reduction length divisible by 8, not " + std::to_string(di.w_cols));
        // The slots are grouped in shared memory, whole rows at a time, by expert ids below kMoeNoExpert.
        const std::int64_t top_k = named_int(*op, d, "top_k");
        const std::int64_t per =
            op->name.starts_with("moe_gate_up") ? 2 * named_int(*op, d, "inter") : named_int(*op, d, "hidden");
        const std::int64_t experts = per > 0 ? di.w_rows / per : 0;
        if (top_k < 1 || top_k > MET_MOE_MMA_CHUNK || experts > MET_MOE_MAX_EXPERTS || rows > INT32_MAX / top_k)
          return fail(where + ": " + op->name + " routes " + std::to_string(rows) + " rows, top_k " + std::to_string(top_k) +
                      " of " + std::to_string(experts) + " experts; the body takes top_k 1 to " + std::to_string(MET_MOE_MMA_CHUNK) +
                      ", at most " + std::to_string(MET_MOE_MAX_EXPERTS) + " experts and fewer than 2^31 slots");
        need = std::max<std::uint64_t>(need, MET_MOE_MMA_SMEM);
      }
      if (op->family == "moe_gemv") {  // kernels/common/moe.cuh: 16-byte loads along the reduction, routing in smem
        const std::int64_t top_k = named_int(*op, d, "top_k");
        if (di.w_cols % 8 != 0)
          return fail(where + ": " + op->name + " needs a reduction length divisible by 8, not " + std::to_string(di.w_cols));
        if (top_k < 1 || top_k > MET_MOE_CHUNK)
          return fail(where + ": " + op->name + " top_k " + std::to_string(top_k) + ": the bodies take 1 to " +
                      std::to_string(MET_MOE_CHUNK));
        if (op->name.starts_with("moe_router") && (di.w_rows > MET_MOE_MAX_EXPERTS || top_k > di.w_rows))
          return fail(where + ": " + op->name + " routes " + std::to_string(top_k) + " of " + std::to_string(di.w_rows) +
                      " experts; the body takes at most " + std::to_string(MET_MOE_MAX_EXPERTS));
        // A router split by experts (kernels/common/moe.cuh): one row part, every part a slice (the
        // last of them to arrive chooses), the logits workspace [rows, experts].
        if (op->name.starts_with("moe_router") && di.col_parts > 1) {
          const int li = emit::tensor_index(*op, "logits");
          const bool logits_ok = li >= 0 && d.tensors[li] != MET_NO_TENSOR && tensors[d.tensors[li]].shape.size() == 2 &&
                                 static_cast<std::int64_t>(tensors[d.tensors[li]].shape[0]) >= rows &&
                                 static_cast<std::int64_t>(tensors[d.tensors[li]].shape[1]) == di.w_rows;
          if (d.slices != di.col_parts || di.col_parts > di.w_rows || !logits_ok)
            return fail(where + ": " + op->name + " split into " + std::to_string(di.col_parts) +
                        " expert parts needs one slice a part (" + std::to_string(d.slices) + " slices), at most one part an expert (" +
                        std::to_string(di.w_rows) + ") and a logits workspace of [rows, experts]");
        }
        need = std::max<std::uint64_t>(need, MET_MOE_SMEM);
        // Gemma-4's router keeps its normalised row after the router's buffers.
        if (op->name == "moe_router_scaled")
          need = std::max<std::uint64_t>(need, MET_MOE_ROUTER_SMEM + static_cast<std::uint64_t>(di.w_cols) * 2);
      }
      if (gemv && slice_rows > MET_DEV_MAX_ROWS)
        return fail(where + ": " + op->name + " slices carry " + std::to_string(slice_rows) + " rows; the gemv bodies take at most " +
                    std::to_string(MET_DEV_MAX_ROWS));
      if (gemv && emit::tensor_index(*op, "norm_w") >= 0)
        rows_k = std::max<std::uint64_t>(rows_k, static_cast<std::uint64_t>(slice_rows * di.w_cols));
      else if (gemv && di.w_format == MET_DEV_WEIGHT_FP8_E4M3 && slice_rows <= MET_GEMV_FP8_F16_MAX_ROWS &&
               slice_rows * di.w_cols * 2 <= MET_GEMV_FP8_STAGE_MAX)
        // fp8 weights: the gemv bodies stage a slice's rows as fp16 where the instruction's rows per
        // slice x K x 2 bytes fit MET_GEMV_FP8_STAGE_MAX (gemv.cuh gemv_slice).
        rows_k = std::max<std::uint64_t>(rows_k, static_cast<std::uint64_t>(slice_rows * di.w_cols));
      const std::int64_t hd = named_int(*op, d, "head_dim");
      const std::int64_t vhd = qkv ? hd : named_int(*op, d, "v_head_dim");
      if (qkv || op->family == "attention_decode" || op->family == "attention_prefill") {
        // The fused qkv bodies stage a head of at most 256 dims per warp, and the unfused split
        // keeps its rule's 256; flash prefill, the merge and the fused split-merge take 512.
        const std::int64_t max_hd = qkv || op->name == "attn_decode_split" ? 256 : 512;
        if (hd % 8 != 0 || hd > max_hd || vhd > max_hd)
          return fail(where + ": " + op->name + " head dims " + std::to_string(hd) + "/" + std::to_string(vhd) +
                      ": the body takes multiples of 8 up to " + std::to_string(max_hd));
      }
      if (qkv) {
        // A counter per q and k head, and per v head where the body normalises V (v_norm).
        const std::int64_t ur = named_int(*op, d, "unit_rows"),
                           units = named_int(*op, d, "heads") +
                                   named_int(*op, d, "kv_heads") * (named_int(*op, d, "v_norm") != 0 ? 2 : 1);
        if (hd <= 0 || ur <= 0 || hd % ur != 0)
          return fail(where + ": " + op->name + " unit_rows " + std::to_string(ur) + " does not divide head_dim " +
                      std::to_string(hd));
        if (units < 0 || row_parts > MET_QKV_MAX_COUNTERS / std::max<std::int64_t>(1, units))
          return fail(where + ": " + op->name + " needs " + std::to_string(row_parts) + " x " + std::to_string(units) +
                      " arrival counters; the body has " + std::to_string(MET_QKV_MAX_COUNTERS));
      }
      if (op->family == "attention_prefill") {
        if (hd != vhd || (hd != 32 && hd != 64 && hd != 128 && hd != 256 && hd != 512))
          return fail(where + ": " + op->name + " head dims " + std::to_string(hd) + "/" + std::to_string(vhd) +
                      ": the flash prefill body takes equal q/k and v head dims of 32, 64, 128, 256 or 512");
        need = std::max<std::uint64_t>(need, MET_FLASH_SMEM);
      }
      if (op->name == "attn_decode_split") {
        if (hd <= MET_ATTN_MAX_HD) need = std::max<std::uint64_t>(need, MET_ATTN_SMEM);  // staged (attention_decode.cuh)
        const std::int64_t kvh = named_int(*op, d, "kv_heads"), group = kvh > 0 ? named_int(*op, d, "heads") / kvh : 0;
        if ((vhd != 32 && vhd != 64 && vhd != 128) || (group != 1 && group != 2 && group != 4))
          return fail(where + ": " + op->name + " v_head_dim " + std::to_string(vhd) + " with " + std::to_string(group) +
                      " query heads per KV head: the decode body takes v head dims 32, 64 or 128 and 1, 2 or 4 heads per KV head");
      }
      if (op->name == "attn_decode_split_merge") {
        need = std::max<std::uint64_t>(need, MET_ATTN_SMEM);  // the stages hold the warps' states and the merge's scratch
        const std::int64_t kvh = named_int(*op, d, "kv_heads"), group = kvh > 0 ? named_int(*op, d, "heads") / kvh : 0;
        if ((vhd != 32 && vhd != 64 && vhd != 128 && vhd != 256 && vhd != 512) ||
            (group != 1 && group != 2 && group != 4 && (group < 8 || group % 8 != 0)))
          return fail(where + ": " + op->name + " v_head_dim " + std::to_string(vhd) + " with " + std::to_string(group) +
                      " query heads per KV head: the body takes v head dims 32, 64, 128, 256 or 512 with 1, 2, 4 or a "
                      "multiple of 8 heads per KV head");
        const std::int64_t splits = named_int(*op, d, "splits"), arows = named_int(*op, d, "rows");
        const auto has = [&](const char* t) { return d.tensors[static_cast<std::size_t>(emit::tensor_index(*op, t))] != MET_NO_TENSOR; };
        if (splits > 1 && (!has("part_o") || !has("part_ml")))
          return fail(where + ": " + op->name + " with " + std::to_string(splits) + " splits has no part_o / part_ml state");
        if (splits < 1 || splits > MET_ATTN_MAX_SPLITS)
          return fail(where + ": " + op->name + " merges " + std::to_string(splits) + " splits; the body takes 1 to " +
                      std::to_string(MET_ATTN_MAX_SPLITS));
        const std::int64_t blocks = MET_ATTN_UNIT_BLOCKS(named_int(*op, d, "heads"), kvh);  // a counter per (row, head block)
        if (arows < 0 || blocks < 1 || arows > MET_ATTN_MAX_COUNTERS / blocks)
          return fail(where + ": " + op->name + " needs " + std::to_string(arows) + " x " + std::to_string(blocks) +
                      " arrival counters; the body has " + std::to_string(MET_ATTN_MAX_COUNTERS));
      }
      if (emit::k_parts(d) > 1) {  // a split K (kernels/hopper/gemm_wgmma.cuh)
        const std::int64_t S = emit::k_parts(d);
        if (!emit::splits_k(*op))
          return fail(where + ": " + op->name + " splits K " + std::to_string(S) + " ways; only the bf16 wgmma GEMMs split K");
        if (S > MET_GEMM_MAX_KSPLITS || d.slices % S != 0 || d.slices / S > MET_GEMM_SPLIT_TILES)
          return fail(where + ": " + op->name + " splits K " + std::to_string(S) + " ways over " + std::to_string(d.slices) +
                      " slices; the body takes at most " + std::to_string(MET_GEMM_MAX_KSPLITS) + " parts of at most " +
                      std::to_string(MET_GEMM_SPLIT_TILES) + " tiles, every tile in each");
        if (d.tensors[static_cast<std::size_t>(emit::tensor_index(*op, "part"))] == MET_NO_TENSOR)
          return fail(where + ": " + op->name + " splits K " + std::to_string(S) + " ways and has no part buffer");
      }
      if (op->name == "attn_decode_merge" && named_int(*op, d, "splits") > MET_MERGE_MAX_SPLITS)
        return fail(where + ": " + op->name + " merges " + std::to_string(named_int(*op, d, "splits")) +
                    " splits; the body takes at most " + std::to_string(MET_MERGE_MAX_SPLITS));
      if (op->name == "embed" && di.w_cols % 8 != 0)
        return fail(where + ": embed width " + std::to_string(di.w_cols) + " is not a multiple of 8");
      // A tensor-parallel packet's rank 0 loaded alone (optest) keeps its collectives without peers
      // records: they never run (run_instruction refuses them, run() every step).
      if (is_collective(d.opcode) && !(plan == nullptr && pf.tp_ranks > 1)) {
        // The peers operand: this rank's MetDevPeers record (kernels/common/interp/abi.h), whose
        // window and offset reach every rank's copy of the buffer.
        if (!plan)
          return fail(where + ": " + op->name +
                      " is a collective in a packet of one rank (tp_ranks 1): emit without --tp has none");
        if (next_collective >= plan->programs[k].size() || plan->programs[k][next_collective].instr != i)
          return fail(where + ": " + op->name + " is not the collective the plan expects here");
        const auto& c = plan->programs[k][next_collective];
        di.ops[c.peers_operand] = peers_dev + next_collective * sizeof(MetDevPeers);
        ++next_collective;
      }
      ins.push_back(di);
    }
    std::vector<MetDevStream> st;
    std::vector<MetDevEntry> en;
    std::vector<MetDevWait> wt;
    for (const auto& s : p.streams) {
      st.push_back({static_cast<std::uint32_t>(en.size()), static_cast<std::uint32_t>(s.size())});
      for (const auto& e : s) {
        en.push_back({e.instr, e.slice, static_cast<std::uint32_t>(wt.size()), static_cast<std::uint32_t>(e.waits.size())});
        prog.entry_instr.push_back(e.instr);
        for (const auto& x : e.waits) wt.push_back({x.counter, x.value});
      }
    }
    if (st.size() != static_cast<std::size_t>(m.sms))
      return fail(at + ": program " + p.name + " has " + std::to_string(st.size()) + " streams for " + std::to_string(m.sms) +
                  " SMs");
    if (!tmaps.empty()) {
      MET_TRY(cu::DevicePtr tm, m.upload_vec(tmaps));
      for (const auto& [i, first] : tmap_instr) ins[i].tmaps = tm + first * sizeof(cu::TensorMap);
    }
    need = std::max<std::uint64_t>(need, kGemvFixedSmem + rows_k * 2);
    if (need > static_cast<std::uint64_t>(m.smem_optin))
      return fail(at + ": program " + p.name + ": the bodies would use " + std::to_string(need) +
                  " bytes of shared memory (the gemv bodies stage " + std::to_string(rows_k) + " normalised activations); " +
                  m.dev_name + " allows " + std::to_string(m.smem_optin));
    // Exactly the largest need of the program's bodies, never more: L1 is what shared memory
    // leaves, and it holds the gemv bodies' loads in flight (with the whole 227 KB taken every gemv
    // op of the H200 ran 30-50% slower; docs/arch/interpreter.md).
    prog.smem = static_cast<unsigned>(need);
    max_smem = std::max(max_smem, need);
    prog.host_instrs = ins;
    prog.n_instrs = static_cast<std::uint32_t>(ins.size());
    prog.n_entries = static_cast<std::uint32_t>(en.size());
    MET_TRY(prog.instrs, m.upload_vec(ins));
    MET_TRY(prog.streams, m.upload_vec(st));
    MET_TRY(prog.entries, m.upload_vec(en));
    MET_TRY(prog.waits, m.upload_vec(wt));
    MET_TRY(prog.counters, m.alloc(std::max<std::size_t>(1, ins.size()) * 4));
    MET_TRY(prog.stamps, m.alloc(std::max<std::size_t>(1, en.size()) * 16));
  }

  MET_CU(*api, FuncSetAttribute(m.fn, cu::kFuncMaxDynamicSmem, static_cast<int>(max_smem)));
  int blocks = 0;
  MET_CU(*api, OccupancyMaxActiveBlocksPerMultiprocessor(&blocks, m.fn, MET_INTERP_THREADS, max_smem));
  if (blocks < 1) return fail("cuda: the interpreter (" + std::to_string(MET_INTERP_THREADS) + " threads, " +
                              std::to_string(max_smem) + " bytes of shared memory) does not fit on one SM of " + m.dev_name);
  return {};
}
}  // namespace

struct CudaBackend::Impl {
  const cu::Api* api = nullptr;
  std::vector<std::unique_ptr<DeviceRank>> ranks;  // rank r on device r; one without --tp
  RankComms nccl;
  CollectivePlan collectives;  // empty without --tp
  bool fetch_logits = true, stamps = false;
  bool first_rank_only = false;  // a TP emit's rank 0 alone (optest): no whole step runs
  float last_ms = 0;

  // Binds rank r's context where more than one rank exists (a single rank was bound on entry).
  Expected<void> switch_to(std::size_t r) const {
    if (ranks.size() > 1) MET_CHECK(ranks[r]->bind());
    return {};
  }
  // NCCL's own calls may leave another device's context current: every rank's teardown binds its
  // own. Order: device memory, the NCCL objects over the arenas, then the contexts.
  ~Impl() {
    for (auto& rk : ranks) rk->release_memory();
    release_nccl();
    for (auto& rk : ranks) rk->release_device();
  }
  void release_nccl() {
    const nccl::Api* n = nccl.api;
    if (!n) return;
    auto on = [&](std::size_t r) {
      if (r < ranks.size() && ranks[r]->ctx) api->CtxSetCurrent(ranks[r]->ctx);
    };
    if (!nccl.dev.empty()) (void)nccl::dev_comms_destroy(*n, nccl.comms, nccl.dev);
    if (!nccl.windows.empty()) {
      n->GroupStart();
      for (std::size_t r = 0; r < nccl.windows.size(); ++r)
        if (nccl.windows[r]) n->CommWindowDeregister(nccl.comms[r], nccl.windows[r]);
      n->GroupEnd();
    }
    for (std::size_t r = 0; r < nccl.arenas.size(); ++r)
      if (nccl.arenas[r]) {
        on(r);
        n->MemFree(nccl.arenas[r]);
      }
    for (auto c : nccl.comms)
      if (c) n->CommDestroy(c);
    nccl = RankComms{};
  }
};

CudaBackend::CudaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaBackend::~CudaBackend() = default;

namespace {

// "rank r of N (device r): " before a rank's error, under --tp only.
Expected<void> on_rank(std::size_t ranks, std::size_t r, Expected<void> e) {
  if (e.ok() || ranks == 1) return e;
  return fail("cuda: rank " + std::to_string(r) + " of " + std::to_string(ranks) + " (device " + std::to_string(r) +
              "): " + e.error().message);
}

// The ranks' NCCL objects: the communicators (one process, device r for rank r), each rank's arena
// from ncclMemAlloc, registered as one symmetric window of the same size everywhere, and the device
// communicators with the plan's LSA barriers. Each is kept in `c` as soon as it exists, so a
// failure part way releases what was made (Impl::release_nccl).
Expected<void> open_comms(const std::vector<std::unique_ptr<DeviceRank>>& rks, RankComms& c, const nccl::Api& n,
                          const CollectivePlan& plan) {
  const int ranks = static_cast<int>(rks.size());
  c.api = &n;
  c.window_bytes = plan.window_bytes;
  std::vector<int> devices(rks.size());
  for (int r = 0; r < ranks; ++r) devices[static_cast<std::size_t>(r)] = r;
  std::vector<nccl::Comm> comms(rks.size(), nullptr);
  MET_NCCL(n, CommInitAll(comms.data(), ranks, devices.data()));
  c.comms = comms;
  for (std::size_t r = 0; r < rks.size(); ++r) {
    MET_CHECK(rks[r]->bind());  // ncclMemAlloc allocates on the current device
    void* arena = nullptr;
    const auto alloc = [&]() -> Expected<void> {
      MET_NCCL(n, MemAlloc(&arena, plan.window_bytes));
      return {};
    };
    MET_CHECK(on_rank(rks.size(), r, alloc()));
    c.arenas.push_back(arena);
    rks[r]->held += plan.window_bytes;
  }
  // Window registration and the device communicators are collective: one group over the ranks.
  std::vector<nccl::Window> windows(rks.size(), nullptr);
  MET_NCCL(n, GroupStart());
  nccl::Result first = 0;
  std::size_t first_rank = 0;
  for (std::size_t r = 0; r < rks.size(); ++r) {
    const nccl::Result x = n.CommWindowRegister(comms[r], c.arenas[r], plan.window_bytes, &windows[r], nccl::kWinCollSymmetric);
    if (x != 0 && first == 0) first = x, first_rank = r;
  }
  MET_NCCL(n, GroupEnd());
  if (first != 0)
    return on_rank(
        rks.size(), first_rank,
        fail(nccl::describe(n, first, "CommWindowRegister(comm, arena, window_bytes, &window, NCCL_WIN_COLL_SYMMETRIC)")));
  c.windows = windows;
  MET_TRY(c.dev, nccl::dev_comms_create(n, comms, static_cast<int>(plan.lsa_barriers)));
  return {};
}

// Every rank's program k has rank 0's IO inputs, of the same sizes: the host fills rank 0's and
// run() copies them to every rank.
Expected<void> check_rank_io(const DeviceRank& r0, const DeviceRank& rk) {
  for (std::size_t k = 0; k < r0.progs.size(); ++k)
    for (std::uint32_t field = 0; field < emit::kIoFields; ++field) {
      const auto f = static_cast<emit::IoField>(field);
      if (!emit::io_input(f)) continue;
      const auto a = r0.progs[k].io.find(f), b = rk.progs[k].io.find(f);
      const bool in_a = a != r0.progs[k].io.end(), in_b = b != rk.progs[k].io.end();
      if (in_a != in_b || (in_a && a->second.bytes != b->second.bytes))
        return fail(rk.file + ": program " + rk.packet->programs[k].name + ": io field " + emit::io_field_name(f) +
                    (in_a && in_b
                         ? " is " + std::to_string(b->second.bytes) + " bytes; model.pkt's is " + std::to_string(a->second.bytes)
                         : std::string(in_a ? " is missing" : " is not in model.pkt")));
    }
  return {};
}

}  // namespace

Expected<std::unique_ptr<CudaBackend>> CudaBackend::create(const Assets& a, bool first_rank_only) {
  const std::string at = a.dir + "/model.pkt";
  if (a.packet.target_class != "hopper")
    return fail(a.dir + " were emitted for class '" + a.packet.target_class +
                "'; the cuda backend runs the hopper interpreter (emit for h100-sxm or h200-sxm)");
  // Tensor parallelism: rank r's packet on device r. What can be checked without a GPU comes first:
  // the ranks' collectives must pair, and NCCL must be there.
  const std::size_t ranks = a.packet.tp_ranks;
  std::vector<const emit::PacketFile*> files{&a.packet};
  for (const auto& p : a.other_ranks) files.push_back(&p);
  if (ranks < 1 || files.size() != ranks)
    return fail(at + ": rank 0 of " + std::to_string(ranks) + " tensor-parallel ranks, but " + std::to_string(files.size()) +
                " rank packets were loaded");
  if (ranks > MET_DEV_MAX_RANKS)
    return fail(at + ": emitted for " + std::to_string(ranks) +
                " tensor-parallel ranks; the interpreter's collectives take at most " + std::to_string(MET_DEV_MAX_RANKS) +
                " (MET_DEV_MAX_RANKS)");
  // optest of a tensor-parallel emit: rank 0's packet alone, its collectives never run (it skips
  // them), so neither NCCL nor a second GPU; every weight entry is uploaded (plan: null).
  const std::size_t loaded = first_rank_only ? 1 : ranks;
  files.resize(loaded);
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.first_rank_only = first_rank_only && ranks > 1;
  const nccl::Api* nccl_api = nullptr;
  if (loaded > 1) {
    MET_TRY(m.collectives, plan_collectives(files, a.dir));
    MET_TRY(nccl_api, nccl::api());
  }
  InterpImage image = hopper_interp_image();
  // Development override for A/B runs of interpreter bodies (bench/interp_variants.sh): a cubin
  // built from the same tree with other compile-time choices. The markers below still decide
  // which instructions it may run; the shared-memory layout (smem.h) must be this met's.
  std::vector<unsigned char> override_image;
  if (const char* path = std::getenv("MET_INTERP_CUBIN"); path && *path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(std::string("MET_INTERP_CUBIN: cannot read ") + path);
    override_image.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (override_image.empty()) return fail(std::string("MET_INTERP_CUBIN: ") + path + " is empty");
    image = {override_image.data(), override_image.size()};
    std::fprintf(stderr, "met: cuda interpreter image from MET_INTERP_CUBIN=%s\n", path);
  }
  if (image.size == 0)
    return fail("cuda: this met was built without nvcc, so it carries no hopper interpreter; rebuild where nvcc is on PATH");
  MET_TRY(const cu::Api* api, cu::api());
  m.api = api;
  int count = 0;
  MET_CU(*api, DeviceGetCount(&count));
  if (count < 1) return fail("cuda: the driver sees no GPU");
  if (static_cast<std::size_t>(count) < loaded)
    return fail(a.dir + " were emitted for " + std::to_string(ranks) + " tensor-parallel ranks, one GPU each; the driver sees " +
                std::to_string(count) + " GPU" + (count == 1 ? "" : "s") + " (CUDA_VISIBLE_DEVICES may hide some)");
  for (std::size_t r = 0; r < loaded; ++r) {
    m.ranks.push_back(std::make_unique<DeviceRank>());
    DeviceRank& rk = *m.ranks.back();
    rk.api = api;
    rk.rank = static_cast<std::uint32_t>(r);
    rk.file = r == 0 ? at : a.dir + "/" + rank_packet_name(static_cast<int>(r));
    MET_CHECK(on_rank(ranks, r, open_device(rk, *files[r], a.dir, image)));
  }
  if (loaded > 1) MET_CHECK(open_comms(m.ranks, m.nccl, *nccl_api, m.collectives));
  MET_TRY(LoadedWeights w, LoadedWeights::load(a.weights, a.checkpoint_dir));
  for (std::size_t r = 0; r < loaded; ++r) {
    DeviceRank& rk = *m.ranks[r];
    std::vector<std::vector<MetDevPeers>> peers;
    cu::DevicePtr arena = 0;
    std::uint64_t arena_bytes = 0;
    if (loaded > 1) {
      // This rank's device communicator in device memory, and one record per collective.
      MET_CHECK(rk.bind());
      const auto& dc = m.nccl.dev[r].bytes;
      auto comm = rk.upload(dc.data(), dc.size());
      if (!comm.ok()) return on_rank(ranks, r, fail(comm.error().message)).error();
      for (std::size_t k = 0; k < m.collectives.programs.size(); ++k)
        peers.push_back(peers_records(m.collectives, k, static_cast<std::uint32_t>(ranks), rk.rank,
                                      reinterpret_cast<std::uint64_t>(m.nccl.windows[r]), *comm));
      arena = reinterpret_cast<cu::DevicePtr>(m.nccl.arenas[r]);
      arena_bytes = m.nccl.window_bytes;
    }
    MET_CHECK(on_rank(ranks, r, load_rank(rk, a, *files[r], w, arena, arena_bytes, loaded > 1 ? &m.collectives : nullptr, peers)));
    if (r > 0) MET_CHECK(check_rank_io(*m.ranks[0], rk));
  }
  if (loaded > 1) MET_CHECK(m.ranks[0]->bind());
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(impl)));
}

void* CudaBackend::io(std::size_t program, emit::IoField field) {
  auto& r0 = *impl_->ranks[0];
  if (program >= r0.progs.size()) return nullptr;
  auto& io = r0.progs[program].io;
  auto it = io.find(field);
  return it == io.end() ? nullptr : it->second.host.data();
}

// A step on every rank: the inputs the host filled (rank 0's host copies) go to every rank, the
// ranks' launches are issued back to back on their streams, then every stream is waited for; the
// outputs come from rank 0 (the gather made its logits whole). One rank: one bind, one launch.
Expected<void> CudaBackend::run(std::size_t program) {
  Impl& m = *impl_;
  const cu::Api& api = *m.api;
  DeviceRank& r0 = *m.ranks[0];
  if (program >= r0.progs.size()) return fail("cuda backend: no program " + std::to_string(program));
  if (m.first_rank_only)
    return fail("cuda backend: rank 0 of a tensor-parallel emit was loaded alone (optest); a step needs every rank");
  MET_CHECK(r0.bind());
  MET_CHECK(check_step_io(r0.packet->programs[program], r0.progs[program].bounds,
                          static_cast<const std::int64_t*>(io(program, emit::IoField::slots)),
                          static_cast<const std::int64_t*>(io(program, emit::IoField::ring_slots))));
  auto& io0 = r0.progs[program].io;
  for (std::size_t r = 0; r < m.ranks.size(); ++r) {
    MET_CHECK(m.switch_to(r));
    DeviceRank& rk = *m.ranks[r];
    auto& p = rk.progs[program];
    for (auto& [field, io] : p.io)
      if (emit::io_input(field)) {
        const auto& host = r == 0 ? io.host : io0.at(field).host;  // equal sizes: check_rank_io
        MET_CU(api, MemcpyHtoD(io.dev, host.data(), host.size()));
      }
    MET_CU(api, MemsetD32Async(p.counters, 0, std::max<std::uint32_t>(1, p.n_instrs), rk.stream));
  }
  for (std::size_t r = 0; r < m.ranks.size(); ++r) {
    MET_CHECK(m.switch_to(r));
    DeviceRank& rk = *m.ranks[r];
    const auto& p = rk.progs[program];
    MetInterpParams params{};
    params.instrs = reinterpret_cast<const MetDevInstr*>(p.instrs);
    params.streams = reinterpret_cast<const MetDevStream*>(p.streams);
    params.entries = reinterpret_cast<const MetDevEntry*>(p.entries);
    params.waits = reinterpret_cast<const MetDevWait*>(p.waits);
    params.counters = reinterpret_cast<unsigned int*>(p.counters);
    params.stamps = m.stamps ? reinterpret_cast<unsigned long long*>(p.stamps) : nullptr;
    MET_CHECK(on_rank(m.ranks.size(), r, rk.issue(params, p.smem)));
  }
  m.last_ms = 0;
  for (std::size_t r = 0; r < m.ranks.size(); ++r) {
    MET_CHECK(m.switch_to(r));
    MET_CHECK(on_rank(m.ranks.size(), r, m.ranks[r]->wait()));
    m.last_ms = std::max(m.last_ms, m.ranks[r]->last_ms);
  }
  MET_CHECK(m.switch_to(0));
  for (auto& [field, io] : io0) {
    if (field == emit::IoField::out_tokens || field == emit::IoField::sampled_tokens ||
        (field == emit::IoField::logits && m.fetch_logits))
      MET_CU(api, MemcpyDtoH(io.host.data(), io.dev, io.host.size()));
  }
  if (m.stamps)
    for (std::size_t r = 0; r < m.ranks.size(); ++r) {
      MET_CHECK(m.switch_to(r));
      auto& p = m.ranks[r]->progs[program];
      p.stamps_host.assign(2 * static_cast<std::size_t>(p.n_entries), 0);
      MET_CU(api, MemcpyDtoH(p.stamps_host.data(), p.stamps, p.stamps_host.size() * sizeof(unsigned long long)));
    }
  return {};
}

Expected<void> CudaBackend::reset_kv() {
  for (auto& rk : impl_->ranks) {
    MET_CHECK(rk->bind());
    for (auto i : rk->kv) MET_CU(*impl_->api, MemsetD8(rk->tensor[i], 0, rk->packet->tensors[i].bytes));
  }
  return {};
}

void CudaBackend::set_fetch_logits(bool on) { impl_->fetch_logits = on; }
void CudaBackend::set_timestamps(bool on) { impl_->stamps = on; }
float CudaBackend::last_run_ms() const { return impl_->last_ms; }
std::size_t CudaBackend::ranks() const { return impl_->ranks.size(); }
float CudaBackend::rank_run_ms(std::size_t rank) const { return impl_->ranks.at(rank)->last_ms; }
std::string CudaBackend::device_name() const { return impl_->ranks[0]->dev_name; }
GpuFacts CudaBackend::gpu(std::size_t rank) const { return impl_->ranks.at(rank)->facts; }

Expected<std::vector<GpuFacts>> query_gpus() {
  MET_TRY(const cu::Api* api, cu::api());
  int count = 0;
  MET_CU(*api, DeviceGetCount(&count));
  std::vector<GpuFacts> out;
  for (int i = 0; i < count; ++i) {
    cu::Device dev{};
    MET_CU(*api, DeviceGet(&dev, i));
    char name[256] = {};
    GpuFacts g;
    MET_CU(*api, DeviceGetName(name, sizeof name, dev));
    g.name = name;
    MET_CU(*api, DeviceGetAttribute(&g.sms, cu::kAttrMultiprocessorCount, dev));
    MET_CU(*api, DeviceGetAttribute(&g.compute_major, cu::kAttrComputeMajor, dev));
    MET_CU(*api, DeviceGetAttribute(&g.compute_minor, cu::kAttrComputeMinor, dev));
    std::size_t total = 0;
    MET_CU(*api, DeviceTotalMem(&total, dev));
    g.total_bytes = total;
    out.push_back(std::move(g));
  }
  return out;
}
std::uint64_t CudaBackend::device_bytes() const {
  std::uint64_t held = 0;
  for (const auto& rk : impl_->ranks) held += rk->held;
  return held;
}

std::vector<double> CudaBackend::instr_times_ns(std::size_t program, std::size_t rank) const {
  const auto& p = impl_->ranks.at(rank)->progs.at(program);
  std::vector<unsigned long long> first(p.n_instrs, ~0ull), last(p.n_instrs, 0);
  for (std::size_t e = 0; e < p.entry_instr.size() && 2 * e + 1 < p.stamps_host.size(); ++e) {
    const auto i = p.entry_instr[e];
    first[i] = std::min(first[i], p.stamps_host[2 * e]);
    last[i] = std::max(last[i], p.stamps_host[2 * e + 1]);
  }
  std::vector<double> out(p.n_instrs, 0.0);
  for (std::size_t i = 0; i < out.size(); ++i)
    if (last[i] >= first[i] && first[i] != ~0ull) out[i] = static_cast<double>(last[i] - first[i]);
  return out;
}

std::vector<CudaBackend::SliceTimes> CudaBackend::slice_times_ns(std::size_t program, std::size_t rank) const {
  const auto& p = impl_->ranks.at(rank)->progs.at(program);
  std::vector<unsigned long long> first(p.n_instrs, ~0ull), last(p.n_instrs, 0);
  std::vector<double> sum(p.n_instrs, 0.0);
  std::vector<std::size_t> n(p.n_instrs, 0);
  for (std::size_t e = 0; e < p.entry_instr.size() && 2 * e + 1 < p.stamps_host.size(); ++e) {
    const auto i = p.entry_instr[e];
    const auto t0 = p.stamps_host[2 * e], t1 = p.stamps_host[2 * e + 1];
    if (t1 < t0) continue;
    first[i] = std::min(first[i], t0);
    last[i] = std::max(last[i], t0);
    sum[i] += static_cast<double>(t1 - t0);
    ++n[i];
  }
  std::vector<SliceTimes> out(p.n_instrs);
  for (std::size_t i = 0; i < out.size(); ++i)
    if (n[i] > 0) out[i] = {sum[i] / static_cast<double>(n[i]), static_cast<double>(last[i] - first[i])};
  return out;
}

namespace {
Expected<cu::DevicePtr> harness_tensor(const emit::PacketFile& f, const std::vector<cu::DevicePtr>& dev, std::size_t h,
                                       std::uint64_t bytes) {
  if (h >= f.tensors.size()) return fail("cuda backend: no tensor " + std::to_string(h));
  const auto& t = f.tensors[h];
  if (t.source != MET_SOURCE_SCRATCH && t.source != MET_SOURCE_KV && t.source != MET_SOURCE_IO)
    return fail("cuda backend: tensor '" + t.name + "' is not scratch, KV or IO");
  if (bytes != t.bytes) return fail("cuda backend: tensor '" + t.name + "' holds " + std::to_string(t.bytes) + " bytes, not " + std::to_string(bytes));
  return dev[h];
}
}  // namespace

Expected<void> CudaBackend::write_tensor(std::size_t h, const void* data, std::uint64_t bytes) {
  DeviceRank& m = *impl_->ranks[0];
  MET_CHECK(m.bind());
  MET_TRY(cu::DevicePtr p, harness_tensor(*m.packet, m.tensor, h, bytes));
  MET_CU(*m.api, MemcpyHtoD(p, data, bytes));
  // IO inputs are uploaded from the host copy by run(): keep it equal.
  for (auto& prog : m.progs)
    for (auto& [field, io] : prog.io)
      if (io.dev == p && io.host.size() == bytes) std::memcpy(io.host.data(), data, bytes);
  return {};
}

Expected<void> CudaBackend::read_tensor(std::size_t h, void* data, std::uint64_t bytes) {
  DeviceRank& m = *impl_->ranks[0];
  MET_CHECK(m.bind());
  MET_TRY(cu::DevicePtr p, harness_tensor(*m.packet, m.tensor, h, bytes));
  MET_CU(*m.api, MemcpyDtoH(data, p, bytes));
  return {};
}

// One instruction as a program of its own: its slices spread over the streams, no waits.
Expected<void> CudaBackend::run_instruction(std::size_t program, std::size_t instr) {
  DeviceRank& m = *impl_->ranks[0];
  MET_CHECK(m.bind());
  if (program >= m.progs.size() || instr >= m.progs[program].host_instrs.size())
    return fail("cuda backend: no instruction " + std::to_string(instr) + " in program " + std::to_string(program));
  // Under --tp one instruction runs on rank 0 alone (the harness fills and reads rank 0's tensors);
  // a collective would wait at its barrier for ranks that never come.
  if ((impl_->ranks.size() > 1 || impl_->first_rank_only) && is_collective(m.packet->programs[program].instrs[instr].opcode))
    return fail("cuda backend: " + m.file + ": program " + m.packet->programs[program].name + " instruction " +
                std::to_string(instr) + " is a collective; it runs only in a step of every rank (met circuit run), not alone");
  const MetDevInstr& in = m.progs[program].host_instrs[instr];
  const std::uint32_t sm = m.packet->sm_count;
  std::vector<std::vector<MetDevEntry>> per(sm);
  for (std::uint32_t s = 0; s < in.slices; ++s) per[s % sm].push_back({0, s, 0, 0});
  std::vector<MetDevStream> st;
  std::vector<MetDevEntry> en;
  for (const auto& p : per) {
    st.push_back({static_cast<std::uint32_t>(en.size()), static_cast<std::uint32_t>(p.size())});
    en.insert(en.end(), p.begin(), p.end());
  }
  const std::size_t mark = m.allocs.size();
  const std::uint64_t held = m.held;
  auto release = [&] {
    for (std::size_t i = mark; i < m.allocs.size(); ++i) m.api->MemFree(m.allocs[i]);
    m.allocs.resize(mark);
    m.held = held;
  };
  auto go = [&]() -> Expected<void> {
    MET_TRY(cu::DevicePtr di, m.upload(&in, sizeof in));
    MET_TRY(cu::DevicePtr ds, m.upload_vec(st));
    MET_TRY(cu::DevicePtr de, m.upload_vec(en));
    MET_TRY(cu::DevicePtr dc, m.alloc(16));
    MET_CU(*m.api, MemsetD32Async(dc, 0, 4, m.stream));
    MetInterpParams params{};
    params.instrs = reinterpret_cast<const MetDevInstr*>(di);
    params.streams = reinterpret_cast<const MetDevStream*>(ds);
    params.entries = reinterpret_cast<const MetDevEntry*>(de);
    params.waits = reinterpret_cast<const MetDevWait*>(dc);
    params.counters = reinterpret_cast<unsigned int*>(dc);
    return m.launch(params, m.progs[program].smem);
  };
  auto r = go();
  release();
  return r;
}

}  // namespace met::interp
