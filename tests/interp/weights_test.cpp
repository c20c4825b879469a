// LoadedWeights (src/interp/weights.cpp) on synthetic checkpoints written to a temporary directory:
// entry bytes equal the checkpoint tensors, fused fp8 scales decode every row with its own block's
// scale, and a missing, truncated or changed checkpoint is refused with the tensor named.
#include <doctest/doctest.h>

#include <unistd.h>

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "emit/weights_manifest.hpp"
#include "interp/weights.hpp"
#include "model/checkpoint.hpp"
#include "model/instantiate.hpp"
#include "model/synth.hpp"
#include "tree/disk_tree.hpp"

namespace {

using namespace met;
namespace fs = std::filesystem;

const DiskTree& tree() {
  static DiskTree t(std::string(MET_SOURCE_DIR) + "/kernels", "kernels/");
  return t;
}

const std::map<std::string, model::Circuit>& circuits() {
  static const auto c = [] {
    auto r = model::load_circuits(tree());
    REQUIRE(r.ok());
    return std::move(r).value();
  }();
  return c;
}

// A synthetic checkpoint on disk, removed when the test ends.
struct TempCheckpoint {
  fs::path dir;
  model::SynthPlan plan;
  TempCheckpoint(const std::string& fixture, Format dtype, std::uint64_t shard_bytes,
                 model::Fp8Layout layout = model::Fp8Layout::block128)
      : TempCheckpoint(fixture, config_of(fixture), dtype, shard_bytes, layout) {}
  // A checkpoint of another config (config.json's text), named `name`.
  TempCheckpoint(const std::string& name, const std::string& config, Format dtype, std::uint64_t shard_bytes,
                 model::Fp8Layout layout = model::Fp8Layout::block128) {
    static int counter = 0;
    dir = fs::temp_directory_path() / ("met-weights-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto p = model::plan_synth(circuits(), config, name, model::SynthOptions{21, dtype, layout});
    REQUIRE(p.ok());
    plan = *p;
    auto files = model::synth_files(plan, shard_bytes);
    REQUIRE(files.ok());
    for (const auto& [file, bytes] : *files) {
      std::ofstream out(dir / file, std::ios::binary);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
  }
  ~TempCheckpoint() { fs::remove_all(dir); }
  static std::string config_of(const std::string& fixture) {
    DiskCheckpoint d(std::string(MET_SOURCE_DIR) + "/tests/model/fixtures/" + fixture);
    auto cfg = d.read("config.json");
    REQUIRE(cfg.ok());
    return *cfg;
  }
  emit::WeightsManifest manifest() const {
    DiskCheckpoint src(dir.string());
    auto g = model::instantiate_checkpoint(tree(), circuits(), src);
    REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));
    auto m = emit::build_weights_manifest(circuits().at(g->circuit), *g, src, dir.string());
    REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
    return *m;
  }
  std::string tensor(const std::string& name) const {
    for (std::size_t t = 0; t < plan.tensors.size(); ++t) {
      if (plan.tensors[t].name != name) continue;
      std::string b(plan.tensors[t].bytes, '\0');
      model::synth_bytes(plan, t, 0, std::span<std::byte>(reinterpret_cast<std::byte*>(b.data()), b.size()));
      return b;
    }
    FAIL("no tensor " << name);
    return "";
  }
};

std::string bytes_of(const std::byte* p, std::uint64_t n) { return std::string(reinterpret_cast<const char*>(p), n); }

std::uint64_t elems_of(const std::vector<std::uint64_t>& shape) {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

}  // namespace

TEST_CASE("every entry's bytes are its parts concatenated; only fused entries are copied (catches a fused entry that reads only its first part)") {
  TempCheckpoint ck("tiny-llama", Format::bf16, /*shard_bytes=*/40'000);
  const auto m = ck.manifest();
  auto w = interp::LoadedWeights::load(m, ck.dir.string());
  REQUIRE_MESSAGE(w.ok(), (w.ok() ? "" : w.error().message));
  REQUIRE(w->size() == m.tensors.size());
  std::uint64_t fused = 0;
  for (std::size_t e = 0; e < w->size(); ++e) {
    const auto& entry = m.tensors[e];
    CAPTURE(entry.name);
    std::string want;
    for (const auto& p : entry.parts) want += ck.tensor(p.tensor);
    CHECK(bytes_of(w->data(e), w->bytes(e)) == want);
    CHECK(w->scales(e) == nullptr);
    if (entry.parts.size() > 1) fused += w->bytes(e);
  }
  CHECK(w->owned_bytes() == fused);
  const auto qkv = w->find("model.layers.1.self_attn.qkv");
  REQUIRE(qkv);
  auto h = w->host_weight(*qkv);
  REQUIRE(h.ok());
  CHECK(h->format == MET_WEIGHT_BF16);
  CHECK(h->rows == 128);
  CHECK(h->cols == 64);
  auto norm = w->host_weight(*w->find("model.norm.weight"));
  REQUIRE(norm.ok());
  CHECK(norm->rows == 1);
  CHECK(norm->cols == 64);
}

TEST_CASE("fused fp8 q/k/v decode each row with its own part's block scale (catches scales stacked across a block boundary)") {
  for (const char* fixture : {"tiny-llama", "tiny-qwen3"}) {  // q rows 64 / 128, k and v rows 32 / 64
    CAPTURE(fixture);
    TempCheckpoint ck(fixture, Format::fp8_e4m3, model::kDefaultShardBytes);
    const auto m = ck.manifest();
    auto w = interp::LoadedWeights::load(m, ck.dir.string());
    REQUIRE_MESSAGE(w.ok(), (w.ok() ? "" : w.error().message));
    const auto e = *w->find("model.layers.0.self_attn.qkv");
    auto h = w->host_weight(e);
    REQUIRE(h.ok());
    CHECK(h->format == MET_WEIGHT_FP8_E4M3);
    std::vector<float> got(static_cast<std::size_t>(h->cols));
    std::int64_t row0 = 0;
    for (const auto& part : m.tensors[e].parts) {
      const std::string data = ck.tensor(part.tensor);
      const std::string sc = ck.tensor(part.tensor + "_scale_inv");
      const auto rows = static_cast<std::int64_t>(part.shape[0]);
      const auto cols = static_cast<std::int64_t>(part.shape[1]);
      const std::int64_t blocks_per_row = (cols + 127) / 128;
      for (std::int64_t r = 0; r < rows; ++r) {
        met::cpu::weight_row(*h, row0 + r, got.data());
        for (std::int64_t c = 0; c < cols; ++c) {
          float s;
          std::memcpy(&s, sc.data() + 4 * ((r / 128) * blocks_per_row + c / 128), 4);
          const float want = model::fp8_e4m3_value(static_cast<std::uint8_t>(data[static_cast<std::size_t>(r * cols + c)])) * s;
          if (got[static_cast<std::size_t>(c)] != want) {
            FAIL_CHECK(part.tensor << " row " << r << " col " << c << ": " << got[static_cast<std::size_t>(c)] << " != " << want);
            r = rows;
            break;
          }
        }
      }
      row0 += rows;
    }
    // A single-part fp8 weight keeps the checkpoint's block and reads its scales in place.
    const auto o = *w->find("model.layers.0.self_attn.o_proj.weight");
    CHECK(w->block_rows(o) == 128);
    CHECK(w->scale_bytes(o) == m.tensors[o].scale_parts[0].bytes);
  }
}

TEST_CASE("a missing shard is refused naming the file and the tensor that needs it (catches a lazy load that faults later)") {
  TempCheckpoint ck("tiny-llama", Format::bf16, /*shard_bytes=*/40'000);
  const auto m = ck.manifest();
  const std::string shard = m.tensors.back().parts[0].file;  // lm_head: the last shard
  CHECK(shard != "model.safetensors");
  fs::remove(ck.dir / shard);
  auto w = interp::LoadedWeights::load(m, ck.dir.string());
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message == (ck.dir / shard).string() + ": No such file or directory (needed by weight 'lm_head.weight' tensor 'lm_head.weight')");
}

TEST_CASE("a truncated shard is refused (catches reading past the end of a mapping)") {
  TempCheckpoint ck("tiny-qwen3", Format::bf16, model::kDefaultShardBytes);
  const auto m = ck.manifest();
  const auto file = ck.dir / "model.safetensors";
  fs::resize_file(file, fs::file_size(file) - 100);
  auto w = interp::LoadedWeights::load(m, ck.dir.string());
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message.find(file.string()) == 0);
  fs::resize_file(file, 4);
  auto w2 = interp::LoadedWeights::load(m, ck.dir.string());
  REQUIRE_FALSE(w2.ok());
  CHECK(w2.error().message == file.string() + ": truncated: 4 bytes, shorter than the 8-byte header length");
}

TEST_CASE("a checkpoint that changed since emit is refused naming the tensor and both values (catches trusting weights.json offsets)") {
  TempCheckpoint ck("tiny-llama", Format::bf16, model::kDefaultShardBytes);
  const auto m = ck.manifest();
  auto shifted = m;
  shifted.tensors[2].parts[1].offset += 2;
  auto w = interp::LoadedWeights::load(shifted, ck.dir.string());
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message ==
        fmt::format("{}: weight 'model.layers.0.self_attn.qkv' tensor 'model.layers.0.self_attn.k_proj.weight': offset is {} in "
                    "the checkpoint, {} in weights.json; the checkpoint changed since emit",
                    (ck.dir / "model.safetensors").string(), m.tensors[2].parts[1].offset, m.tensors[2].parts[1].offset + 2));
  // Rewrite the checkpoint as fp8: same names, other dtypes.
  TempCheckpoint fp8("tiny-llama", Format::fp8_e4m3, model::kDefaultShardBytes);
  auto w8 = interp::LoadedWeights::load(m, fp8.dir.string());
  REQUIRE_FALSE(w8.ok());
  CHECK(w8.error().message.find("weight 'model.embed_tokens.weight' tensor 'model.embed_tokens.weight': offset is ") !=
        std::string::npos);
  // Same offsets, another dtype: the dtype is named.
  auto f16 = m;
  f16.tensors[1].parts[0].dtype = "F16";
  auto w9 = interp::LoadedWeights::load(f16, ck.dir.string());
  REQUIRE_FALSE(w9.ok());
  CHECK(w9.error().message.find("tensor 'model.layers.0.input_layernorm.weight': dtype is BF16 in the checkpoint, F16 in weights.json") !=
        std::string::npos);
}

