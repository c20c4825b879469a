// Estimates on the checked-in tree, checked against arithmetic done here from the numbers of the
// public config.json files (written out below), never from planner or estimate code: weights, KV
// per token, weights read per decode step, the bandwidth floor of a decode step, prefill chunking,
// sliding windows, tensor parallelism and memory fit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/strings.hpp"
#include "estimate/cost.hpp"
#include "kernels/common/interp/smem.h"
#include "model/kv_ring.hpp"
#include "planner/real_tree.hpp"

using met::testing::analyse;
using met::testing::contains;
using met::testing::Loaded;
namespace estimate = met::estimate;
namespace planner = met::planner;
namespace device = met::device;

namespace {

// meta-llama/Llama-3.1-8B-Instruct config.json.
struct Llama8B {
  static constexpr double hidden = 4096, layers = 32, heads = 32, kv_heads = 8, head_dim = 128, inter = 14336, vocab = 128256;
  static constexpr double bf16 = 2;
  // Elements of one layer's matrices: q, k, v, o, gate, up, down.
  static constexpr double linear_per_layer =
      hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + heads * head_dim * hidden + 3 * hidden * inter;
  static constexpr double norms_per_layer = 2 * hidden;  // input and post-attention RMSNorm scales
  static constexpr double embed = vocab * hidden;
  static constexpr double lm_head = vocab * hidden;      // untied
  static constexpr double final_norm = hidden;
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

estimate::Options datasheet() {
  estimate::Options o;
  o.basis = estimate::BasisChoice::datasheet;
  return o;
}

// The real tree with hopper's EVIDENCE.toml as `met circuit calibrate` wrote it from the H200 sweep
// of 2026-12-02 (commit 35e5319), while a prefill program's head still ran one row and the sweep's
// prefill campaigns measured the plans of their day: every family of a prefill step has a point.
// The tests that need a fully measured prefill read it, so that they test the estimate and not what
// the latest sweep happens to cover (packed prefill's 16-row head set those campaigns aside).
met::MemTree prefill_measured() {
  auto t = met::testing::real_tree();
  std::ifstream in(std::string(MET_SOURCE_DIR) + "/tests/estimate/fixtures/hopper-evidence-one-row-head.toml");
  REQUIRE(in.good());
  std::ostringstream text;
  text << in.rdbuf();
  t.files()["hopper/EVIDENCE.toml"] = text.str();
  return t;
}

// The real tree with the common gemv family measured: `figures` takes the place of its
// `evidence = "unmeasured"` line (an ampere device inherits common alone, so they are the only ones).
met::MemTree gemv_measured(const std::string& figures) {
  auto t = met::testing::real_tree();
  std::string& f = t.files().at("common/KERNEL_FAMILIES.toml");
  const auto at = f.find("id = \"gemv\"");
  REQUIRE(at != std::string::npos);
  const std::string from = "evidence = \"unmeasured\"";
  const auto ev = f.find(from, at);
  REQUIRE(ev != std::string::npos);
  f.replace(ev, from.size(), figures);
  return t;
}

}  // namespace

TEST_CASE("llama-3.1-8b key figures: 16.06 GB of weights, 131072 KV bytes per token, 15.01 GB read per decode step") {
  using L = Llama8B;
  static_assert(L::linear_per_layer == 218103808.0);
  const double params = L::embed + L::layers * (L::linear_per_layer + L::norms_per_layer) + L::final_norm + L::lm_head;
  const double weight_bytes = params * L::bf16;
  REQUIRE(weight_bytes == 16060522496.0);
  const double kv_per_token = L::layers * L::kv_heads * (L::head_dim + L::head_dim) * L::bf16;
  REQUIRE(kv_per_token == 131072.0);
  // A decode step reads every weight but the embedding table, of which it gathers one row.
  const double read = weight_bytes - L::embed * L::bf16 + L::hidden * L::bf16;
  REQUIRE(read == 15009857536.0);

  const Loaded l;
  auto c = analyse(l, "llama-3.1-8b-instruct", "h200-sxm", datasheet());
  const auto& an = c->an;
  CHECK(an.key.parameters == doctest::Approx(params).epsilon(1e-12));
  CHECK(an.key.weight_bytes == doctest::Approx(weight_bytes).epsilon(1e-12));
  CHECK(an.key.kv_bytes_per_token == doctest::Approx(kv_per_token).epsilon(1e-12));
  CHECK(an.key.decode_weight_bytes_read == doctest::Approx(read).epsilon(1e-12));
  CHECK(an.fit.weights == doctest::Approx(weight_bytes).epsilon(1e-12));  // TP 1: nothing sharded
  CHECK(an.basis.bandwidth.value == doctest::Approx(4.8e12));
  CHECK(an.basis.bandwidth.source == "datasheet");
}

TEST_CASE("a decode step at C = 1 takes at least its bytes over the datasheet bandwidth, and not much more") {
  using L = Llama8B;
  const Loaded l;
  auto c = analyse(l, "llama-3.1-8b-instruct", "h200-sxm", datasheet());
  const auto& an = c->an;
  REQUIRE(!an.decode.empty());
  const auto& d1 = an.decode.front();
  REQUIRE(d1.rows == 1);
  CHECK(d1.context == 4096);  // the instance's serving default
  const double read = 15009857536.0;
  const double kv_read = L::layers * 4096 * L::kv_heads * 2 * L::head_dim * L::bf16;  // the whole cache, every layer
  const double kv_write = 131072.0;
  CHECK(d1.weight_bytes == doctest::Approx(read).epsilon(1e-12));
  CHECK(d1.kv_bytes == doctest::Approx(kv_read + kv_write).epsilon(1e-12));
  const double floor_s = (read + kv_read + kv_write) / 4.8e12;
  CHECK(d1.ceiling_s >= floor_s);
  CHECK(d1.ceiling_s <= floor_s * 1.03);
  CHECK(d1.ceiling_s >= read / 4.8e12);
  CHECK(d1.gaps == 0);
  CHECK(d1.allreduce_s == 0);
  // Hopper families carry efficiencies measured on the H200 (kernels/hopper/KERNEL_FAMILIES.toml):
  // the prediction names that evidence and never beats the ceiling.
  CHECK(d1.prediction_basis.rfind("measured: perf-data/h200-sxm/", 0) == 0);
  // Families share campaigns: the prediction names each file once, sorted, and the basis is that list.
  REQUIRE(!d1.evidence.empty());
  for (std::size_t i = 1; i < d1.evidence.size(); ++i) CHECK(d1.evidence[i - 1] < d1.evidence[i]);
  for (const auto& f : d1.evidence) CHECK(f.find(',') == std::string::npos);
  CHECK(d1.prediction_basis == "measured: " + met::join(d1.evidence, ", "));
  CHECK(d1.prediction_s >= d1.ceiling_s);
  // tokens/s is printed beside the ceiling, so it is the ceiling's; the prediction's is its own
  CHECK(d1.tokens_per_s == doctest::Approx(1.0 / d1.ceiling_s));
  CHECK(d1.predicted_tokens_per_s == doctest::Approx(1.0 / d1.prediction_s));
  // Batch steps read the weights once for every sequence: C = 16 costs far less than 16 x C = 1.
  for (const auto& c16 : an.decode) {
    if (c16.rows != 16) continue;
    CHECK(c16.ceiling_s < 2 * d1.ceiling_s);
    CHECK(c16.kv_bytes == doctest::Approx(16 * kv_read + 16 * kv_write).epsilon(1e-12));
  }
}

TEST_CASE("a decode step's ceiling never falls as the batch grows: each rule is costed on the unit its body runs on") {
  // The gemv bodies step on the tensor cores (mma.sync); costed at the fp32 CUDA-core rate, a batch
  // of 16 on a b200 came out slower (4.278 ms) than the tensor-core GEMMs of a batch of 32 (4.072).
  const Loaded l;
  for (const std::string model : {"llama-3.1-8b-instruct", "qwen3-8b", "llama-3.2-1b-instruct"}) {
    const auto graph = l.graph(model);
    for (const std::string dev : {"h100-sxm", "h200-sxm", "b200", "rtx-pro-6000", "mi300x", "mi355x"}) {
      const auto target = l.target(dev);
      const auto sheet = estimate::make_basis(*target.device, estimate::BasisChoice::datasheet);
      double last = 0;
      for (std::int64_t rows = 1; rows <= 128; rows *= 2) {
        const auto mode = rows == 1 ? planner::Mode::decode : planner::Mode::batch;
        const auto c = estimate::estimate_case(l.lib, target, graph, sheet, mode, rows, 4096, 1);
        CAPTURE(model);
        CAPTURE(dev);
        CAPTURE(rows);
        CHECK(c.ceiling_s >= last);
        last = c.ceiling_s;
      }
    }
  }
}

TEST_CASE("--basis measured changes the ceiling, not the prediction: efficiencies are shares of the datasheet ceiling") {
  const Loaded l(prefill_measured());
  const auto graph = l.graph("llama-3.1-8b-instruct");
  const auto target = l.target("h200-sxm");
  const auto sheet = estimate::make_basis(*target.device, estimate::BasisChoice::datasheet);
  const auto measured = estimate::make_basis(*target.device, estimate::BasisChoice::measured);
  for (const auto& [mode, rows] : {std::pair{planner::Mode::decode, std::int64_t{1}}, std::pair{planner::Mode::decode, std::int64_t{16}},
                                   std::pair{planner::Mode::prefill, std::int64_t{4096}}}) {
    const auto a = estimate::estimate_case(l.lib, target, graph, sheet, mode, rows, 4096, 1);
    const auto b = estimate::estimate_case(l.lib, target, graph, measured, mode, rows, 4096, 1);
    const std::int64_t n = rows;  // a structured binding cannot be named inside CAPTURE (CONTRIBUTING.md)
    CAPTURE(n);
    REQUIRE(a.prediction_basis.rfind("measured: ", 0) == 0);
    CHECK(b.ceiling_s > a.ceiling_s);  // the measured device is slower than its datasheet
    CHECK(b.prediction_s == doctest::Approx(a.prediction_s).epsilon(1e-12));
  }
}

TEST_CASE(
    "prefill of 32768 tokens on h200 runs 8 chunks of 4096: the layer weights are read 8 times, and the head's too (every launch "
    "runs its program's head)") {
  using L = Llama8B;
  const Loaded l;
  const auto graph = l.graph("llama-3.1-8b-instruct");
  const auto target = l.target("h200-sxm");
  const auto basis = estimate::make_basis(*target.device, estimate::BasisChoice::datasheet);
  const auto ce = estimate::estimate_case(l.lib, target, graph, basis, planner::Mode::prefill, 32768, 4096, 1);
  const double layer_bytes = (L::linear_per_layer + L::norms_per_layer) * L::bf16;
  const double per_chunk = L::layers * layer_bytes + 4096 * L::hidden * L::bf16;  // layers + 4096 gathered embedding rows
  const double head = (L::final_norm + L::lm_head) * L::bf16;                     // read once for its 16 rows
  CHECK(ce.weight_bytes == doctest::Approx(8 * (per_chunk + head)).epsilon(1e-12));
  CHECK(ce.tokens_per_s == doctest::Approx(32768 / ce.ceiling_s));
  CHECK(ce.predicted_tokens_per_s == doctest::Approx(32768 / ce.prediction_s));

  // One chunk of 4096 is the same program: one eighth of the layer traffic, the same digest.
  const auto one = estimate::estimate_case(l.lib, target, graph, basis, planner::Mode::prefill, 4096, 4096, 1);
  CHECK(one.weight_bytes == doctest::Approx(per_chunk + head).epsilon(1e-12));
  CHECK(one.digest == ce.digest);
  CHECK(ce.ceiling_s > 7 * one.ceiling_s);  // eight chunks, later ones attending to more context

  // A remainder is padded up to the smallest bucket that holds it: 4096 + 100 -> 4096 + 128 rows.
  const auto odd = estimate::estimate_case(l.lib, target, graph, basis, planner::Mode::prefill, 4196, 4096, 1);
  const double per_128 = L::layers * layer_bytes + 128 * L::hidden * L::bf16;
  CHECK(odd.weight_bytes == doctest::Approx(per_chunk + per_128 + 2 * head).epsilon(1e-12));
}

TEST_CASE("sliding-window layers read at most their window at context 32768 (gemma-3-27b-it), and hold it in a ring only on a class whose bodies read rings (hopper, cpu; not blackwell)") {
  // google/gemma-3-27b-it text_config: 62 layers, 16 kv heads, head_dim 128, sliding_window 1024;
  // Gemma3TextConfig's default sliding_window_pattern 6: layers 5, 11, ..., 59 are global.
  const double layers = 62, full = 10, sliding = layers - full, kv_heads = 16, head_dim = 128, window = 1024, ctx = 32768;
  const double row = kv_heads * 2 * head_dim * 2;  // K and V of one token of one layer, bf16
  const Loaded l;
  estimate::Options opt;
  opt.context = 32768;
  auto c = analyse(l, "gemma-3-27b-it", "h200-sxm", opt);
  const auto& an = c->an;
  CHECK(an.context == 32768);
  const double want = full * (ctx * row + row) + sliding * (window * row + row);
  CHECK(an.requested.kv_bytes == doctest::Approx(want).epsilon(1e-12));
  CHECK(an.requested.kv_bytes < 0.3 * layers * ctx * row);  // uncapped would read every layer's whole cache

  double sliding_kv = 0, full_kv = 0;
  for (const auto& g : an.groups) {
    if (g.scope == "layers:sliding") sliding_kv += g.cost.kv_bytes;
    if (g.scope == "layers:full") full_kv += g.cost.kv_bytes;
  }
  CHECK(sliding_kv == doctest::Approx(window * row + row).epsilon(1e-12));
  CHECK(full_kv == doctest::Approx(ctx * row + row).epsilon(1e-12));
  // Memory: a class whose bodies read rings keeps a sliding layer's keys in a ring of window + its
  // largest bucket - 1 rows rounded up to 64, plus the spare row (model/kv_ring.hpp), as its emit
  // allocates them: hopper (largest bucket 4096) and cpu (256). The blackwell class's bodies read
  // full-length caches (no kv_ring), so every layer holds the context.
  CHECK(met::model::kv_ring(1024, 4096, 32768) == 5120);  // 1024 + 4096 - 1 = 5119, rounded up
  CHECK(an.fit.kv == doctest::Approx(full * ctx * row + sliding * (5120 + 1) * row).epsilon(1e-12));
  auto cpu = analyse(l, "gemma-3-27b-it", "host-cpu", opt);
  CHECK(met::model::kv_ring(1024, 256, 32768) == 1280);  // 1024 + 256 - 1 = 1279, rounded up
  CHECK(cpu->an.fit.kv == doctest::Approx(full * ctx * row + sliding * (1280 + 1) * row).epsilon(1e-12));
  auto linear = analyse(l, "gemma-3-27b-it", "b200", opt);
  CHECK(linear->an.fit.kv == doctest::Approx(layers * ctx * row).epsilon(1e-12));
}

TEST_CASE("TP 2 halves the weight bytes per device and adds a positive all-reduce time") {
  using L = Llama8B;
  const Loaded l;
  const auto graph = l.graph("llama-3.1-8b-instruct");
  const auto target = l.target("h200-sxm");
  const auto basis = estimate::make_basis(*target.device, estimate::BasisChoice::datasheet);
  const auto tp1 = estimate::estimate_case(l.lib, target, graph, basis, planner::Mode::decode, 1, 4096, 1);
  const auto tp2 = estimate::estimate_case(l.lib, target, graph, basis, planner::Mode::decode, 1, 4096, 2);
  // Matrices split; norm scales and the gathered embedding row do not.
  const double want = L::layers * (L::linear_per_layer / 2 + L::norms_per_layer) * L::bf16 + L::hidden * L::bf16 +
                      L::final_norm * L::bf16 + L::lm_head * L::bf16 / 2;
  CHECK(tp2.weight_bytes == doctest::Approx(want).epsilon(1e-12));
  CHECK(tp2.weight_bytes / tp1.weight_bytes == doctest::Approx(0.5).epsilon(1e-3));
  CHECK(tp1.allreduce_s == 0);
  CHECK(tp1.gather_s == 0);
  // Two all-reduces of one hidden vector of fp32 partial sums per layer (after attention and after
  // the MLP, as emit --tp places them); a ring all-reduce moves 2 (tp - 1) / tp of it over 450 GB/s
  // per direction, plus 10 us each. One gather of the bf16 logits: (tp - 1) / tp of them.
  CHECK(tp2.allreduce_s == doctest::Approx(2 * L::layers * (2.0 * 1 / 2 * L::hidden * 4 / 450e9 + 10e-6)).epsilon(1e-9));
  CHECK(tp2.gather_s == doctest::Approx(1.0 / 2 * L::vocab * 2 / 450e9 + 10e-6).epsilon(1e-9));
  CHECK(tp2.ceiling_s < tp1.ceiling_s);
  CHECK(tp2.ceiling_s > tp1.ceiling_s / 2);

  estimate::Options opt = datasheet();
  opt.tp = 2;
  auto c = analyse(l, "llama-3.1-8b-instruct", "h200-sxm", opt);
  const double full = 16060522496.0;
  const double norms = (L::layers * L::norms_per_layer + L::final_norm) * L::bf16;
  // The embedding table is replicated, as emit --tp keeps it on every rank (the same size as the
  // untied lm_head, which splits).
  const double embed = L::lm_head * L::bf16;
  CHECK(c->an.fit.weights == doctest::Approx((full - norms - embed) / 2 + norms + embed).epsilon(1e-12));
  CHECK(c->an.requested.allreduce_s > 0);
  // KV heads split too: 8 kv heads over 2 devices.
  CHECK(c->an.fit.kv == doctest::Approx(4096 * 131072.0 / 2).epsilon(1e-12));
}

TEST_CASE("llama-3.1-70b bf16 does not fit one h100-sxm; the smallest TP that fits is 2") {
  // meta-llama/Llama-3.1-70B-Instruct: hidden 8192, 80 layers, 64 heads, 8 kv heads, inter 28672, vocab 128256.
  const double hidden = 8192, layers = 80, heads = 64, kv = 8, hd = 128, inter = 28672, vocab = 128256;
  const double params = 2 * vocab * hidden + hidden +
                        layers * (hidden * (heads + 2 * kv) * hd + heads * hd * hidden + 3 * hidden * inter + 2 * hidden);
  const double usable = 79.1 * kGiB * 0.92;
  REQUIRE(params * 2 > usable);
  REQUIRE(params * 2 / 2 < usable);

  const Loaded l;
  auto c = analyse(l, "llama-3.1-70b-instruct", "h100-sxm");
  const auto& fit = c->an.fit;
  CHECK(c->an.key.weight_bytes == doctest::Approx(params * 2).epsilon(1e-12));
  CHECK(fit.usable == doctest::Approx(usable).epsilon(1e-12));
  CHECK_FALSE(fit.fits);
  CHECK(fit.total > fit.usable);
  REQUIRE(fit.smallest_tp.has_value());
  CHECK(*fit.smallest_tp == 2);
  CHECK(fit.devices_that_fit.empty());  // only looked for when no TP degree holds it
  CHECK(fit.max_seqs == 0);

  // At TP 2 it fits, with room for more than one sequence.
  estimate::Options opt;
  opt.tp = 2;
  auto c2 = analyse(l, "llama-3.1-70b-instruct", "h100-sxm", opt);
  CHECK(c2->an.fit.fits);
  CHECK(c2->an.fit.max_seqs >= 1);
  CHECK(c2->an.fit.total <= c2->an.fit.usable);
}

TEST_CASE("deepseek-v3 on h100-sxm: no TP degree fits, and the devices it names really hold it") {
  const Loaded l;
  auto c = analyse(l, "deepseek-v3", "h100-sxm");
  const auto& an = c->an;
  CHECK_FALSE(an.fit.fits);
  CHECK_FALSE(an.fit.smallest_tp.has_value());
  // About 671e9 parameters, almost all fp8: far over 8 x 80 GB.
  CHECK(an.key.parameters > 6.5e11);
  CHECK(an.key.parameters < 7.0e11);
  CHECK(an.key.weight_bytes > 6.5e11);
  CHECK(an.key.weight_bytes < 7.2e11);
  const auto ctx = an.context;
  for (const auto& d : l.lib.registry.devices) {
    if (d.id == "h100-sxm") continue;
    const auto& cls = l.lib.classes.at(d.klass);
    const bool fits = estimate::memory_fit(l.lib, d, cls, *an.model, 1, ctx, 1).fits;
    const bool listed =
        std::find(an.fit.devices_that_fit.begin(), an.fit.devices_that_fit.end(), d.id) != an.fit.devices_that_fit.end();
    CAPTURE(d.id);
    CHECK(fits == listed);
    if (d.visible_gib * kGiB * d.usable_fraction < an.key.weight_bytes) CHECK_FALSE(listed);
  }
}

TEST_CASE("host-cpu has no interconnect: TP is not applicable and TP 2 is refused") {
  const Loaded l;
  auto c = analyse(l, "llama-3.2-1b-instruct", "host-cpu");
  CHECK(c->an.tp.empty());
  CHECK_FALSE(c->an.fit.smallest_tp.has_value());

  estimate::Options opt;
  opt.tp = 2;
  const auto graph = l.graph("llama-3.2-1b-instruct");
  const auto target = l.target("host-cpu");
  auto an = estimate::analyze(l.lib, target, graph, opt);
  REQUIRE_FALSE(an.ok());
  CHECK(contains(an.error().message, "host-cpu"));
  CHECK(contains(an.error().message, "interconnect"));
}

TEST_CASE("the measured basis uses the h200's measured read bandwidth and bf16 rate; datasheet ignores them") {
  const Loaded l;
  const auto* d = l.lib.registry.find("h200-sxm");
  REQUIRE(d);
  REQUIRE(d->measured);
  const auto m = estimate::make_basis(*d, estimate::BasisChoice::measured);
  const auto s = estimate::make_basis(*d, estimate::BasisChoice::datasheet);
  if (d->measured->read_gbs) {
    CHECK(m.bandwidth.value == doctest::Approx(*d->measured->read_gbs * 1e9));
    CHECK(m.bandwidth.source == "measured");
  }
  CHECK(s.bandwidth.value == doctest::Approx(4800e9));
  CHECK(m.peak("bf16").value == doctest::Approx(d->measured->peaks.at("bf16") * 1e12));
  CHECK(m.peak("bf16").source == "measured");
  CHECK(s.peak("bf16").value == doctest::Approx(989.4e12));
  CHECK(m.peak("fp8").value == doctest::Approx(1978.9e12));  // not measured: datasheet
  CHECK(m.peak("fp8").source == "datasheet");
}

TEST_CASE("the measured basis costs bytes at the read bandwidth, never the copy one; without a read figure, the datasheet's") {
  device::Device d;
  d.bandwidth_gbs = 4800;
  d.peaks = {{"fp32", 66.9}, {"bf16", 989.4}};
  d.measured = device::Measured{};
  d.measured->copy_gbs = 4105;
  d.measured->cite = "probe";
  const auto no_read = estimate::make_basis(d, estimate::BasisChoice::measured);
  CHECK(no_read.bandwidth.value == doctest::Approx(4800e9));
  CHECK(no_read.bandwidth.source == "datasheet");
  d.measured->read_gbs = 4262;
  const auto read = estimate::make_basis(d, estimate::BasisChoice::measured);
  CHECK(read.bandwidth.value == doctest::Approx(4262e9));
  CHECK(read.bandwidth.source == "measured");
  CHECK(read.bandwidth.cite == "probe");
}

TEST_CASE("h100-sxm and h200-sxm: one plan digest, different ceilings on different bandwidth bases") {
  const Loaded l;
  for (auto mode_rows : {std::pair{planner::Mode::decode, std::int64_t{1}}, std::pair{planner::Mode::batch, std::int64_t{16}},
                         std::pair{planner::Mode::prefill, std::int64_t{4096}}}) {
    const planner::Mode mode = mode_rows.first;
    const std::int64_t rows = mode_rows.second;
    const std::int64_t n = rows;  // a structured binding cannot be named inside CAPTURE (CONTRIBUTING.md)
    CAPTURE(n);
    estimate::Options opt;
    opt.mode = mode;
    opt.rows = rows;
    auto h100 = analyse(l, "llama-3.1-8b-instruct", "h100-sxm", opt);
    auto h200 = analyse(l, "llama-3.1-8b-instruct", "h200-sxm", opt);
    CHECK(h100->an.plan.digest == h200->an.plan.digest);
    CHECK(h100->an.requested.digest == h200->an.requested.digest);
    CHECK(h100->an.requested.weight_bytes == h200->an.requested.weight_bytes);  // same program, same traffic
    CHECK(h100->an.requested.ceiling_s != h200->an.requested.ceiling_s);
    // On the datasheet basis (the default) both have the same peaks and the h200 more bandwidth:
    // memory-bound steps are faster on it, compute-bound prefill no slower.
    if (mode != planner::Mode::prefill) CHECK(h100->an.requested.ceiling_s > h200->an.requested.ceiling_s);
    else CHECK(h100->an.requested.ceiling_s >= h200->an.requested.ceiling_s);
    CHECK(h100->an.basis.bandwidth.value == doctest::Approx(3350e9));
    CHECK(h100->an.basis.bandwidth.source == "datasheet");
    CHECK(h200->an.basis.bandwidth.value == doctest::Approx(4800e9));
    CHECK(h200->an.basis.bandwidth.source == "datasheet");
    // The measured basis switches the h200 to the figures measured on our own device.
    estimate::Options measured = opt;
    measured.basis = estimate::BasisChoice::measured;
    auto h200m = analyse(l, "llama-3.1-8b-instruct", "h200-sxm", measured);
    CHECK(h200m->an.basis.peak("bf16").source == "measured");
    CHECK(h200m->an.plan.digest == h200->an.plan.digest);
    CHECK(h200m->an.requested.ceiling_s > h200->an.requested.ceiling_s);
    CHECK(h100->an.fit.usable < h200->an.fit.usable);
  }
}

TEST_CASE("fp8 weights on a device without fp8 MMA show emulation or no path, never bf16") {
  const Loaded l;
  auto c = analyse(l, "qwen3-8b-fp8", "a100-sxm-80g");
  const auto& an = c->an;
  int linear_rows = 0;
  for (const auto& f : an.formats) {
    CAPTURE(f.node);
    if (f.node.find(" linear:") == std::string::npos) continue;
    if (f.node.find("lm_head") != std::string::npos) {
      CHECK(f.weight == "bf16");  // the recipe keeps the head in bf16
      continue;
    }
    ++linear_rows;
    CHECK(f.weight == "fp8-e4m3");
    for (const std::string* exec : {&f.decode, &f.prefill}) {
      CAPTURE(*exec);
      CHECK((exec->rfind("W8A16 emulate", 0) == 0 || *exec == "W8A16 no path"));
      CHECK(exec->find("native") == std::string::npos);
    }
  }
  CHECK(linear_rows == 4);  // qkv, o, gate_up, down

  // No group over an fp8 linear node says it runs bf16 weights.
  for (const auto& g : an.groups) {
    CAPTURE(g.nodes);
    CAPTURE(g.exec);
    const bool fp8_linear = g.nodes.find("linear:") != std::string::npos && g.nodes.find("linear:lm_head") == std::string::npos;
    if (!fp8_linear) continue;
    CHECK(g.exec.find("bf16 x bf16") == std::string::npos);
    CHECK(g.exec.rfind("W8A16 fp8-e4m3 x bf16", 0) == 0);
  }

  // Weights read per decode step, from the Qwen3-8B-FP8 config: hidden 4096, 36 layers, 32 heads,
  // 8 kv heads, head_dim 128, intermediate 12288, vocab 151936, untied head.
  const double hidden = 4096, layers = 36, heads = 32, kv = 8, hd = 128, inter = 12288, vocab = 151936;
  const double linear_per_layer = hidden * (heads + 2 * kv) * hd + heads * hd * hidden + hidden * 2 * inter + inter * hidden;
  const double norms_per_layer = (hidden + hd + hd + hidden) * 2;  // attn, q, k, mlp norm scales in bf16
  const double expected = layers * (linear_per_layer * 1.0 + norms_per_layer)  // fp8: one byte per weight
                          + hidden * 2                                         // one embedding row, bf16
                          + hidden * 2 + vocab * hidden * 2;                   // final norm and lm_head, bf16
  CHECK(an.key.decode_weight_bytes_read == doctest::Approx(expected).epsilon(1e-12));
  CHECK(an.decode.front().weight_bytes == doctest::Approx(expected).epsilon(1e-12));
  // Stored: the whole embedding table instead of one row.
  CHECK(an.key.weight_bytes == doctest::Approx(expected - hidden * 2 + vocab * hidden * 2).epsilon(1e-12));
}

TEST_CASE("a gap is costed as unfused reference ops, never cheaper than the kernel it replaces") {
  const Loaded base;
  const auto graph = base.graph("llama-3.1-8b-instruct");
  const auto t0 = base.target("h200-sxm");
  const auto basis = estimate::make_basis(*t0.device, estimate::BasisChoice::datasheet);
  const auto fused = estimate::estimate_case(base.lib, t0, graph, basis, planner::Mode::decode, 1, 4096, 1);
  REQUIRE(fused.gaps == 0);
  CHECK(fused.gap_s == 0);

  Loaded cut([] {
    auto t = met::testing::real_tree();
    t.files()["common/gemv.cuh"] = "#pragma once\n";  // every met_gemv* kernel undefined
    return t;
  }());
  const auto t1 = cut.target("h200-sxm");
  std::vector<estimate::GroupRow> rows;
  const auto gapped = estimate::estimate_case(cut.lib, t1, graph, basis, planner::Mode::decode, 1, 4096, 1, &rows);
  CHECK(gapped.gaps > 0);
  CHECK(gapped.gap_s > 0);
  CHECK(gapped.weight_bytes == doctest::Approx(fused.weight_bytes).epsilon(1e-12));  // the same weights are read
  CHECK(gapped.other_bytes > fused.other_bytes);  // every reference op round-trips its activations
  CHECK(gapped.ceiling_s >= fused.ceiling_s);
  double gap_sum = 0;
  for (const auto& r : rows) {
    if (r.group != "gap") continue;
    CAPTURE(r.nodes);
    CHECK(r.unit == "cuda_core");
    CHECK(r.cost.seconds > 0);
    gap_sum += r.step_seconds;
  }
  CHECK(gap_sum == doctest::Approx(gapped.gap_s).epsilon(1e-12));
}

TEST_CASE("a class's measured packet overhead adds to every group's time, naming the evidence") {
  Loaded l([] {
    auto t = met::testing::real_tree();
    std::string& f = t.files().at("ampere/HARDWARE.toml");
    f.replace(f.find("inherits = "), 0, "packet_overhead_us = 5.0\npacket_overhead_evidence = \"perf-data/a100/overhead.json\"\n");
    return t;
  }());
  auto c = analyse(l, "llama-3.1-8b-instruct", "a100-sxm-80g", datasheet());
  const auto& an = c->an;
  CHECK(an.requested.prediction_basis == "measured: perf-data/a100/overhead.json");
  double groups = 0;
  for (const auto& g : an.groups) {
    CAPTURE(g.group);
    CHECK(g.step_seconds == doctest::Approx(g.cost.seconds * g.count + 5e-6 * g.count).epsilon(1e-9));
    groups += g.count;
  }
  CHECK(groups > 0);
  CHECK(an.requested.prediction_s == doctest::Approx(an.requested.ceiling_s + 5e-6 * groups).epsilon(1e-9));
}

TEST_CASE("a family's measured efficiency divides its groups' ceilings into the prediction, naming the evidence") {
  Loaded l(gemv_measured("efficiency = 0.5\nevidence = \"perf-data/a100/test.json\""));
  auto c = analyse(l, "llama-3.1-8b-instruct", "a100-sxm-80g", datasheet());
  const auto& an = c->an;
  CHECK(an.requested.prediction_basis == "measured: perf-data/a100/test.json");
  CHECK(an.requested.prediction_s > an.requested.ceiling_s);
  double gemv = 0, other = 0;
  for (const auto& g : an.groups) {
    CAPTURE(g.group);
    const bool is_gemv = g.kernels.rfind("met_gemv", 0) == 0;
    const double ceiling = g.cost.seconds * g.count;
    if (is_gemv) {
      CHECK(g.step_seconds == doctest::Approx(2 * ceiling).epsilon(1e-12));
      gemv += ceiling;
    } else {
      CHECK(g.step_seconds == doctest::Approx(ceiling).epsilon(1e-12));
      other += ceiling;
    }
  }
  CHECK(gemv > 0);
  CHECK(an.requested.ceiling_s == doctest::Approx(gemv + other).epsilon(1e-9));
  CHECK(an.requested.prediction_s == doctest::Approx(2 * gemv + other).epsilon(1e-9));
  double shares = 0;
  for (const auto& g : an.groups) shares += g.share;
  CHECK(shares == doctest::Approx(1.0).epsilon(1e-9));
}

TEST_CASE("a family's fixed time per instruction is added once per group and layer on top of its efficiency (catches a fixed time "
          "scaled by the efficiency, or added once per step)") {
  Loaded l(gemv_measured("efficiency = 0.5\nevidence = \"perf-data/a100/test.json\"\nfixed_us_by_rows = { decode = [[1, 10.0]] }\n"
                         "fixed_evidence = \"perf-data/a100/small.json\""));
  auto c = analyse(l, "llama-3.1-8b-instruct", "a100-sxm-80g", datasheet());
  const auto& an = c->an;
  CHECK(an.requested.prediction_basis.find("perf-data/a100/small.json") != std::string::npos);
  int gemv_groups = 0;
  for (const auto& g : an.groups) {
    if (g.kernels.rfind("met_gemv", 0) != 0) continue;
    CAPTURE(g.group);
    CHECK(g.step_seconds == doctest::Approx(g.count * (2 * g.cost.seconds + 10e-6)).epsilon(1e-12));
    gemv_groups += g.count;
  }
  CHECK(gemv_groups > 0);
}

TEST_CASE(
    "each gap says what is missing: no kernel or no format path; no kernel names none where no rule covers the op "
    "(nemotron-3-nano-30b-a3b on h200-sxm)") {
  const Loaded l;
  auto c = analyse(l, "nemotron-3-nano-30b-a3b", "h200-sxm", datasheet());
  REQUIRE(c);
  REQUIRE_FALSE(c->an.gaps.empty());
  int no_rule = 0, named = 0;
  for (const auto& g : c->an.gaps) {
    CAPTURE(g.op);
    CAPTURE(g.why);
    CHECK((g.klass == "no kernel" || g.klass == "no format path" || g.klass == "unmeasured" || g.klass == "tensor-core policy"));
    if (g.klass != "no kernel") continue;
    // no rule of the chain matched the op: no kernel to name; a named kernel otherwise
    const bool none = g.why.find("no rule of class chain") == 0;
    CHECK(none == g.kernel.empty());
    ++(none ? no_rule : named);
    if (g.op == "moe_gate_up") CHECK(none);       // no rule covers it (relu2 experts)
    if (g.op == "moe_router") CHECK_FALSE(none);  // met_moe_router_topk's rule requires scoring 0
  }
  CHECK(named > 0);
  CHECK(no_rule > 0);
}

TEST_CASE(
    "the gap table carries tensor-core policy and unmeasured groups beside gaps, ranked by share (catches a GEMM on CUDA cores "
    "or an unmeasured family left out of it)") {
  estimate::Options prefill = datasheet();
  prefill.mode = planner::Mode::prefill;
  prefill.rows = 4096;
  {
    const Loaded l(prefill_measured());
    auto c = analyse(l, "llama-3.1-8b-instruct", "h200-sxm", prefill);
    CHECK(c->an.gaps.empty());  // every family measured, every GEMM on the tensor cores
  }
  // The gemm family moved to CUDA cores and attention_prefill's evidence taken away.
  Loaded l([] {
    auto t = prefill_measured();
    std::string& fams = t.files()["hopper/KERNEL_FAMILIES.toml"];
    const auto gemm = fams.find("id = \"gemm\"\nunit = \"tensor_core\"");
    REQUIRE(gemm != std::string::npos);
    fams.replace(fams.find("tensor_core", gemm), std::string("tensor_core").size(), "cuda_core");
    // attention_prefill's [[family]] table dropped from the class's EVIDENCE.toml
    std::string& evidence = t.files()["hopper/EVIDENCE.toml"];
    const auto attn = evidence.find("[[family]]\nid = \"attention_prefill\"");
    REQUIRE(attn != std::string::npos);
    const auto next = evidence.find("[[family]]", attn + 1);
    REQUIRE(next != std::string::npos);
    evidence.erase(attn, next - attn);
    return t;
  }());
  auto c = analyse(l, "llama-3.1-8b-instruct", "h200-sxm", prefill);
  std::set<std::string> classes;
  for (const auto& g : c->an.gaps) {
    CAPTURE(g.op);
    classes.insert(g.klass);
    CHECK(g.step_seconds > 0);
    CHECK_FALSE(g.kernel.empty());
    if (g.klass == "tensor-core policy") CHECK(g.why.find("wants tensor cores") != std::string::npos);
    if (g.klass == "unmeasured") CHECK(g.why.find("family 'attention_prefill' has no measured efficiency") != std::string::npos);
  }
  CHECK(classes == std::set<std::string>{"tensor-core policy", "unmeasured"});
  for (std::size_t i = 1; i < c->an.gaps.size(); ++i) CHECK(c->an.gaps[i - 1].share >= c->an.gaps[i].share);
}

TEST_CASE("a short prompt's GEMMs are predicted on the share of the SMs their 128 x 128 tiles and their K parts fill "
          "(catches a prediction that ignores tile occupancy, or counts a split K emit does not cut)") {
  // meta-llama/Llama-3.2-1B-Instruct: hidden 2048, 32 heads and 8 KV heads of 64, intermediate 8192.
  const Loaded l;
  const auto graph = l.graph("llama-3.2-1b-instruct");
  const auto target = l.target("h200-sxm");
  REQUIRE(target.device->units == 132);
  // The class's tile is its GEMM body's (kernels/common/interp/smem.h), not a second figure.
  REQUIRE(target.chain.leaf().gemm_tile == std::make_pair<std::int64_t, std::int64_t>(MET_GEMM_TILE, MET_GEMM_TILE));
  const auto basis = estimate::make_basis(*target.device, estimate::BasisChoice::datasheet);
  std::vector<estimate::GroupRow> groups;
  estimate::estimate_case(l.lib, target, graph, basis, planner::Mode::prefill, 128, 4096, 1, &groups);
  // Output columns -> 128 x 128 tiles at T = 128: qkv 3072 (24), o 2048 (16), gate_up's activation
  // 8192 (64), down 2048 (16); each fits one wave of 132 SMs. Hopper's split K (HARDWARE.toml
  // gemm_k_split [8, 1024]) runs each tile's K in as many parts as the wave holds, 1024 K values a
  // part at least: qkv and o (K 2048) 2 parts, down (K 8192) 8; the gated gate_up none.
  REQUIRE(target.chain.leaf().gemm_k_split == std::make_pair<std::int64_t, std::int64_t>(8, 1024));
  CHECK(estimate::gemm_k_parts(24, 2048, 132, target.chain.leaf().gemm_k_split) == 2);
  CHECK(estimate::gemm_k_parts(16, 8192, 132, target.chain.leaf().gemm_k_split) == 8);
  CHECK(estimate::gemm_k_parts(16, 8192, 132, std::nullopt) == 1);
  const std::map<std::string, double> tiles = {{"linear:qkv", 48}, {"linear:o", 32}, {"linear:gate_up", 64}, {"linear:down", 128}};
  int seen = 0;
  for (const auto& g : groups) {
    CAPTURE(g.nodes);
    if (g.kernels.find("gemm") == std::string::npos) {
      CHECK(g.fit_seconds == doctest::Approx(g.cost.seconds).epsilon(1e-12));
      continue;
    }
    for (const auto& [node, n] : tiles)
      if (g.nodes.find(node) != std::string::npos) {
        ++seen;
        CHECK(g.fit_seconds ==
              doctest::Approx(std::max(g.cost.memory_seconds, g.cost.compute_seconds * 132 / n)).epsilon(1e-12));
        CHECK(g.fit_seconds >= g.cost.seconds);
      }
  }
  CHECK(seen == 4);
}

TEST_CASE(
    "verify of K tokens reads the cache of its context and computes the head on K rows (catches verify costed as a prefill from "
    "an empty cache, or its head on one row)") {
  const Loaded l;
  const auto graph = l.graph("llama-3.1-8b-instruct");
  const auto target = l.target("h200-sxm");
  const auto basis = estimate::make_basis(*target.device, estimate::BasisChoice::datasheet);
  const std::int64_t k = 8;
  std::vector<estimate::GroupRow> rows;
  const auto short_cache = estimate::estimate_case(l.lib, target, graph, basis, planner::Mode::verify, k, 512, 1, &rows);
  const auto long_cache = estimate::estimate_case(l.lib, target, graph, basis, planner::Mode::verify, k, 8192, 1);
  CHECK(short_cache.mode == "verify");
  // K rows attend to the cache: the attention streams its KV, which grows with the context.
  CHECK(long_cache.kv_bytes > short_cache.kv_bytes * 8);
  CHECK(long_cache.flops > short_cache.flops);
  CHECK(long_cache.weight_bytes == doctest::Approx(short_cache.weight_bytes).epsilon(1e-12));
  // The head's logits on every row, where a prefill runs it on the last row of each prompt a packed
  // launch can finish: 16 rows of a chunk of 64.
  std::vector<estimate::GroupRow> prefill_rows;
  estimate::estimate_case(l.lib, target, graph, basis, planner::Mode::prefill, 64, 512, 1, &prefill_rows);
  auto head_flops = [](const std::vector<estimate::GroupRow>& groups) {
    double f = 0;
    for (const auto& g : groups)
      if (g.scope == "post") f += g.cost.flops;
    return f;
  };
  const double head = 2.0 * Llama8B::hidden * Llama8B::vocab;
  CHECK(head_flops(prefill_rows) == doctest::Approx(16 * head).epsilon(0.01));
  CHECK(head_flops(rows) == doctest::Approx(k * head).epsilon(0.01));
  CHECK(short_cache.tokens_per_s == doctest::Approx(static_cast<double>(k) / short_cache.ceiling_s));
}

TEST_CASE("moe_gate_up and moe_down at C rows read the expected distinct experts, E (1 - (1 - k/E)^C), once each, as the cpu bodies do (catches a cost charging k experts per row, or all E)") {
  // Qwen3-30B-A3B's expert block (config.json: hidden 2048, moe_intermediate_size 768, 128 experts, top 8).
  const double hidden = 2048, inter = 768, experts = 128, k = 8, bf16 = 2;
  for (std::int64_t rows : {1, 4, 16, 64}) {
    CAPTURE(rows);
    const double touched = experts * (1 - std::pow(1 - k / experts, static_cast<double>(rows)));
    for (const char* op : {"moe_gate_up", "moe_down"}) {
      met::model::Node n;
      n.op = op;
      n.params = {{"hidden", hidden}, {"inter", inter}, {"experts", experts}, {"top_k", k}};
      n.weight_format = met::Format::bf16;
      estimate::StepShape s;
      s.rows = rows;
      const auto c = estimate::node_cost(n, s);
      const double per_expert = (std::string(op) == "moe_gate_up" ? 2 : 1) * inter * hidden * bf16;
      CHECK(c.weight_bytes == doctest::Approx(touched * per_expert));
      CHECK(c.flops == doctest::Approx(2.0 * static_cast<double>(rows) * k * per_expert / bf16));
    }
  }
}

TEST_CASE("a prefill's routed experts are predicted as the grouped body runs them: per row part (one where the class sorts the step's slots first), each expert's slots in blocks of the body's rows, a partial block computed whole (catches flops of R x top_k slots alone, a block size that is not the body's, or row parts emit does not cut)") {
  // The class's block is the body's (kernels/common/interp/smem.h), not a second figure: hopper's
  // wgmma tiles of 128 places over the sorted slots (one row part).
  const Loaded l;
  const auto target = l.target("h200-sxm");
  REQUIRE(target.chain.leaf().moe_gemm_block == std::make_pair<std::int64_t, std::int64_t>(MET_MOE_WGMMA_BM, 2 * MET_GEMM_TILE));
  REQUIRE(target.chain.leaf().moe_gemm_sorted);
  // Row parts: enough that 132 SMs each get a slice, of at least 1024 rows.
  CHECK(estimate::moe_row_parts(4096, 2048, 64, 132) == 4);   // 32 column tiles: 5 wanted, 4 allowed
  CHECK(estimate::moe_row_parts(512, 2048, 64, 132) == 1);
  CHECK(estimate::moe_row_parts(32768, 768, 32, 132) == 6);   // 24 tiles: 6 parts
  // Blocks: every slot its expert's whenever top_k = experts; one token per part fills one block.
  CHECK(estimate::moe_blocks(4, 4, 100, 1, 64) == doctest::Approx(4 * 2));
  CHECK(estimate::moe_blocks(8, 2, 8, 8, 64) == doctest::Approx(8 * 8 * 0.25));  // 1 token a part: P(routed) = 1/4
  // Binomial(2, 1/2) slots an expert, blocks of 1: E[n] = 1 block each; of 2: P(n > 0) = 3/4.
  CHECK(estimate::moe_blocks(2, 1, 2, 1, 1) == doctest::Approx(2 * 1.0));
  CHECK(estimate::moe_blocks(2, 1, 2, 1, 2) == doctest::Approx(2 * 0.75));
  // Many slots an expert: close to slots / 64 plus the expected half-filled last block.
  const double b = estimate::moe_blocks(128, 8, 4096, 4, 64);  // 64 slots an expert a part on average
  CHECK(b > 128 * 4 * 1.0);
  CHECK(b < 128 * 4 * 2.0);
  // Qwen3-30B-A3B (128 experts, top 8) prefill of 4096 on h200-sxm: the experts' flops are the
  // blocks' rows, above the routed slots'; decode rows are unchanged (no grouped body).
  const auto graph = l.graph("qwen3-30b-a3b");
  const auto basis = estimate::make_basis(*target.device, estimate::BasisChoice::datasheet);
  auto flops_of = [&](planner::Mode mode, std::int64_t rows, const std::string& op) {
    std::vector<estimate::GroupRow> groups;
    estimate::estimate_case(l.lib, target, graph, basis, mode, rows, 4096, 1, &groups);
    double f = 0;
    for (const auto& g : groups)
      if (g.nodes.find(op) != std::string::npos) f += g.cost.flops * g.count;
    return f;
  };
  const double hidden = graph.params.at("hidden"), inter = graph.params.at("moe_inter"), layers = graph.params.at("layers");
  const double slots = 4096.0 * 8, down_slots = 2 * slots * inter * hidden * layers;
  const double down = flops_of(planner::Mode::prefill, 4096, "moe_down");
  CHECK(flops_of(planner::Mode::batch, 16, "moe_down") == doctest::Approx(2 * 16.0 * 8 * inter * hidden * layers).epsilon(1e-9));
  CHECK(down == doctest::Approx(2 * estimate::moe_blocks(128, 8, 4096, 1, MET_MOE_WGMMA_BM) * MET_MOE_WGMMA_BM * inter * hidden * layers)
                     .epsilon(1e-9));
  CHECK(down > 1.1 * down_slots);
}