TEST_CASE("modelopt fp8: a fused q/k/v decodes each row with its own projection's per-tensor scale (catches one scale for the fused entry)") {
  TempCheckpoint ck("tiny-llama", Format::fp8_e4m3, model::kDefaultShardBytes, model::Fp8Layout::modelopt);
  const auto m = ck.manifest();
  auto w = interp::LoadedWeights::load(m, ck.dir.string());
  REQUIRE_MESSAGE(w.ok(), (w.ok() ? "" : w.error().message));
  const auto qkv = w->find("model.layers.0.self_attn.qkv");
  REQUIRE(qkv);
  auto h = w->host_weight(*qkv);
  REQUIRE(h.ok());
  CHECK(h->format == MET_WEIGHT_FP8_E4M3);
  CHECK(h->block_rows == 1);
  CHECK(h->block_cols == h->cols);
  const auto& e = m.tensors[*qkv];
  REQUIRE(e.parts.size() == 3);
  float act_scale = 0;  // the largest of the parts' static input scales
  REQUIRE(e.input_scale_parts.size() == 3);
  for (const auto& p : e.input_scale_parts) {
    const std::string b = ck.tensor(p.tensor);
    float v = 0;
    std::memcpy(&v, b.data(), sizeof v);
    act_scale = std::max(act_scale, v);
  }
  CHECK(act_scale > 0);
  CHECK(h->act_scale == act_scale);
  std::int64_t row = 0;
  std::vector<float> got(static_cast<std::size_t>(h->cols));
  for (std::size_t k = 0; k < 3; ++k) {
    const std::string sb = ck.tensor(e.scale_parts[k].tensor), wb = ck.tensor(e.parts[k].tensor);
    float scale = 0;
    std::memcpy(&scale, sb.data(), sizeof scale);
    const std::int64_t rows = static_cast<std::int64_t>(e.parts[k].shape[0]);
    for (std::int64_t r : {std::int64_t{0}, rows - 1}) {
      met::cpu::weight_row(*h, row + r, got.data());
      for (std::int64_t c = 0; c < h->cols; c += 7) {
        const auto code = static_cast<std::uint8_t>(wb[static_cast<std::size_t>(r * h->cols + c)]);
        CHECK(got[static_cast<std::size_t>(c)] == met::cpu::fp8_e4m3_to_f32(code) * scale);
      }
    }
    row += rows;
  }
}

TEST_CASE("the calibrated KV scales weights.json records are read again at load: a checkpoint whose scale changed since emit is refused naming the tensor and both values (catches packets encoding with a stale scale)") {
  TempCheckpoint ck("tiny-llama", Format::fp8_e4m3, model::kDefaultShardBytes, model::Fp8Layout::modelopt);
  auto m = ck.manifest();
  DiskCheckpoint src(ck.dir.string());
  auto layout = emit::read_checkpoint_layout(src);
  REQUIRE(layout.ok());
  auto scales = emit::calibrated_kv_scales(*layout, ck.dir.string());
  REQUIRE(scales.ok());
  REQUIRE(scales->size() == 2);
  for (const auto& [layer, s] : *scales) m.kv_scales.push_back(s);
  auto ok = interp::LoadedWeights::load(m, ck.dir.string());
  REQUIRE_MESSAGE(ok.ok(), (ok.ok() ? "" : ok.error().message));
  auto stale = m;
  stale.kv_scales[1].v_scale *= 2;
  auto w = interp::LoadedWeights::load(stale, ck.dir.string());
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message == fmt::format("{}: KV scale 'model.layers.1.self_attn.v_proj.v_scale' is {} in the checkpoint, {} in "
                                         "weights.json and the packets; the checkpoint changed since emit",
                                         ck.dir.string(), m.kv_scales[1].v_scale, stale.kv_scales[1].v_scale));
}

TEST_CASE("a tensor-parallel rank's windows of stacked experts load as the expert ops read them: per expert the rank's gate rows, then its up rows, of the [experts, 2 x inter, hidden] gate/up, and the rank's columns of every expert's down (catches every expert's gate slice before any up slice, rows cut across the halves, or a 3-d window read as 2-d)") {
  std::ifstream in(std::string(MET_SOURCE_DIR) + "/tests/oracle/configs/tiny-gemma4-moe.json");
  const std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE_FALSE(config.empty());
  TempCheckpoint ck("tiny-gemma4-moe", config, Format::bf16, model::kDefaultShardBytes);
  const auto m = ck.manifest();
  const std::string gu_name = "model.layers.0.experts.gate_up_proj", down_name = "model.layers.0.experts.down_proj";
  const emit::WeightEntry* gu = nullptr;
  const emit::WeightEntry* down = nullptr;
  for (const auto& e : m.tensors) {
    if (e.name == gu_name) gu = &e;
    if (e.name == down_name) down = &e;
  }
  REQUIRE(gu != nullptr);
  REQUIRE(down != nullptr);
  REQUIRE(gu->shape.size() == 3);
  const std::uint64_t E = gu->shape[0], I2 = gu->shape[1], H = gu->shape[2], I = I2 / 2, el = 2;  // bf16
  REQUIRE(down->shape == std::vector<std::uint64_t>{E, H, I});
  for (int ranks : {2, 4}) {
    const std::uint64_t w = I / static_cast<std::uint64_t>(ranks);
    for (int rank = 0; rank < ranks; ++rank) {
      CAPTURE(ranks);
      CAPTURE(rank);
      auto gs = emit::rank_slice(*gu, 0, rank, ranks, "test", {}, 2);
      auto ds = emit::rank_slice(*down, 1, rank, ranks, "test");
      REQUIRE_MESSAGE(gs.ok(), (gs.ok() ? "" : gs.error().message));
      REQUIRE_MESSAGE(ds.ok(), (ds.ok() ? "" : ds.error().message));
      CHECK(gs->parts.size() == 2 * E);
      CHECK(elems_of(gs->shape) == E * 2 * w * H);
      CHECK(ds->shape == std::vector<std::uint64_t>{E, H, w});
      emit::WeightsManifest rm = m;
      rm.tensors = {*gs, *ds};
      auto back = emit::parse_weights_manifest(emit::to_json(rm), "weights.json");  // the 3-d windows round-trip
      REQUIRE_MESSAGE(back.ok(), (back.ok() ? "" : back.error().message));
      auto lw = interp::LoadedWeights::load(*back, ck.dir.string());
      REQUIRE_MESSAGE(lw.ok(), (lw.ok() ? "" : lw.error().message));
      const std::string full_gu = ck.tensor(gu_name), full_down = ck.tensor(down_name);
      std::string want_gu, want_down;
      const std::uint64_t r0 = static_cast<std::uint64_t>(rank) * w;
      for (std::uint64_t x = 0; x < E; ++x)
        for (std::uint64_t half : {0, 1})
          want_gu += full_gu.substr(((x * I2 + half * I + r0) * H) * el, w * H * el);
      for (std::uint64_t x = 0; x < E; ++x)
        for (std::uint64_t row = 0; row < H; ++row) want_down += full_down.substr(((x * H + row) * I + r0) * el, w * el);
      CHECK(bytes_of(lw->data(0), lw->bytes(0)) == want_gu);
      CHECK(bytes_of(lw->data(1), lw->bytes(1)) == want_down);
    }
  }
  // A window off the tensor, or one count per dimension short, is refused when weights.json is read.
  emit::WeightsManifest bad = m;
  auto gs = emit::rank_slice(*gu, 0, 0, 2, "test", {}, 2);
  REQUIRE(gs.ok());
  bad.tensors = {*gs};
  bad.tensors[0].parts[0].window = {E, 1, 0, I / 2, 0, H};  // expert E of 0..E-1
  CHECK_FALSE(emit::parse_weights_manifest(emit::to_json(bad), "weights.json").ok());
  bad.tensors[0].parts[0].window = {0, 1, 0, I};
  CHECK_FALSE(emit::parse_weights_manifest(emit::to_json(bad), "weights.json").ok());
}

TEST_CASE("a tensor-parallel rank's windows of gpt-oss's MXFP4 experts load as the expert ops read them: each expert's run of interleaved gate/up rows, and down's input blocks, the e8m0 scales in the blocks' windows; biases as windows of a vector (catches scales left whole, a window of blocks read as 3-d, or down cut inside a 32-column block)") {
  std::ifstream in(std::string(MET_SOURCE_DIR) + "/tests/oracle/configs/tiny-gpt-oss.json");
  const std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE_FALSE(config.empty());
  TempCheckpoint ck("tiny-gpt-oss", config, Format::mxfp4, model::kDefaultShardBytes);
  const auto m = ck.manifest();
  const std::string gu_name = "model.layers.0.mlp.experts.gate_up_proj", down_name = "model.layers.0.mlp.experts.down_proj",
                    bias_name = "model.layers.0.mlp.experts.gate_up_proj_bias";
  const emit::WeightEntry* gu = nullptr;
  const emit::WeightEntry* down = nullptr;
  const emit::WeightEntry* bias = nullptr;
  for (const auto& e : m.tensors) {
    if (e.name == gu_name) gu = &e;
    if (e.name == down_name) down = &e;
    if (e.name == bias_name) bias = &e;
  }
  REQUIRE(gu != nullptr);
  REQUIRE(down != nullptr);
  REQUIRE(bias != nullptr);
  REQUIRE(gu->dtype == "mxfp4");
  // blocks [experts, rows, in / 32, 16], scales [experts, rows, in / 32]
  const std::uint64_t E = gu->shape[0], I2 = gu->shape[1], HB = gu->shape[2], H = down->shape[1], IB = down->shape[2];
  REQUIRE(down->shape == std::vector<std::uint64_t>{E, H, IB, 16});
  const int ranks = 2;
  const std::uint64_t w2 = I2 / ranks, wb = IB / ranks;  // gate/up rows and down's input blocks a rank
  REQUIRE(wb > 0);
  for (int rank = 0; rank < ranks; ++rank) {
    CAPTURE(rank);
    auto gs = emit::rank_slice(*gu, 0, rank, ranks, "test");
    auto ds = emit::rank_slice(*down, 1, rank, ranks, "test");
    auto bs = emit::rank_slice(*bias, 0, rank, ranks, "test", {}, 1, emit::SplitLayout::vector);
    REQUIRE_MESSAGE(gs.ok(), (gs.ok() ? "" : gs.error().message));
    REQUIRE_MESSAGE(ds.ok(), (ds.ok() ? "" : ds.error().message));
    REQUIRE_MESSAGE(bs.ok(), (bs.ok() ? "" : bs.error().message));
    emit::WeightsManifest rm = m;
    rm.tensors = {*gs, *ds, *bs};
    auto back = emit::parse_weights_manifest(emit::to_json(rm), "weights.json");  // 4-d, 3-d and 2-d windows round-trip
    REQUIRE_MESSAGE(back.ok(), (back.ok() ? "" : back.error().message));
    auto lw = interp::LoadedWeights::load(*back, ck.dir.string());
    REQUIRE_MESSAGE(lw.ok(), (lw.ok() ? "" : lw.error().message));
    const std::uint64_t r = static_cast<std::uint64_t>(rank);
    const std::string gu_b = ck.tensor(gu_name + "_blocks"), gu_s = ck.tensor(gu_name + "_scales");
    const std::string dn_b = ck.tensor(down_name + "_blocks"), dn_s = ck.tensor(down_name + "_scales");
    const std::string full_bias = ck.tensor(bias_name);
    std::string want_gb, want_gs, want_db, want_ds, want_bias;
    for (std::uint64_t x = 0; x < E; ++x) {
      want_gb += gu_b.substr((x * I2 + r * w2) * HB * 16, w2 * HB * 16);
      want_gs += gu_s.substr((x * I2 + r * w2) * HB, w2 * HB);
      for (std::uint64_t row = 0; row < H; ++row) {
        want_db += dn_b.substr(((x * H + row) * IB + r * wb) * 16, wb * 16);
        want_ds += dn_s.substr((x * H + row) * IB + r * wb, wb);
      }
      want_bias += full_bias.substr((x * I2 + r * w2) * 2, w2 * 2);
    }
    CHECK(bytes_of(lw->data(0), lw->bytes(0)) == want_gb);
    CHECK(lw->scale_bytes(0) == want_gs.size());
    CHECK(lw->scale_bytes(1) == want_ds.size());
    CHECK(bytes_of(lw->scales(0), want_gs.size()) == want_gs);
    CHECK(bytes_of(lw->data(1), lw->bytes(1)) == want_db);
    CHECK(bytes_of(lw->scales(1), want_ds.size()) == want_ds);
    CHECK(bytes_of(lw->data(2), lw->bytes(2)) == want_bias);
  }
  // At 4 ranks a rank's 16 of down's 64 input columns would cut a 32-column scale block.
  auto four = emit::rank_slice(*down, 1, 0, 4, "test");
  REQUIRE_FALSE(four.ok());
  CHECK(four.error().message.find("whole 32-column MXFP4 scale blocks") != std::string::npos);
}
