// Every cpu reference op body (kernels/cpu/) against straightforward fp64 loops on seeded random
// inputs, every fusion against the unfused op sequence (bit for bit), and the weight decoders
// against their format definitions. Cases are named by their parameters; tolerances are stated.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../../kernels/cpu/attention.hpp"
#include "../../kernels/cpu/collective.hpp"
#include "../../kernels/cpu/embed.hpp"
#include "../../kernels/cpu/gemm.hpp"
#include "../../kernels/cpu/gemv.hpp"
#include "../../kernels/cpu/moe.hpp"
#include "../../kernels/cpu/moe_grouped.hpp"
#include "../../kernels/cpu/sample.hpp"

namespace {

using met::cpu::bf16_to_f32;
using met::cpu::f32_to_bf16;
using Bf16 = std::vector<std::uint16_t>;
using Dbl = std::vector<double>;

constexpr double kBf16Rel = 1e-2;  // bf16 outputs: max |got - ref| <= 1e-2 * max |ref|
constexpr float kEps = 1e-6f;

std::size_t sz(std::int64_t n) { return static_cast<std::size_t>(n); }

Bf16 random_bf16(std::mt19937& g, std::int64_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  Bf16 v(sz(n));
  for (auto& e : v) e = f32_to_bf16(d(g));
  return v;
}

Dbl to_dbl(const Bf16& v) {
  Dbl d(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) d[i] = bf16_to_f32(v[i]);
  return d;
}

void check_close(const Bf16& got, const Dbl& ref, double rel = kBf16Rel) {
  REQUIRE(got.size() == ref.size());
  double max_ref = 0, max_err = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(ref[i]));
    max_err = std::max(max_err, std::abs(static_cast<double>(bf16_to_f32(got[i])) - ref[i]));
  }
  INFO("max_err=" << max_err << " max_ref=" << max_ref);
  CHECK(max_err <= rel * max_ref);
}

// ---- format definitions, written independently of kernels/cpu/quant.hpp ----

double def_e4m3(std::uint8_t v) {
  const int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
  if (e == 15 && m == 7) return NAN;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

double def_e2m1(std::uint8_t v) {
  static const double kMag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};  // OCP MX spec table
  return (v & 8) ? -kMag[v & 7] : kMag[v & 7];
}

// A weight in some format, its MetHostWeight view and its exact fp64 value.
struct TestWeight {
  std::vector<std::uint8_t> bytes;
  Bf16 bf16;
  std::vector<float> fscales;
  std::vector<std::uint8_t> bscales;
  MetHostWeight w{};
  Dbl value;  // [rows * cols]
  double at(std::int64_t r, std::int64_t c) const { return value[sz(r * w.cols + c)]; }
};

std::uint8_t random_e4m3(std::mt19937& g) {
  std::uniform_int_distribution<int> d(0, 255);
  for (;;) {
    const auto v = static_cast<std::uint8_t>(d(g));
    if ((v & 0x7f) != 0x7f) return v;
  }
}

TestWeight make_weight(std::mt19937& g, MetWeightFormat f, std::int64_t rows, std::int64_t cols,
                       std::int32_t block_rows = 1, std::int32_t block_cols = 1) {
  TestWeight t;
  t.w.format = f;
  t.w.rows = rows;
  t.w.cols = cols;
  t.w.tensor_scale = 1.0f;
  t.value.resize(sz(rows * cols));
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  std::uniform_int_distribution<int> nib(0, 15);
  switch (f) {
    case MET_WEIGHT_BF16:
      t.bf16 = random_bf16(g, rows * cols);
      t.value = to_dbl(t.bf16);
      t.w.data = t.bf16.data();
      break;
    case MET_WEIGHT_FP8_E4M3: {
      t.w.block_rows = block_rows;
      t.w.block_cols = block_cols;
      const std::int64_t br = (rows + block_rows - 1) / block_rows, bc = (cols + block_cols - 1) / block_cols;
      for (std::int64_t i = 0; i < br * bc; ++i) t.fscales.push_back(u(g) / 256.0f);
      for (std::int64_t i = 0; i < rows * cols; ++i) t.bytes.push_back(random_e4m3(g));
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          t.value[sz(r * cols + c)] = static_cast<double>(static_cast<float>(
              def_e4m3(t.bytes[sz(r * cols + c)]) * t.fscales[sz((r / block_rows) * bc + c / block_cols)]));
      t.w.data = t.bytes.data();
      t.w.scales = t.fscales.data();
      break;
    }
    case MET_WEIGHT_MXFP4:
    case MET_WEIGHT_NVFP4: {
      const bool mx = f == MET_WEIGHT_MXFP4;
      const std::int64_t block = mx ? 32 : 16;
      std::vector<std::uint8_t> codes(sz(rows * cols));
      for (auto& c : codes) c = static_cast<std::uint8_t>(nib(g));
      for (std::int64_t i = 0; i < rows * cols; i += 2)
        t.bytes.push_back(static_cast<std::uint8_t>(codes[sz(i)] | (codes[sz(i + 1)] << 4)));
      std::uniform_int_distribution<int> e8(120, 126);
      for (std::int64_t i = 0; i < rows * cols / block; ++i)
        t.bscales.push_back(mx ? static_cast<std::uint8_t>(e8(g)) : static_cast<std::uint8_t>(0x20 + nib(g)));
      if (!mx) t.w.tensor_scale = 0.0625f;
      for (std::int64_t i = 0; i < rows * cols; ++i) {
        const double s = mx ? std::ldexp(1.0, t.bscales[sz(i / block)] - 127)
                            : def_e4m3(t.bscales[sz(i / block)]) * t.w.tensor_scale;
        t.value[sz(i)] = static_cast<double>(static_cast<float>(def_e2m1(codes[sz(i)]) * s));
      }
      t.w.data = t.bytes.data();
      t.w.scales = t.bscales.data();
      break;
    }
  }
  return t;
}

// ---- fp64 reference ops ----

Dbl ref_rmsnorm(const Dbl& x, const Dbl& w, std::int64_t count, std::int64_t dim) {
  Dbl y(x.size());
  for (std::size_t base = 0; base < x.size(); base += sz(dim)) {
    double ss = 0;
    for (std::int64_t i = 0; i < dim; ++i) ss += x[base + sz(i)] * x[base + sz(i)];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + kEps);
    for (std::int64_t i = 0; i < dim; ++i) y[base + sz(i)] = x[base + sz(i)] * inv * w[sz(i)];
  }
  (void)count;
  return y;
}

Dbl ref_linear(const Dbl& x, const TestWeight& t, std::int64_t rows) {
  Dbl y(sz(rows * t.w.rows));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < t.w.rows; ++o) {
      double acc = 0;
      for (std::int64_t c = 0; c < t.w.cols; ++c) acc += x[sz(r * t.w.cols + c)] * t.at(o, c);
      y[sz(r * t.w.rows + o)] = acc;
    }
  return y;
}

// inv_freq: the table a scaled rope passes, or null for theta^(-2i/rot).
void ref_rope(double* x, int heads, int head_dim, int rot, double theta, int pos, const float* inv_freq = nullptr) {
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < rot / 2; ++i) {
      const double a = pos * (inv_freq ? static_cast<double>(inv_freq[i]) : std::pow(theta, -2.0 * i / rot));
      double& x1 = x[h * head_dim + i];
      double& x2 = x[h * head_dim + i + rot / 2];
      const double n1 = x1 * std::cos(a) - x2 * std::sin(a), n2 = x2 * std::cos(a) + x1 * std::sin(a);
      x1 = n1;
      x2 = n2;
    }
}

double ref_silu(double g) { return g / (1 + std::exp(-g)); }
double ref_gelu(double g) { return 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))); }

MetHostWeight slice_rows(const TestWeight& t, std::int64_t first, std::int64_t rows) {
  MetHostWeight w = t.w;
  REQUIRE(t.w.format == MET_WEIGHT_BF16);
  w.data = t.bf16.data() + first * t.w.cols;
  w.rows = rows;
  return w;
}

}  // namespace

// ---------------------------------------------------------------- formats

TEST_CASE("bf16 rounding ties to even, keeps NaN and overflows to inf (a truncating converter fails)") {
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == f32_to_bf16(1.0f));                  // tie -> even
  CHECK(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))) == 1.0f + std::ldexp(1.0f, -6));
  CHECK(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20))) == 1.0f + std::ldexp(1.0f, -7));
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  CHECK(std::isinf(bf16_to_f32(f32_to_bf16(3.4028235e38f))));
  CHECK(f32_to_bf16(-0.0f) == 0x8000);
  for (std::uint32_t h = 0; h < 0x10000; ++h) {  // every finite bf16 round-trips
    const auto b = static_cast<std::uint16_t>(h);
    if ((h & 0x7f80) == 0x7f80) continue;
    REQUIRE(f32_to_bf16(bf16_to_f32(b)) == b);
  }
}

TEST_CASE("fp8-e4m3 decode of all 256 codes equals the format definition (wrong bias, subnormals or NaN fail)") {
  for (int v = 0; v < 256; ++v) {
    const auto code = static_cast<std::uint8_t>(v);
    const double want = def_e4m3(code);
    const float got = met::cpu::fp8_e4m3_to_f32(code);
    INFO("code=" << v);
    if (std::isnan(want)) {
      CHECK(std::isnan(got));
    } else {
      CHECK(static_cast<double>(got) == want);
      CHECK(std::signbit(got) == ((v & 0x80) != 0));
    }
  }
  CHECK(met::cpu::fp8_e4m3_to_f32(0x7e) == 448.0f);
  CHECK(met::cpu::fp8_e4m3_to_f32(0x01) == std::ldexp(1.0f, -9));
  CHECK(met::cpu::fp8_e4m3_to_f32(0x08) == std::ldexp(1.0f, -6));
  CHECK(std::isnan(met::cpu::fp8_e4m3_to_f32(0xff)));
}

TEST_CASE("fp4-e2m1 decode of all 16 codes and e8m0 scales equal the OCP MX definition") {
  for (int v = 0; v < 16; ++v) CHECK(static_cast<double>(met::cpu::fp4_e2m1_to_f32(static_cast<std::uint8_t>(v))) == def_e2m1(static_cast<std::uint8_t>(v)));
  for (int v = 0; v < 255; ++v) CHECK(met::cpu::e8m0_to_f32(static_cast<std::uint8_t>(v)) == std::ldexp(1.0f, v - 127));
  CHECK(std::isnan(met::cpu::e8m0_to_f32(0xff)));
}

TEST_CASE("weight_row decodes exactly: fp8-e4m3 block=16x32, mxfp4, nvfp4 rows=40 cols=96 (a wrong scale index or nibble order fails)") {
  std::mt19937 g(11);
  const TestWeight ts[] = {make_weight(g, MET_WEIGHT_FP8_E4M3, 40, 96, 16, 32), make_weight(g, MET_WEIGHT_MXFP4, 40, 96),
                           make_weight(g, MET_WEIGHT_NVFP4, 40, 96)};
  for (const auto& t : ts) {
    std::vector<float> row(96);
    for (std::int64_t r = 0; r < 40; ++r) {
      met::cpu::weight_row(t.w, r, row.data());
      for (std::int64_t c = 0; c < 96; ++c) REQUIRE(static_cast<double>(row[sz(c)]) == t.at(r, c));
    }
  }
}

// ---------------------------------------------------------------- gemv / gemm

TEST_CASE("gemv per weight format rows=3 in=256 out=96 matches fp64 (rel 1e-2)") {
  const std::pair<MetWeightFormat, const char*> fmts[] = {
      {MET_WEIGHT_BF16, "bf16"}, {MET_WEIGHT_FP8_E4M3, "fp8-e4m3 block=32x128"}, {MET_WEIGHT_MXFP4, "mxfp4"}, {MET_WEIGHT_NVFP4, "nvfp4"}};
  for (auto [f, name] : fmts) {
    SUBCASE(name) {
      std::mt19937 g(21);
      const auto t = make_weight(g, f, 96, 256, 32, 128);
      const auto x = random_bf16(g, 3 * 256);
      Bf16 y(3 * 96);
      met_gemv(x.data(), &t.w, y.data(), 3, 0, t.w.rows);
      check_close(y, ref_linear(to_dbl(x), t, 3));
    }
  }
}

TEST_CASE("gemm rows=70 in=128 out=48 bf16 and fp8-e4m3 matches fp64 and equals gemv bit for bit (row blocking that drops a tail fails)") {
  for (auto f : {MET_WEIGHT_BF16, MET_WEIGHT_FP8_E4M3}) {
    std::mt19937 g(31);
    const auto t = make_weight(g, f, 48, 128, 16, 64);
    const auto x = random_bf16(g, 70 * 128);
    Bf16 y(70 * 48), yv(70 * 48);
    met_gemm(x.data(), &t.w, y.data(), 70, 0, t.w.rows);
    met_gemv(x.data(), &t.w, yv.data(), 70, 0, t.w.rows);
    check_close(y, ref_linear(to_dbl(x), t, 70));
    CHECK(y == yv);
    Bf16 yt(70 * 48);  // two output-column tiles make the same matrix
    met_gemm(x.data(), &t.w, yt.data(), 70, 0, 20);
    met_gemm(x.data(), &t.w, yt.data(), 70, 20, t.w.rows);
    CHECK(yt == y);
  }
}

TEST_CASE("gemv_f32 and gemm_f32 read activations as the weight's path does: with an fp8 weight of a static activation scale (W8A8, modelopt) bf16 of their sums is met_gemv and met_gemm bit for bit (a body that reads the activations as bf16 fails)") {
  std::mt19937 g(41);
  auto t = make_weight(g, MET_WEIGHT_FP8_E4M3, 48, 128, 1, 128);
  t.w.act_scale = 0.0173f;  // coarse enough that e4m3(x / s) * s moves most activations
  const auto x = random_bf16(g, 70 * 128);
  Bf16 yv(70 * 48), ym(70 * 48);
  met_gemv(x.data(), &t.w, yv.data(), 70, 0, t.w.rows);
  met_gemm(x.data(), &t.w, ym.data(), 70, 0, t.w.rows);
  std::vector<float> fv(70 * 48), fm(70 * 48);
  met_gemv_f32(x.data(), &t.w, fv.data(), 70, 0, t.w.rows);
  met_gemm_f32(x.data(), &t.w, fm.data(), 70, 0, t.w.rows);
  CHECK(fm == fv);
  Bf16 rounded(fv.size());
  for (std::size_t i = 0; i < fv.size(); ++i) rounded[i] = met::cpu::f32_to_bf16(fm[i]);
  CHECK(rounded == yv);
  CHECK(rounded == ym);
}

TEST_CASE("gemv_f32 and gemm_f32 rows=70 in=128 out=48 keep gemv's fp32 sums unrounded: bf16 of them is met_gemv bit for bit, and they match fp64 (a body that rounds or drops a tile fails)") {
  std::mt19937 g(37);
  const auto t = make_weight(g, MET_WEIGHT_BF16, 48, 128, 16, 64);
  const auto x = random_bf16(g, 70 * 128);
  Bf16 yv(70 * 48);
  met_gemv(x.data(), &t.w, yv.data(), 70, 0, t.w.rows);
  std::vector<float> fv(70 * 48), fm(70 * 48);
  met_gemv_f32(x.data(), &t.w, fv.data(), 70, 0, t.w.rows);
  met_gemm_f32(x.data(), &t.w, fm.data(), 70, 0, 20);
  met_gemm_f32(x.data(), &t.w, fm.data(), 70, 20, t.w.rows);
  CHECK(fm == fv);
  Bf16 rounded(fv.size());
  bool any_unrounded = false;
  for (std::size_t i = 0; i < fv.size(); ++i) {
    rounded[i] = met::cpu::f32_to_bf16(fv[i]);
    any_unrounded = any_unrounded || met::cpu::round_bf16(fv[i]) != fv[i];
  }
  CHECK(rounded == yv);
  CHECK(any_unrounded);
  check_close(rounded, ref_linear(to_dbl(x), t, 70));
}

TEST_CASE(
    "allreduce_residual ranks=3 rows=2 width=5 adds bf16(p0 + p1 + p2) to x in rows [1, 2) x columns [1, 4) only; allgather_cols "
    "lays the ranks' columns side by side, a slice's columns at a time (a rank dropped, a wrong stride or a slice that writes "
    "past its columns fails)") {
  std::vector<float> p0(10), p1(10), p2(10);
  Bf16 x(10);
  for (int i = 0; i < 10; ++i) {
    p0[i] = 0.25f * static_cast<float>(i);
    p1[i] = 1.0f;
    p2[i] = -0.5f * static_cast<float>(i % 3);
    x[i] = met::cpu::f32_to_bf16(static_cast<float>(i));
  }
  const MetPeers peers{3, {p0.data(), p1.data(), p2.data()}};
  const Bf16 before = x;
  met_allreduce_residual(x.data(), &peers, /*width=*/5, /*row0=*/1, /*row1=*/2, /*col0=*/1, /*col1=*/4, /*accumulate=*/1);
  for (int i = 0; i < 10; ++i) {
    CAPTURE(i);
    const bool in_slice = i >= 5 && i % 5 >= 1 && i % 5 < 4;
    const float want = !in_slice ? met::cpu::bf16_to_f32(before[i])
                                 : met::cpu::round_bf16(static_cast<float>(i) + met::cpu::round_bf16(p0[i] + p1[i] + p2[i]));
    CHECK(met::cpu::bf16_to_f32(x[i]) == want);
  }
  // accumulate 0: the rounded sum replaces x (the projection's output before a post norm).
  Bf16 y = before;
  met_allreduce_residual(y.data(), &peers, /*width=*/5, /*row0=*/0, /*row1=*/2, /*col0=*/2, /*col1=*/5, /*accumulate=*/0);
  for (int i = 0; i < 10; ++i) {
    CAPTURE(i);
    const float want = i % 5 < 2 ? met::cpu::bf16_to_f32(before[i]) : met::cpu::round_bf16(p0[i] + p1[i] + p2[i]);
    CHECK(met::cpu::bf16_to_f32(y[i]) == want);
  }
  Bf16 a(4), b(4), out(8, met::cpu::f32_to_bf16(-1.0f));
  for (int i = 0; i < 4; ++i) {
    a[i] = met::cpu::f32_to_bf16(static_cast<float>(i));
    b[i] = met::cpu::f32_to_bf16(static_cast<float>(10 + i));
  }
  const MetPeers parts{2, {a.data(), b.data()}};
  met_allgather_cols(&parts, out.data(), /*width=*/2, /*row0=*/0, /*row1=*/2, /*col0=*/1, /*col1=*/3);
  const float first[] = {-1, 1, 10, -1, -1, 3, 12, -1};
  for (int i = 0; i < 8; ++i) CHECK(met::cpu::bf16_to_f32(out[i]) == first[i]);
  met_allgather_cols(&parts, out.data(), /*width=*/2, /*row0=*/0, /*row1=*/2, /*col0=*/0, /*col1=*/1);
  met_allgather_cols(&parts, out.data(), /*width=*/2, /*row0=*/0, /*row1=*/2, /*col0=*/3, /*col1=*/4);
  const float want[] = {0, 1, 10, 11, 2, 3, 12, 13};
  for (int i = 0; i < 8; ++i) CHECK(met::cpu::bf16_to_f32(out[i]) == want[i]);
}

// x quantised as a static W8A8 path reads it: the e4m3 value nearest to x / s (ties to the even
// code, saturating at 448), times s; found by search over the codes' definition (def_e4m3).
Dbl quantise_static(const Bf16& x, float s) {
  Dbl out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = bf16_to_f32(x[i]) / s, a = std::min(std::abs(v), 448.0);  // x / s in fp32, as the body divides
    int best = 0;
    for (int c = 1; c < 127; ++c) {
      const double d = std::abs(def_e4m3(static_cast<std::uint8_t>(c)) - a), bd = std::abs(def_e4m3(static_cast<std::uint8_t>(best)) - a);
      if (d < bd || (d == bd && c % 2 == 0)) best = c;
    }
    out[i] = std::copysign(def_e4m3(static_cast<std::uint8_t>(best)), v) * s;
  }
  return out;
}

TEST_CASE("W8A8 static (act_scale 0.01): gemv and gemm read every activation as e4m3(x / s) * s and match fp64 over the quantised inputs; W8A16 of the same weight does not (an act_scale left unread fails)") {
  std::mt19937 g(33);
  auto t = make_weight(g, MET_WEIGHT_FP8_E4M3, 40, 128, 1, 128);
  const auto x = random_bf16(g, 5 * 128, -3, 3);
  Bf16 y16(5 * 40), y8(5 * 40), y8m(5 * 40);
  met_gemv(x.data(), &t.w, y16.data(), 5, 0, t.w.rows);
  t.w.act_scale = 0.01f;
  met_gemv(x.data(), &t.w, y8.data(), 5, 0, t.w.rows);
  met_gemm(x.data(), &t.w, y8m.data(), 5, 0, t.w.rows);
  const Dbl ref8 = ref_linear(quantise_static(x, 0.01f), t, 5), ref16 = ref_linear(to_dbl(x), t, 5);
  check_close(y8, ref8, 1e-2);
  CHECK(y8m == y8);
  double max_ref = 0, far = 0;
  for (std::size_t i = 0; i < ref8.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(ref16[i]));
    far = std::max(far, std::abs(ref8[i] - ref16[i]));
  }
  CHECK(far > 1e-2 * max_ref);  // the two paths are told apart at the tolerance above
  check_close(y16, ref16, 1e-2);
}

// ---------------------------------------------------------------- elementwise

TEST_CASE("embed rows=5 vocab=50 dim=64 bf16 and fp8-e4m3 gathers the token rows") {
  for (auto f : {MET_WEIGHT_BF16, MET_WEIGHT_FP8_E4M3}) {
    std::mt19937 g(41);
    const auto t = make_weight(g, f, 50, 64, 1, 64);
    const std::int32_t tok[5] = {3, 0, 49, 3, 17};
    Bf16 out(5 * 64);
    met_embed(tok, &t.w, 5, out.data());
    Dbl ref(5 * 64);
    for (int r = 0; r < 5; ++r)
      for (int c = 0; c < 64; ++c) ref[sz(r * 64 + c)] = t.at(tok[r], c);
    check_close(out, ref, /*rel=*/1.0 / 256);  // one bf16 rounding
  }
}

TEST_CASE("gather_rows rows=4 src_rows=6 width=40 copies the indexed rows bit for bit; an index outside x reads row 0") {
  std::mt19937 g(47);
  const auto x = random_bf16(g, 6 * 40, -3, 3);
  const std::int32_t index[4] = {5, 0, 2, -1};
  Bf16 out(4 * 40);
  met_gather_rows(x.data(), index, 4, 6, 40, out.data());
  const std::int32_t from[4] = {5, 0, 2, 0};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 40; ++c) CHECK(out[sz(r * 40 + c)] == x[sz(from[r] * 40 + c)]);
  const std::int32_t past[1] = {6};
  met_gather_rows(x.data(), past, 1, 6, 40, out.data());
  for (int c = 0; c < 40; ++c) CHECK(out[sz(c)] == x[sz(c)]);
}

TEST_CASE("rmsnorm rows=3 count=4 dim=64 matches fp64 (per-vector rms, not per-row, is required)") {
  std::mt19937 g(51);
  const auto x = random_bf16(g, 3 * 4 * 64, -3, 3);
  const auto w = random_bf16(g, 64, 0.5f, 1.5f);
  Bf16 y(x.size());
  met_rmsnorm(x.data(), w.data(), y.data(), 3, 4, 64, kEps);
  check_close(y, ref_rmsnorm(to_dbl(x), to_dbl(w), 4, 64));
}

TEST_CASE("rope heads=4 kv_heads=2 head_dim=64 rotary_dim=32 positions={0,7,4095} theta=1e4 matches fp64 (interleaved pairing fails)") {
  std::mt19937 g(61);
  const MetRopeShape s{4, 2, 64, 32, 10000.0f};
  const std::int64_t qs = 4 * 64 + 8, ks = 2 * 64 + 8;  // strided rows
  auto q = random_bf16(g, 3 * qs), k = random_bf16(g, 3 * ks);
  auto rq = to_dbl(q), rk = to_dbl(k);
  const std::int32_t pos[3] = {0, 7, 4095};
  met_rope(q.data(), qs, k.data(), ks, pos, 3, &s, /*inv_freq=*/nullptr);
  for (int r = 0; r < 3; ++r) {
    ref_rope(rq.data() + r * qs, 4, 64, 32, 1e4, pos[r]);
    ref_rope(rk.data() + r * ks, 2, 64, 32, 1e4, pos[r]);
  }
  check_close(q, rq);
  check_close(k, rk);
}

TEST_CASE("rope with an inv_freq table rotates by the table, not by theta (a body that ignores the table fails)") {
  std::mt19937 g(62);
  const MetRopeShape s{4, 2, 64, 32, 10000.0f};
  std::vector<float> table(16);
  for (int i = 0; i < 16; ++i) table[sz(i)] = 0.9f / static_cast<float>(1 + 3 * i);  // far from theta's powers
  auto q = random_bf16(g, 2 * 256), k = random_bf16(g, 2 * 128);
  auto rq = to_dbl(q), rk = to_dbl(k), tq = rq;
  const std::int32_t pos[2] = {5, 300};
  met_rope(q.data(), 256, k.data(), 128, pos, 2, &s, table.data());
  for (int r = 0; r < 2; ++r) {
    ref_rope(rq.data() + r * 256, 4, 64, 32, 1e4, pos[r], table.data());
    ref_rope(rk.data() + r * 128, 2, 64, 32, 1e4, pos[r], table.data());
    ref_rope(tq.data() + r * 256, 4, 64, 32, 1e4, pos[r]);
  }
  check_close(q, rq);
  check_close(k, rk);
  double diff = 0;
  for (std::size_t i = 0; i < tq.size(); ++i) diff = std::max(diff, std::abs(tq[i] - rq[i]));
  CHECK(diff > 0.1);  // the table really differs from theta's rotation here
}

TEST_CASE("residual, silu_mul, gelu_mul, scale, softcap rows=4 dim=96 match fp64") {
  std::mt19937 g(71);
  const auto gu = random_bf16(g, 4 * 192, -4, 4);
  const auto gd = to_dbl(gu);
  Bf16 out(4 * 96);
  Dbl ref(4 * 96);
  SUBCASE("silu_mul") {
    met_silu_mul(gu.data(), out.data(), 4, 96);
    for (int r = 0; r < 4; ++r)
      for (int i = 0; i < 96; ++i) ref[sz(r * 96 + i)] = ref_silu(gd[sz(r * 192 + i)]) * gd[sz(r * 192 + 96 + i)];
    check_close(out, ref);
  }
  SUBCASE("gelu_mul") {
    met_gelu_mul(gu.data(), out.data(), 4, 96);
    for (int r = 0; r < 4; ++r)
      for (int i = 0; i < 96; ++i) ref[sz(r * 96 + i)] = ref_gelu(gd[sz(r * 192 + i)]) * gd[sz(r * 192 + 96 + i)];
    check_close(out, ref);
  }
  SUBCASE("residual") {
    Bf16 x(gu.begin(), gu.begin() + 384);
    met_residual_add(x.data(), gu.data() + 384, 384);
    for (int i = 0; i < 384; ++i) ref[sz(i)] = gd[sz(i)] + gd[sz(384 + i)];
    check_close(x, ref);
  }
  SUBCASE("scale=7.5") {
    Bf16 x(gu.begin(), gu.begin() + 384);
    met_scale(x.data(), 384, 7.5f);
    for (int i = 0; i < 384; ++i) ref[sz(i)] = gd[sz(i)] * 7.5;
    check_close(x, ref);
  }
  SUBCASE("softcap cap=2") {
    Bf16 x(gu.begin(), gu.begin() + 384);
    met_softcap(x.data(), 384, 2.0f);
    for (int i = 0; i < 384; ++i) ref[sz(i)] = 2.0 * std::tanh(gd[sz(i)] / 2.0);
    check_close(x, ref);
  }
}

TEST_CASE("rmsnorm_offset dim=4 scales by (1 + w) in fp32: x={1,2,3,4} w={0,0.5,-0.5,1} by hand (a body that scales by w alone fails)") {
  const Bf16 x{f32_to_bf16(1), f32_to_bf16(2), f32_to_bf16(3), f32_to_bf16(4)};
  const Bf16 w{f32_to_bf16(0), f32_to_bf16(0.5f), f32_to_bf16(-0.5f), f32_to_bf16(1)};
  Bf16 y(4);
  met_rmsnorm_offset(x.data(), w.data(), y.data(), /*rows=*/1, /*count=*/1, /*dim=*/4, kEps, /*offset=*/1.0f);
  // rms = sqrt(30 / 4); y = x / rms * (1 + w).
  const double hand[4] = {0.36514835, 1.09544504, 0.54772252, 2.92118678};
  for (int i = 0; i < 4; ++i) CHECK(std::abs(bf16_to_f32(y[sz(i)]) - hand[i]) <= hand[i] / 256);
}

TEST_CASE("rmsnorm_offset rows=3 count=4 dim=64 matches fp64 with offset 1 and with offset 0 (Gemma-4: w itself, rounded once, unlike met_rmsnorm's rounding before the weight), and without a weight is x / rms(x)") {
  std::mt19937 g(52);
  const auto x = random_bf16(g, 3 * 4 * 64, -3, 3);
  const auto w = random_bf16(g, 64, -0.5f, 0.5f);
  Bf16 y(x.size()), plain(x.size()), zero(x.size());
  met_rmsnorm_offset(x.data(), w.data(), y.data(), 3, 4, 64, kEps, 1.0f);
  auto w1 = to_dbl(w);
  for (auto& v : w1) v += 1;
  Dbl ref(x.size());
  const auto xd = to_dbl(x);
  for (int v = 0; v < 12; ++v) {
    double ss = 0;
    for (int i = 0; i < 64; ++i) ss += xd[sz(v * 64 + i)] * xd[sz(v * 64 + i)];
    const double inv = 1 / std::sqrt(ss / 64 + kEps);
    for (int i = 0; i < 64; ++i) ref[sz(v * 64 + i)] = xd[sz(v * 64 + i)] * inv * w1[sz(i)];
  }
  check_close(y, ref, /*rel=*/1.0 / 128);
  // offset 0: x * inv * w in fp32, one rounding; met_rmsnorm rounds x * inv first, so some element
  // differs (the mutation of a Gemma-4 norm bound to the Llama body).
  met_rmsnorm(x.data(), w.data(), plain.data(), 3, 4, 64, kEps);
  met_rmsnorm_offset(x.data(), w.data(), zero.data(), 3, 4, 64, kEps, 0.0f);
  Bf16 none(x.size());
  met_rmsnorm_offset(x.data(), nullptr, none.data(), 3, 4, 64, kEps, 0.0f);
  Dbl ref0(x.size()), ref_none(x.size());
  const auto wd = to_dbl(w);
  for (int v = 0; v < 12; ++v) {
    double ss = 0;
    for (int i = 0; i < 64; ++i) ss += xd[sz(v * 64 + i)] * xd[sz(v * 64 + i)];
    const double inv = 1 / std::sqrt(ss / 64 + kEps);
    for (int i = 0; i < 64; ++i) {
      ref0[sz(v * 64 + i)] = xd[sz(v * 64 + i)] * inv * wd[sz(i)];
      ref_none[sz(v * 64 + i)] = xd[sz(v * 64 + i)] * inv;
    }
  }
  check_close(zero, ref0, /*rel=*/1.0 / 128);
  check_close(none, ref_none, /*rel=*/1.0 / 128);
  CHECK(zero != plain);
}

TEST_CASE("scale_tensor multiplies by the tensor's one bf16 element (Gemma-4's layer_scalar), each product rounded once") {
  std::mt19937 g(53);
  auto x = random_bf16(g, 2 * 32, -3, 3);
  const auto s = random_bf16(g, 1, 0.5f, 1.5f);
  const auto before = to_dbl(x);
  met_scale_tensor(x.data(), static_cast<std::int64_t>(x.size()), s.data());
  Dbl ref(x.size());
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = before[i] * to_dbl(s)[0];
  check_close(x, ref, /*rel=*/1.0 / 256);
}

TEST_CASE("gelu_tanh is the tanh approximation (gelu_pytorch_tanh), not erf: x={1,-2,3} by hand") {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); erf's gelu gives 0.841345, -0.045500, 2.995950.
  const float x[3] = {1.0f, -2.0f, 3.0f};
  const double hand[3] = {0.84119199, -0.04540231, 2.99636261};
  for (int i = 0; i < 3; ++i) CHECK(std::abs(met::cpu::gelu_tanh_f32(x[i]) - hand[i]) <= 2e-6);
}

TEST_CASE("softcap cap=3 of x={6,-6,0} is 3 tanh(x / 3) by hand: {2.8921, -2.8921, 0}") {
  Bf16 x{f32_to_bf16(6), f32_to_bf16(-6), f32_to_bf16(0)};
  met_softcap(x.data(), 3, 3.0f);
  CHECK(std::abs(bf16_to_f32(x[0]) - 2.89208274) <= 2.9 / 256);
  CHECK(bf16_to_f32(x[1]) == -bf16_to_f32(x[0]));
  CHECK(bf16_to_f32(x[2]) == 0.0f);
}

TEST_CASE("window=16: the query at position p sees keys p-15..p, itself included, as transformers' sliding mask (kv > q - window); decode and prefill by hand") {
  // One head; q = 0 gives every seen key the same weight and v[j] = j, so the output is the mean
  // position seen: at p = 20, (5 + ... + 20) / 16 = 12.5 (a window of 17 keys gives 12, none 10).
  const MetAttnShape s{1, 1, 8, 8, /*window=*/16, /*softcap=*/0.0f, /*scale=*/1.0f};
  const std::int64_t tokens = 21;
  Bf16 kc(sz(tokens * 8), f32_to_bf16(0.5f)), vc(sz(tokens * 8), 0);
  for (std::int64_t j = 0; j < tokens; ++j) vc[sz(j * 8)] = f32_to_bf16(static_cast<float>(j));
  const Bf16 q(sz(tokens * 8), 0);
  Bf16 out(sz(tokens * 8));
  met_attn_prefill(q.data(), kc.data(), vc.data(), /*base=*/0, /*start_pos=*/0, tokens, &s, 0, 1, nullptr, out.data());
  const std::pair<int, float> rows[] = {{3, 1.5f}, {15, 7.5f}, {16, 8.5f}, {20, 12.5f}};
  for (const auto& row : rows) {
    const int p = row.first;  // named, not bound: INFO captures it, which clang before 16 refuses for a binding
    INFO("prefill p=" << p);
    CHECK(bf16_to_f32(out[sz(p * 8)]) == row.second);
  }
  const std::int64_t base = 0;
  const std::int32_t len = 21;
  std::vector<float> po(2 * 8), pml(2 * 2);
  Bf16 dec(8);
  met_attn_decode_split(q.data(), kc.data(), vc.data(), &base, &len, 1, &s, /*splits=*/2, 0, 2, po.data(), pml.data());
  met_attn_decode_merge(po.data(), pml.data(), nullptr, 1, &s, 2, 0, 1, dec.data());
  CHECK(bf16_to_f32(dec[0]) == 12.5f);
}

TEST_CASE("argmax rows=3 vocab=1000 picks the maximum, lowest index on ties") {
  std::mt19937 g(81);
  auto l = random_bf16(g, 3000);
  l[10] = l[500] = f32_to_bf16(5.0f);        // row 0: tie -> 10
  l[1000 + 999] = f32_to_bf16(5.0f);         // row 1: last element
  l[2000] = f32_to_bf16(-5.0f);
  l[2777] = f32_to_bf16(4.0f);
  std::int32_t tok[3];
  met_argmax(l.data(), tok, 3, 1000);
  CHECK(tok[0] == 10);
  CHECK(tok[1] == 999);
  CHECK(tok[2] == 777);
}

TEST_CASE("kv_append rows=3 kv_heads=2 head_dim=64 v_head_dim=32 writes exactly slots {5,0,9}") {
  std::mt19937 g(91);
  const std::int64_t kw = 128, vw = 64;
  const auto k = random_bf16(g, 3 * 200), v = random_bf16(g, 3 * 100);
  Bf16 kc(10 * kw, 0x7fff), vc(10 * vw, 0x7fff);
  const std::int64_t slots[3] = {5, 0, 9};
  met_kv_append(k.data(), 200, v.data(), 100, kc.data(), vc.data(), slots, 3, 2, 64, 32, /*kv_fp8=*/0, 1.0f, 1.0f);
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < kw; ++i) CHECK(kc[sz(slots[r] * kw + i)] == k[sz(r * 200 + i)]);
    for (int i = 0; i < vw; ++i) CHECK(vc[sz(slots[r] * vw + i)] == v[sz(r * 100 + i)]);
  }
  for (int i = 0; i < kw; ++i) CHECK(kc[sz(1 * kw + i)] == 0x7fff);  // untouched slot
}

// ---------------------------------------------------------------- fusions

namespace {

struct QkvCase {
  std::int64_t rows = 2, hidden = 256;
  MetRopeShape s{4, 2, 64, 64, 10000.0f};
  bool qknorm = false;
  bool v_norm = false;  // Gemma-4's weightless v_norm (with qknorm)
  MetWeightFormat fmt = MET_WEIGHT_BF16;
  std::int32_t norm_once = 0;  // the fused norm's kind (ops.def): 1 with offset 1 is Gemma-3's, with 0 Gemma-4's
  float norm_offset = 0;
};

// The unfused norm of the kind a fused body takes: met_rmsnorm, or met_rmsnorm_offset (Gemma).
void unfused_norm(const std::uint16_t* x, const std::uint16_t* w, std::uint16_t* y, std::int64_t rows, std::int64_t count,
                  std::int64_t dim, std::int32_t once, float offset) {
  if (once)
    met_rmsnorm_offset(x, w, y, rows, count, dim, kEps, offset);
  else
    met_rmsnorm(x, w, y, rows, count, dim, kEps);
}

// fp64 norm weights of a kind: w, or offset + w.
Dbl norm_weights(const Bf16& w, float offset) {
  Dbl d = to_dbl(w);
  for (auto& v : d) v += offset;
  return d;
}

void run_qkv_case(const QkvCase& c) {
  std::mt19937 g(101);
  const std::int64_t qw = c.s.heads * c.s.head_dim, kw = c.s.kv_heads * c.s.head_dim, width = qw + 2 * kw;
  const auto t = make_weight(g, c.fmt, width, c.hidden, 64, 64);
  const auto x = random_bf16(g, c.rows * c.hidden, -2, 2);
  const auto nw = random_bf16(g, c.hidden, 0.5f, 1.5f);
  const auto qn = random_bf16(g, c.s.head_dim, 0.5f, 1.5f), kn = random_bf16(g, c.s.head_dim, 0.5f, 1.5f);
  const std::int32_t pos[2] = {3, 200};
  const std::int64_t slots[2] = {3, 16 + 200};
  const std::int64_t n_slots = 16 + 256;

  Bf16 q(sz(c.rows * qw)), kc(sz(n_slots * kw)), vc(sz(n_slots * kw));
  const std::int64_t units = c.s.heads + 2 * c.s.kv_heads;
  // Two head-unit ranges (the second starts inside the k heads) make the whole row.
  for (auto [u0, u1] : {std::pair<std::int64_t, std::int64_t>{0, c.s.heads + 1}, {c.s.heads + 1, units}}) {
    if (c.qknorm)
      met_gemv_rmsnorm_qkv_qknorm_rope(x.data(), nw.data(), kEps, c.norm_once, c.norm_offset, &t.w, qn.data(), kn.data(), c.v_norm ? 1 : 0, pos, slots, c.rows, &c.s,
                                       /*inv_freq=*/nullptr, q.data(), kc.data(), vc.data(), u0, u1);
    else
      met_gemv_rmsnorm_qkv_rope(x.data(), nw.data(), kEps, c.norm_once, c.norm_offset, &t.w, pos, slots, c.rows, &c.s, /*inv_freq=*/nullptr, q.data(),
                                kc.data(), vc.data(), u0, u1);
  }

  // Unfused sequence of cpu ops: rmsnorm, gemv, [q/k rmsnorm], rope, kv_append.
  Bf16 xn(x.size()), qkv(sz(c.rows * width)), kc2(kc.size()), vc2(vc.size()), q2(q.size());
  unfused_norm(x.data(), nw.data(), xn.data(), c.rows, 1, c.hidden, c.norm_once, c.norm_offset);
  met_gemv(xn.data(), &t.w, qkv.data(), c.rows, 0, t.w.rows);
  if (c.qknorm)
    for (std::int64_t r = 0; r < c.rows; ++r) {
      std::uint16_t* row = qkv.data() + r * width;
      unfused_norm(row, qn.data(), row, 1, c.s.heads, c.s.head_dim, c.norm_once, c.norm_offset);
      unfused_norm(row + qw, kn.data(), row + qw, 1, c.s.kv_heads, c.s.head_dim, c.norm_once, c.norm_offset);
      if (c.v_norm) met_rmsnorm_offset(row + qw + kw, /*w=*/nullptr, row + qw + kw, 1, c.s.kv_heads, c.s.head_dim, kEps, 0.0f);
    }
  met_rope(qkv.data(), width, qkv.data() + qw, width, pos, c.rows, &c.s, /*inv_freq=*/nullptr);
  met_kv_append(qkv.data() + qw, width, qkv.data() + qw + kw, width, kc2.data(), vc2.data(), slots, c.rows,
                c.s.kv_heads, c.s.head_dim, c.s.head_dim, c.s.kv_fp8, c.s.k_scale, c.s.v_scale);
  for (std::int64_t r = 0; r < c.rows; ++r)
    std::copy_n(qkv.begin() + r * width, qw, q2.begin() + r * qw);
  CHECK(q == q2);
  CHECK(kc == kc2);
  CHECK(vc == vc2);

  // fp64 reference.
  auto ref = ref_linear(ref_rmsnorm(to_dbl(x), norm_weights(nw, c.norm_offset), 1, c.hidden), t, c.rows);
  for (std::int64_t r = 0; r < c.rows; ++r) {
    double* row = ref.data() + r * width;
    if (c.qknorm) {
      const Dbl qr = ref_rmsnorm(Dbl(row, row + qw), norm_weights(qn, c.norm_offset), c.s.heads, c.s.head_dim);
      const Dbl kr = ref_rmsnorm(Dbl(row + qw, row + qw + kw), norm_weights(kn, c.norm_offset), c.s.kv_heads, c.s.head_dim);
      std::copy(qr.begin(), qr.end(), row);
      std::copy(kr.begin(), kr.end(), row + qw);
      if (c.v_norm) {
        const Dbl vr = ref_rmsnorm(Dbl(row + qw + kw, row + width), Dbl(sz(c.s.head_dim), 1.0), c.s.kv_heads, c.s.head_dim);
        std::copy(vr.begin(), vr.end(), row + qw + kw);
      }
    }
    ref_rope(row, c.s.heads, c.s.head_dim, c.s.rotary_dim, c.s.theta, pos[r]);
    ref_rope(row + qw, c.s.kv_heads, c.s.head_dim, c.s.rotary_dim, c.s.theta, pos[r]);
    Bf16 qg(q.begin() + r * qw, q.begin() + (r + 1) * qw), kg(kc.begin() + slots[r] * kw, kc.begin() + (slots[r] + 1) * kw),
        vg(vc.begin() + slots[r] * kw, vc.begin() + (slots[r] + 1) * kw);
    check_close(qg, Dbl(row, row + qw));
    check_close(kg, Dbl(row + qw, row + qw + kw));
    check_close(vg, Dbl(row + qw + kw, row + width));
  }
}

}  // namespace

TEST_CASE("gemv_rmsnorm_qkv_rope hidden=256 heads=4 kv_heads=2 head_dim=64 equals rmsnorm+gemv+rope+kv_append and fp64") {
  QkvCase c;
  SUBCASE("bf16") { run_qkv_case(c); }
  SUBCASE("fp8-e4m3 block=64x64") {
    c.fmt = MET_WEIGHT_FP8_E4M3;
    run_qkv_case(c);
  }
  SUBCASE("rotary_dim=32") {
    c.s.rotary_dim = 32;
    run_qkv_case(c);
  }
}

TEST_CASE("gemv_rmsnorm_qkv_qknorm_rope hidden=256 heads=4 kv_heads=2 head_dim=64 equals the unfused sequence with q/k norm before rope") {
  QkvCase c;
  c.qknorm = true;
  SUBCASE("Llama's norms") { run_qkv_case(c); }
  SUBCASE("Gemma-3's norms: 1 + w, one rounding (rmsnorm_offset)") {
    c.norm_once = 1;
    c.norm_offset = 1;
    run_qkv_case(c);
  }
  SUBCASE("Gemma-4's norms: w, one rounding (rmsnorm_offset)") {
    c.norm_once = 1;
    run_qkv_case(c);
  }
  SUBCASE("Gemma-4's norms with its weightless v_norm (rmsnorm_offset without a weight)") {
    c.norm_once = 1;
    c.v_norm = true;
    run_qkv_case(c);
  }
}

TEST_CASE("rmsnorm_residual rows=3 dim=96 equals the post norm, residual_add and scale_tensor in order, bit for bit, and fp64") {
  std::mt19937 g(113);
  const auto y = random_bf16(g, 3 * 96, -2, 2);
  const auto x0 = random_bf16(g, 3 * 96, -2, 2);
  const auto w = random_bf16(g, 96, 0.5f, 1.5f);
  const Bf16 s{met::cpu::f32_to_bf16(0.75f)};
  struct Kind {
    const char* name;
    std::int32_t once;
    float offset;
    bool scaled;
  };
  for (const Kind k : {Kind{"Gemma-3 (1 + w, once)", 1, 1.0f, false}, Kind{"Gemma-4 (w, once) with its layer scalar", 1, 0.0f, true},
                       Kind{"Llama's kind (rounded, then w)", 0, 0.0f, false}}) {
    CAPTURE(k.name);
    Bf16 x1 = x0, x2 = x0, n(y.size());
    met_rmsnorm_residual(x1.data(), y.data(), w.data(), k.scaled ? s.data() : nullptr, 3, 96, k.once, k.offset, kEps);
    unfused_norm(y.data(), w.data(), n.data(), 3, 1, 96, k.once, k.offset);
    met_residual_add(x2.data(), n.data(), 3 * 96);
    if (k.scaled) met_scale_tensor(x2.data(), 3 * 96, s.data());
    CHECK(x1 == x2);
    auto ref = ref_rmsnorm(to_dbl(y), norm_weights(w, k.offset), 3, 96);
    const auto xd = to_dbl(x0);
    const double scalar = k.scaled ? static_cast<double>(met::cpu::bf16_to_f32(s[0])) : 1.0;
    for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = (ref[i] + xd[i]) * scalar;
    check_close(x1, ref);
  }
}

TEST_CASE("gemv_o_residual and gemv_down_residual rows=3 in=192 hidden=128 equal gemv+residual_add and fp64") {
  for (auto f : {MET_WEIGHT_BF16, MET_WEIGHT_FP8_E4M3, MET_WEIGHT_MXFP4}) {
    std::mt19937 g(111);
    const auto t = make_weight(g, f, 128, 192, 32, 64);
    const auto a = random_bf16(g, 3 * 192);
    const auto x0 = random_bf16(g, 3 * 128);
    Bf16 x1 = x0, x2 = x0, x3 = x0, y(3 * 128);
    met_gemv_o_residual(a.data(), &t.w, x1.data(), 3, 0, t.w.rows);
    met_gemv_down_residual(a.data(), &t.w, x3.data(), 3, 0, t.w.rows);
    met_gemv(a.data(), &t.w, y.data(), 3, 0, t.w.rows);
    met_residual_add(x2.data(), y.data(), 3 * 128);
    CHECK(x1 == x2);
    CHECK(x3 == x2);
    auto ref = ref_linear(to_dbl(a), t, 3);
    const auto xd = to_dbl(x0);
    for (std::size_t i = 0; i < ref.size(); ++i) ref[i] += xd[i];
    check_close(x1, ref);
  }
}

TEST_CASE("column ranges [0,37) [37,38) [38,N) of gemv, o/down residual, gate_up and lm_head equal the whole-range call bit for bit (an off-by-one range or shifted weight row fails)") {
  std::mt19937 g(115);
  const std::int64_t in = 96, n = 100;
  for (auto f : {MET_WEIGHT_BF16, MET_WEIGHT_FP8_E4M3}) {
    const auto t = make_weight(g, f, n, in, 32, 32);
    const auto x = random_bf16(g, 2 * in, -2, 2);
    const auto nw = random_bf16(g, in, 0.5f, 1.5f);
    const auto x0 = random_bf16(g, 2 * n);
    const std::int64_t cuts[] = {0, 37, 38, n};
    auto pieces = [&](auto call) {
      for (int p = 0; p < 3; ++p) call(cuts[p], cuts[p + 1]);
    };
    Bf16 y1(2 * n), y2(2 * n);
    met_gemv(x.data(), &t.w, y1.data(), 2, 0, n);
    pieces([&](std::int64_t a, std::int64_t b) { met_gemv(x.data(), &t.w, y2.data(), 2, a, b); });
    CHECK(y1 == y2);
    Bf16 r1 = x0, r2 = x0, d1 = x0, d2 = x0;
    met_gemv_o_residual(x.data(), &t.w, r1.data(), 2, 0, n);
    pieces([&](std::int64_t a, std::int64_t b) { met_gemv_o_residual(x.data(), &t.w, r2.data(), 2, a, b); });
    CHECK(r1 == r2);
    met_gemv_down_residual(x.data(), &t.w, d1.data(), 2, 0, n);
    pieces([&](std::int64_t a, std::int64_t b) { met_gemv_down_residual(x.data(), &t.w, d2.data(), 2, a, b); });
    CHECK(d1 == d2);
    Bf16 l1(2 * n), l2(2 * n);
    std::int32_t tok[2];
    met_gemv_rmsnorm_lm_head_softcap_argmax(x.data(), nw.data(), kEps, 0, 0.f, &t.w, 3.0f, l1.data(), tok, 2, 0, n);
    pieces([&](std::int64_t a, std::int64_t b) {
      met_gemv_rmsnorm_lm_head_softcap_argmax(x.data(), nw.data(), kEps, 0, 0.f, &t.w, 3.0f, l2.data(), nullptr, 2, a, b);
    });
    CHECK(l1 == l2);
    std::int32_t tok2[2];
    met_argmax(l2.data(), tok2, 2, n);
    CHECK(tok[0] == tok2[0]);
    CHECK(tok[1] == tok2[1]);
    const std::int64_t inter = n / 2, icuts[] = {0, 17, 18, inter};
    Bf16 u1(2 * inter), u2(2 * inter);
    met_gemv_rmsnorm_gate_up_silu(x.data(), nw.data(), kEps, 0, 0.f, &t.w, u1.data(), 2, 0, inter);
    for (int p = 0; p < 3; ++p)
      met_gemv_rmsnorm_gate_up_silu(x.data(), nw.data(), kEps, 0, 0.f, &t.w, u2.data(), 2, icuts[p], icuts[p + 1]);
    CHECK(u1 == u2);
  }
}

TEST_CASE("gemv_rmsnorm_gate_up_silu and _gelu rows=2 hidden=128 inter=96 equal rmsnorm+gemv+silu_mul/gelu_mul and fp64, with Llama's and Gemma's norms") {
  for (const auto& kind : {std::tuple{false, 0, 0.f}, {true, 0, 0.f}, {true, 1, 1.f}, {true, 1, 0.f}}) {
    const bool gelu = std::get<0>(kind);
    const std::int32_t once = std::get<1>(kind);
    const float offset = std::get<2>(kind);
    CAPTURE(gelu);
    CAPTURE(once);
    CAPTURE(offset);
    std::mt19937 g(121);
    const auto t = make_weight(g, MET_WEIGHT_FP8_E4M3, 192, 128, 96, 128);
    const auto x = random_bf16(g, 2 * 128, -2, 2);
    const auto nw = random_bf16(g, 128, 0.5f, 1.5f);
    Bf16 out(2 * 96), out2(2 * 96), xn(2 * 128), gu(2 * 192);
    (gelu ? met_gemv_rmsnorm_gate_up_gelu : met_gemv_rmsnorm_gate_up_silu)(x.data(), nw.data(), kEps, once, offset, &t.w, out.data(), 2, 0,
                                                                           t.w.rows / 2);
    unfused_norm(x.data(), nw.data(), xn.data(), 2, 1, 128, once, offset);
    met_gemv(xn.data(), &t.w, gu.data(), 2, 0, t.w.rows);
    (gelu ? met_gelu_mul : met_silu_mul)(gu.data(), out2.data(), 2, 96);
    CHECK(out == out2);
    const auto gr = ref_linear(ref_rmsnorm(to_dbl(x), norm_weights(nw, offset), 1, 128), t, 2);
    Dbl ref(2 * 96);
    for (int r = 0; r < 2; ++r)
      for (int i = 0; i < 96; ++i) {
        const double gate = gr[sz(r * 192 + i)], up = gr[sz(r * 192 + 96 + i)];
        ref[sz(r * 96 + i)] = (gelu ? ref_gelu(gate) : ref_silu(gate)) * up;
      }
    check_close(out, ref);
  }
}

TEST_CASE("gemv_rmsnorm_lm_head_argmax and _softcap_argmax rows=4 hidden=128 vocab=500 cap=30 equal rmsnorm+gemv+[softcap]+argmax, with Llama's and Gemma's norms") {
  for (const auto& kind : {std::tuple{0.0f, 0, 0.f}, {30.0f, 0, 0.f}, {30.0f, 1, 1.f}, {0.0f, 1, 0.f}}) {
    const float cap = std::get<0>(kind);
    const std::int32_t once = std::get<1>(kind);
    const float offset = std::get<2>(kind);
    CAPTURE(cap);
    CAPTURE(once);
    std::mt19937 g(131);
    const auto t = make_weight(g, MET_WEIGHT_BF16, 500, 128);
    const auto x = random_bf16(g, 4 * 128, -2, 2);
    const auto nw = random_bf16(g, 128, 0.5f, 1.5f);
    Bf16 logits(4 * 500), logits2(4 * 500), xn(4 * 128);
    std::int32_t tok[4], tok2[4], tok_nolog[4];
    if (cap > 0) {
      met_gemv_rmsnorm_lm_head_softcap_argmax(x.data(), nw.data(), kEps, once, offset, &t.w, cap, logits.data(), tok, 4, 0, t.w.rows);
      met_gemv_rmsnorm_lm_head_softcap_argmax(x.data(), nw.data(), kEps, once, offset, &t.w, cap, nullptr, tok_nolog, 4, 0, t.w.rows);
    } else {
      met_gemv_rmsnorm_lm_head_argmax(x.data(), nw.data(), kEps, once, offset, &t.w, logits.data(), tok, 4, 0, t.w.rows);
      met_gemv_rmsnorm_lm_head_argmax(x.data(), nw.data(), kEps, once, offset, &t.w, nullptr, tok_nolog, 4, 0, t.w.rows);
    }
    unfused_norm(x.data(), nw.data(), xn.data(), 4, 1, 128, once, offset);
    met_gemv(xn.data(), &t.w, logits2.data(), 4, 0, t.w.rows);
    if (cap > 0) met_softcap(logits2.data(), 4 * 500, cap);
    met_argmax(logits2.data(), tok2, 4, 500);
    CHECK(logits == logits2);
    for (int r = 0; r < 4; ++r) {
      CHECK(tok[r] == tok2[r]);
      CHECK(tok_nolog[r] == tok2[r]);
    }
    // fp64: the chosen token's logit is within bf16 tolerance of the true maximum.
    auto ref = ref_linear(ref_rmsnorm(to_dbl(x), norm_weights(nw, offset), 1, 128), t, 4);
    if (cap > 0)
      for (auto& v : ref) v = cap * std::tanh(v / cap);
    check_close(logits, ref);
    for (int r = 0; r < 4; ++r) {
      const double best = *std::max_element(ref.begin() + r * 500, ref.begin() + (r + 1) * 500);
      CHECK(ref[sz(r * 500 + tok[r])] >= best - kBf16Rel * std::abs(best));
    }
  }
}

// ---------------------------------------------------------------- attention

namespace {

// fp64 attention of query q (one head) at position pos over keys [lo, pos], with sink and softcap.
Dbl ref_attn(const double* q, const Dbl& kc, const Dbl& vc, std::int64_t base, std::int64_t pos, int kvh,
             const MetAttnShape& s, const double* sink) {
  const std::int64_t lo = s.window > 0 ? std::max<std::int64_t>(0, pos - s.window + 1) : 0;
  const std::int64_t kw = s.kv_heads * s.head_dim, vw = s.kv_heads * s.v_head_dim;
  Dbl scores;
  for (std::int64_t j = lo; j <= pos; ++j) {
    double d = 0;
    for (int i = 0; i < s.head_dim; ++i) d += q[i] * kc[sz((base + j) * kw + kvh * s.head_dim + i)];
    d *= s.scale;
    if (s.softcap > 0) d = s.softcap * std::tanh(d / s.softcap);
    scores.push_back(d);
  }
  double m = *std::max_element(scores.begin(), scores.end());
  if (sink) m = std::max(m, *sink);
  double l = sink ? std::exp(*sink - m) : 0;
  Dbl o(sz(s.v_head_dim), 0.0);
  for (std::size_t jj = 0; jj < scores.size(); ++jj) {
    const double p = std::exp(scores[jj] - m);
    l += p;
    for (int i = 0; i < s.v_head_dim; ++i) o[sz(i)] += p * vc[sz((base + lo + static_cast<std::int64_t>(jj)) * vw + kvh * s.v_head_dim + i)];
  }
  for (auto& e : o) e /= l;
  return o;
}

struct AttnCase {
  MetAttnShape s{8, 2, 64, 64, 0, 0.0f, 0.125f};
  bool sinks = false;
  std::int32_t splits = 4;
};

// A cache of n elements in the shape's format and the values the reference reads: bf16 in
// [lo, hi], or (kv_fp8) random e4m3 codes, NaN excluded, whose values are code * scale.
struct Cache {
  Bf16 data;
  Dbl values;
};
Cache random_cache(std::mt19937& g, std::int64_t n, float lo, float hi, std::int32_t fp8, float scale) {
  if (!fp8) {
    auto b = random_bf16(g, n, lo, hi);
    return {b, to_dbl(b)};
  }
  Cache c{Bf16(sz((n + 1) / 2)), Dbl(sz(n))};
  auto* bytes = reinterpret_cast<std::uint8_t*>(c.data.data());
  std::uniform_int_distribution<int> d(0, 255);
  for (std::int64_t i = 0; i < n; ++i) {
    auto code = static_cast<std::uint8_t>(d(g));
    if ((code & 0x7fu) == 0x7fu) code ^= 1u;  // NaN -> the largest finite code of that sign
    bytes[i] = code;
    c.values[sz(i)] = static_cast<double>(met::cpu::fp8_e4m3_to_f32(code)) * scale;
  }
  return c;
}

void run_decode(const AttnCase& c, const std::vector<std::int32_t>& lens) {
  std::mt19937 g(141);
  const auto& s = c.s;
  const std::int64_t rows = static_cast<std::int64_t>(lens.size()), max_ctx = 128;
  const std::int64_t kw = s.kv_heads * s.head_dim, vw = s.kv_heads * s.v_head_dim;
  const auto q = random_bf16(g, rows * s.heads * s.head_dim, -2, 2);
  const auto kcache = random_cache(g, rows * max_ctx * kw, -2, 2, s.kv_fp8, s.k_scale);
  const auto vcache = random_cache(g, rows * max_ctx * vw, -1, 1, s.kv_fp8, s.v_scale);
  const Bf16 &kc = kcache.data, &vc = vcache.data;
  const auto sinks = random_bf16(g, s.heads, -1, 3);
  std::vector<std::int64_t> base(sz(rows));
  for (std::int64_t r = 0; r < rows; ++r) base[sz(r)] = r * max_ctx;
  std::vector<float> po(sz(rows * s.heads * c.splits * s.v_head_dim)), pml(sz(rows * s.heads * c.splits * 2));
  Bf16 out(sz(rows * s.heads * s.v_head_dim));
  const std::int32_t half = c.splits / 2;  // two split ranges make every split
  met_attn_decode_split(q.data(), kc.data(), vc.data(), base.data(), lens.data(), rows, &s, c.splits, 0, half, po.data(),
                        pml.data());
  met_attn_decode_split(q.data(), kc.data(), vc.data(), base.data(), lens.data(), rows, &s, c.splits, half, c.splits,
                        po.data(), pml.data());
  // Two head ranges make every head.
  met_attn_decode_merge(po.data(), pml.data(), c.sinks ? sinks.data() : nullptr, rows, &s, c.splits, 0, s.heads / 2,
                        out.data());
  met_attn_decode_merge(po.data(), pml.data(), c.sinks ? sinks.data() : nullptr, rows, &s, c.splits, s.heads / 2, s.heads,
                        out.data());
  const auto qd = to_dbl(q), sd = to_dbl(sinks);
  const Dbl &kd = kcache.values, &vd = vcache.values;
  Dbl ref;
  for (std::int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < s.heads; ++h) {
      const auto o = ref_attn(qd.data() + (r * s.heads + h) * s.head_dim, kd, vd, base[sz(r)], lens[sz(r)] - 1,
                              h / (s.heads / s.kv_heads), s, c.sinks ? &sd[sz(h)] : nullptr);
      ref.insert(ref.end(), o.begin(), o.end());
    }
  check_close(out, ref);
  // The fused op, its (head block, split) units in two ranges (the second holds every block's last
  // split when the first ends mid-block): the same out, and the split's states where there are
  // splits. A block is the KV head's whole group up to 8 query heads, else 8 of them.
  Bf16 fused(out.size(), 0);
  std::vector<float> fpo(po.size(), 0.0f), fpml(pml.size(), 0.0f);
  const std::int32_t block = MET_ATTN_UNIT_HEADS(s.heads / s.kv_heads);
  const std::int64_t units = static_cast<std::int64_t>(s.heads / block) * c.splits, cut = units / 2 + (c.splits > 1 ? 1 : 0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (const auto& [u0, u1] : {std::pair{std::int64_t{0}, cut}, std::pair{cut, units}})
      met_attn_decode_split_merge(q.data() + r * s.heads * s.head_dim, kc.data(), vc.data(), base[sz(r)], lens[sz(r)], &s,
                                  c.splits, u0, u1, c.sinks ? sinks.data() : nullptr, fpo.data() + r * s.heads * c.splits * s.v_head_dim,
                                  fpml.data() + r * s.heads * c.splits * 2, fused.data() + r * s.heads * s.v_head_dim);
  check_close(fused, ref);
  if (c.splits > 1) {
    CHECK(fpo == po);
    CHECK(fpml == pml);
  }
}

}  // namespace

TEST_CASE("attn_decode_split+merge and attn_decode_split_merge heads=8 kv_heads=2 head_dim=64 lens={1,37,128} (and groups of 16) match fp64 (a wrong split bound, unit map or GQA map fails)") {
  AttnCase c;
  const std::vector<std::int32_t> lens = {1, 37, 128};
  SUBCASE("splits=1") { c.splits = 1; run_decode(c, lens); }
  SUBCASE("splits=4") { run_decode(c, lens); }
  SUBCASE("splits=64 (empty splits)") { c.splits = 64; run_decode(c, lens); }
  SUBCASE("window=16 splits=3") { c.s.window = 16; c.splits = 3; run_decode(c, lens); }
  SUBCASE("sinks splits=5") { c.sinks = true; c.splits = 5; run_decode(c, lens); }
  SUBCASE("softcap=5 splits=2") { c.s.softcap = 5.0f; c.splits = 2; run_decode(c, lens); }
  SUBCASE("fp8 KV k_scale=2/448 v_scale=1/448 splits=4") {
    c.s.kv_fp8 = 1;
    c.s.k_scale = 2.0f / 448.0f;
    c.s.v_scale = 1.0f / 448.0f;
    run_decode(c, lens);
  }
  SUBCASE("fp8 KV splits=1 window=16") {
    c.s.kv_fp8 = 1;
    c.s.k_scale = 0.004f;
    c.s.v_scale = 0.003f;
    c.s.window = 16;
    c.splits = 1;
    run_decode(c, lens);
  }
  SUBCASE("v_head_dim=32 heads=4 kv_heads=4 window=8 sinks softcap=2") {
    c.s = MetAttnShape{4, 4, 64, 32, 8, 2.0f, 0.125f};
    c.sinks = true;
    run_decode(c, lens);
  }
  // Gemma-4 12B's global layers: 16 query heads over one KV head, two blocks of 8 (a unit map that
  // takes the block for the KV head, or the block's first head for the group's, fails).
  SUBCASE("heads=16 kv_heads=1 splits=3 sinks") {
    c.s = MetAttnShape{16, 1, 64, 64, 0, 0.0f, 0.125f};
    c.splits = 3;
    c.sinks = true;
    run_decode(c, lens);
  }
  SUBCASE("heads=32 kv_heads=2 splits=1 window=16") {
    c.s = MetAttnShape{32, 2, 32, 32, 16, 0.0f, 0.2f};
    c.splits = 1;
    run_decode(c, lens);
  }
}

TEST_CASE("attn_prefill tokens=40 start_pos=9 heads=4 kv_heads=1 head_dim=32 is causal and matches fp64 (attending a future key fails); a head range computes only its heads") {
  for (const auto& [window, softcap, sinks] : {std::tuple{0, 0.0f, false}, std::tuple{12, 0.0f, true}, std::tuple{0, 4.0f, true}}) {
    std::mt19937 g(151);
    const MetAttnShape s{4, 1, 32, 32, window, softcap, 0.2f};
    const std::int64_t tokens = 40, start = 9, base = 3, slots = base + start + tokens;
    const auto q = random_bf16(g, tokens * 4 * 32, -2, 2);
    const auto kc = random_bf16(g, slots * 32, -2, 2), vc = random_bf16(g, slots * 32);
    const auto sk = random_bf16(g, 4, -1, 3);
    Bf16 out(sz(tokens * 4 * 32));
    met_attn_prefill(q.data(), kc.data(), vc.data(), base, static_cast<std::int32_t>(start), tokens, &s, 0, 4,
                     sinks ? sk.data() : nullptr, out.data());
    // Heads [1, 3) alone: the same bytes for those heads, the others untouched.
    Bf16 part(sz(tokens * 4 * 32), 0);
    met_attn_prefill(q.data(), kc.data(), vc.data(), base, static_cast<std::int32_t>(start), tokens, &s, 1, 3,
                     sinks ? sk.data() : nullptr, part.data());
    for (std::int64_t i = 0; i < tokens * 4 * 32; ++i) {
      const bool mine = (i / 32) % 4 == 1 || (i / 32) % 4 == 2;
      REQUIRE(part[sz(i)] == (mine ? out[sz(i)] : 0));
    }
    const auto qd = to_dbl(q), kd = to_dbl(kc), vd = to_dbl(vc), sd = to_dbl(sk);
    Dbl ref;
    for (std::int64_t t = 0; t < tokens; ++t)
      for (int h = 0; h < 4; ++h) {
        const auto o = ref_attn(qd.data() + (t * 4 + h) * 32, kd, vd, base, start + t, 0, s, sinks ? &sd[sz(h)] : nullptr);
        ref.insert(ref.end(), o.begin(), o.end());
      }
    check_close(out, ref);
  }
}

// ---------------------------------------------------------------- moe

namespace {

// A bf16 weight holding exactly `values` (row-major), for hand-computed cases.
TestWeight bf16_weight(const std::vector<float>& values, std::int64_t rows, std::int64_t cols) {
  std::mt19937 g(1);
  TestWeight t = make_weight(g, MET_WEIGHT_BF16, rows, cols);
  for (std::size_t i = 0; i < values.size(); ++i) {
    t.bf16[i] = met::cpu::f32_to_bf16(values[i]);
    t.value[i] = static_cast<double>(met::cpu::bf16_to_f32(t.bf16[i]));
  }
  return t;
}

// Random values on a grid of `step` in [-lim, lim]: their dot products are exact in fp32 (and in
// fp64), so a reference rounds the very logits the kernel rounds.
void to_grid(std::mt19937& g, Bf16& v, float step, int lim) {
  std::uniform_int_distribution<int> d(-lim, lim);
  for (auto& e : v) e = met::cpu::f32_to_bf16(static_cast<float>(d(g)) * step);
}

}  // namespace

TEST_CASE("moe_router_topk rows=5 hidden=64 experts=16 top_k=4 is the softmax of the bf16-rounded logits, top-k, with and without renormalisation, each weight a bf16 value") {
  for (std::int32_t renorm : {0, 1}) {
    std::mt19937 g(161);
    auto t = make_weight(g, MET_WEIGHT_BF16, 16, 64);
    to_grid(g, t.bf16, 1.0f / 16, 4);
    t.value = to_dbl(t.bf16);
    Bf16 x(5 * 64);
    to_grid(g, x, 0.5f, 4);
    std::int32_t ids[20];
    float wts[20];
    met_moe_router_topk(x.data(), &t.w, 5, 4, renorm, ids, wts);
    const auto logits = ref_linear(to_dbl(x), t, 5);
    for (int r = 0; r < 5; ++r) {
      Dbl p(logits.begin() + r * 16, logits.begin() + (r + 1) * 16);
      for (auto& v : p) v = static_cast<double>(met::cpu::round_bf16(static_cast<float>(v)));
      const double m = *std::max_element(p.begin(), p.end());
      double sum = 0;
      for (auto& v : p) sum += (v = std::exp(v - m));
      for (auto& v : p) v /= sum;
      std::vector<int> order(16);
      for (int e = 0; e < 16; ++e) order[sz(e)] = e;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[sz(a)] > p[sz(b)]; });
      double top = 0;
      for (int k = 0; k < 4; ++k) top += p[sz(order[sz(k)])];
      for (int k = 0; k < 4; ++k) {
        CHECK(ids[r * 4 + k] == order[sz(k)]);
        const double want = renorm ? p[sz(order[sz(k)])] / top : p[sz(order[sz(k)])];
        CHECK(met::cpu::round_bf16(wts[r * 4 + k]) == wts[r * 4 + k]);  // rounded to bf16
        CHECK(std::abs(wts[r * 4 + k] - want) <= want * (1.0 / 256));  // within half a bf16 step of it
      }
    }
  }
}

TEST_CASE("moe_router_topk by hand: experts=4, logits {1, 2, 2, 0} and {3, 0, 1, 0}; a tie goes to the lower expert; norm_topk_prob off keeps the softmax over all experts, on divides by the top-k sum (catches a top-k that renormalises always, or never); weights are bf16") {
  // x = [1, 0]: expert e's logit is w[e][0].
  const auto w = bf16_weight({1, 0, 2, 0, 2, 0, 0, 0}, 4, 2);
  const auto w2 = bf16_weight({3, 0, 0, 0, 1, 0, 0, 0}, 4, 2);
  const Bf16 x = {met::cpu::f32_to_bf16(1.0f), 0};
  const double e = std::exp(1.0);
  for (std::int32_t renorm : {0, 1}) {
    CAPTURE(renorm);
    std::int32_t ids[2];
    float wts[2];
    met_moe_router_topk(x.data(), &w.w, 1, 2, renorm, ids, wts);
    CHECK(ids[0] == 1);
    CHECK(ids[1] == 2);
    const double all = e + 2 * e * e + 1;  // e^1 + e^2 + e^2 + e^0
    for (int k = 0; k < 2; ++k) CHECK(wts[k] == doctest::Approx(renorm ? 0.5 : e * e / all).epsilon(1.0 / 256));
    met_moe_router_topk(x.data(), &w.w, 1, 1, renorm, ids, wts);  // top-1 of a tie: the lower expert
    CHECK(ids[0] == 1);
    CHECK(wts[0] == doctest::Approx(renorm ? 1.0 : e * e / all).epsilon(1.0 / 256));
    met_moe_router_topk(x.data(), &w2.w, 1, 2, renorm, ids, wts);
    CHECK(ids[0] == 0);
    CHECK(ids[1] == 2);
    const double all2 = e * e * e + 1 + e + 1, top2 = e * e * e + e;
    CHECK(wts[0] == doctest::Approx(e * e * e / (renorm ? top2 : all2)).epsilon(1.0 / 256));
    CHECK(wts[1] == doctest::Approx(e / (renorm ? top2 : all2)).epsilon(1.0 / 256));
    for (int k = 0; k < 2; ++k) CHECK(met::cpu::round_bf16(wts[k]) == wts[k]);
  }
}

TEST_CASE("moe_down by hand: experts=3, expert e's down is (e + 1) x identity; y is the routing-weighted sum, and an expert no row picked is never read (its NaN weights leave y finite)") {
  const float nan = std::nanf("");
  // w_down [experts * hidden, inter], hidden = inter = 2; expert 1 is NaN and never routed.
  const auto wd = bf16_weight({1, 0, 0, 1, nan, nan, nan, nan, 3, 0, 0, 3}, 6, 2);
  const std::int32_t ids[4] = {2, 0, 0, 2};  // row 0: experts 2, 0; row 1: experts 0, 2
  const float wts[4] = {0.75f, 0.25f, 0.5f, 0.5f};
  Bf16 h;
  for (float v : {1.0f, 2.0f, 4.0f, 8.0f, 1.0f, -1.0f, 2.0f, 2.0f}) h.push_back(met::cpu::f32_to_bf16(v));
  Bf16 y(4);
  met_moe_down(h.data(), &wd.w, ids, wts, 2, 2, 2, y.data(), /*col0=*/0, /*col1=*/2);
  // row 0: 0.75 * 3 * [1, 2] + 0.25 * 1 * [4, 8]; row 1: 0.5 * 1 * [1, -1] + 0.5 * 3 * [2, 2]
  const float want[4] = {0.75f * 3 + 0.25f * 4, 0.75f * 6 + 0.25f * 8, 0.5f + 3.0f, -0.5f + 3.0f};
  for (int i = 0; i < 4; ++i) CHECK(met::cpu::bf16_to_f32(y[sz(i)]) == want[i]);
  // gate_up reads expert 1's NaN rows only if something routes to it.
  const auto wgu = bf16_weight({1, 0, 0, 1, nan, nan, nan, nan, 2, 0, 0, 2}, 6, 2);  // inter = 1
  const Bf16 x = {met::cpu::f32_to_bf16(1.0f), met::cpu::f32_to_bf16(1.0f), met::cpu::f32_to_bf16(2.0f), met::cpu::f32_to_bf16(0.5f)};
  Bf16 hh(4);
  met_moe_gate_up_silu(x.data(), &wgu.w, ids, 2, 2, 1, hh.data(), /*col0=*/0, /*col1=*/1);
  for (auto v : hh) CHECK(std::isfinite(met::cpu::bf16_to_f32(v)));
  // row 0, expert 2: gate = 2 * x0 = 2, up = 2 * x1 = 2 -> silu(2) * 2
  CHECK(met::cpu::bf16_to_f32(hh[0]) == doctest::Approx(ref_silu(2.0) * 2).epsilon(1e-2));
}

TEST_CASE("moe_down_f32 by hand: the weighted sum over the routed experts stays fp32 (no bf16 step), two halves of the intermediate size add up to the whole, and an expert no row picked is never read (catches a TP body that rounds, drops a slot or ignores its columns)") {
  const float nan = std::nanf("");
  // w_down [experts * hidden, inter], hidden = 2, inter = 2: expert e is (e + 1) x identity; expert 1 NaN.
  const auto wd = bf16_weight({1, 0, 0, 1, nan, nan, nan, nan, 3, 0, 0, 3}, 6, 2);
  const std::int32_t ids[4] = {2, 0, 0, 2};
  const float wts[4] = {0.7f, 0.3f, 0.5f, 0.5f};  // 0.7 and 0.3 are not bf16 values: nothing rounds them
  Bf16 h;
  for (float v : {1.0f, 2.0f, 4.0f, 8.0f, 1.0f, -1.0f, 2.0f, 2.0f}) h.push_back(met::cpu::f32_to_bf16(v));
  std::vector<float> y(4, nan);
  met_moe_down_f32(h.data(), &wd.w, ids, wts, 2, 2, 2, y.data(), /*col0=*/0, /*col1=*/1);
  met_moe_down_f32(h.data(), &wd.w, ids, wts, 2, 2, 2, y.data(), /*col0=*/1, /*col1=*/2);
  const float want[4] = {0.7f * 3 * 1 + 0.3f * 4, 0.7f * 3 * 2 + 0.3f * 8, 0.5f * 1 + 0.5f * 3 * 2, 0.5f * -1 + 0.5f * 3 * 2};
  for (int i = 0; i < 4; ++i) CHECK(y[sz(i)] == doctest::Approx(want[i]).epsilon(1e-6));
  CHECK(met::cpu::round_bf16(y[0]) != y[0]);  // 3.3 kept unrounded
  // Split the intermediate size in two ranks' halves (columns 0 and 1 of each expert's down, h's
  // matching halves): their sums add up to the unsplit sums.
  auto half = [&](std::int64_t c) {
    std::vector<float> col;
    for (std::int64_t r = 0; r < 6; ++r) col.push_back(met::cpu::bf16_to_f32(wd.bf16[sz(r * 2 + c)]));
    TestWeight t = bf16_weight(col, 6, 1);
    Bf16 hh;
    for (std::int64_t s = 0; s < 4; ++s) hh.push_back(h[sz(s * 2 + c)]);
    std::vector<float> part(4);
    met_moe_down_f32(hh.data(), &t.w, ids, wts, 2, 2, 2, part.data(), 0, 2);
    return part;
  };
  const auto p0 = half(0), p1 = half(1);
  for (int i = 0; i < 4; ++i) CHECK(p0[sz(i)] + p1[sz(i)] == doctest::Approx(y[sz(i)]).epsilon(1e-6));
}

namespace {

// One routed slot unfused: a gemv over expert e's [2 * inter, hidden] rows (gate, then up) of the
// row x, then the gated activation body (met_silu_mul or met_gelu_mul).
template <class Act>
Bf16 unfused_slot(const TestWeight& wgu, const std::uint16_t* x, std::int64_t e, std::int64_t inter, Act act) {
  const MetHostWeight slice = slice_rows(wgu, e * 2 * inter, 2 * inter);
  Bf16 gu(sz(2 * inter)), h(sz(inter));
  met_gemv(x, &slice, gu.data(), 1, 0, slice.rows);
  act(gu.data(), h.data(), 1, inter);
  return h;
}

}  // namespace

TEST_CASE("moe_gate_up_silu and moe_down rows=3 hidden=64 inter=32 experts=6 top_k=2 equal per-expert gemv+silu_mul and fp64, and column parts give the same bytes (catches a part that ignores or overruns its columns)") {
  std::mt19937 g(171);
  const std::int64_t hidden = 64, inter = 32, experts = 6, rows = 3;
  const std::int32_t top_k = 2;
  const auto wgu = make_weight(g, MET_WEIGHT_BF16, experts * 2 * inter, hidden);
  const auto wd = make_weight(g, MET_WEIGHT_BF16, experts * hidden, inter);
  const auto x = random_bf16(g, rows * hidden, -2, 2);
  const std::int32_t ids[6] = {5, 0, 2, 3, 3, 1};
  const float wts[6] = {0.7f, 0.3f, 0.5f, 0.5f, 0.9f, 0.1f};
  Bf16 h(sz(rows * top_k * inter)), y(sz(rows * hidden));
  met_moe_gate_up_silu(x.data(), &wgu.w, ids, rows, top_k, static_cast<std::int32_t>(inter), h.data(), 0, inter);
  met_moe_down(h.data(), &wd.w, ids, wts, rows, top_k, static_cast<std::int32_t>(hidden), y.data(), 0, hidden);
  {  // column parts (a GPU emit's slices): any split of the columns gives the same bytes, and each part
     // writes only its columns
    Bf16 hp(h.size(), 0xffff), yp(y.size(), 0xffff);
    for (const auto& [c0, c1] : {std::pair<std::int64_t, std::int64_t>{0, 5}, {5, 17}, {17, 32}})
      met_moe_gate_up_silu(x.data(), &wgu.w, ids, rows, top_k, static_cast<std::int32_t>(inter), hp.data(), c0, c1);
    CHECK(hp == h);
    for (const auto& [c0, c1] : {std::pair<std::int64_t, std::int64_t>{0, 1}, {1, 40}, {40, 64}})
      met_moe_down(h.data(), &wd.w, ids, wts, rows, top_k, static_cast<std::int32_t>(hidden), yp.data(), c0, c1);
    CHECK(yp == y);
    Bf16 yq(y.size(), 0xffff);
    met_moe_down(h.data(), &wd.w, ids, wts, rows, top_k, static_cast<std::int32_t>(hidden), yq.data(), 8, 16);
    for (std::int64_t i = 0; i < rows * hidden; ++i) CHECK(yq[sz(i)] == (i % hidden >= 8 && i % hidden < 16 ? y[sz(i)] : 0xffff));
  }

  const auto xd = to_dbl(x), hd = to_dbl(h);
  Dbl href(h.size()), yref(y.size(), 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (int k = 0; k < top_k; ++k) {
      const std::int64_t e = ids[r * top_k + k];
      const Bf16 h2 = unfused_slot(wgu, x.data() + r * hidden, e, inter, met_silu_mul);
      CHECK(std::equal(h2.begin(), h2.end(), h.begin() + (r * top_k + k) * inter));
      for (std::int64_t i = 0; i < inter; ++i) {
        double gate = 0, up = 0;
        for (std::int64_t c = 0; c < hidden; ++c) {
          gate += xd[sz(r * hidden + c)] * wgu.at(e * 2 * inter + i, c);
          up += xd[sz(r * hidden + c)] * wgu.at(e * 2 * inter + inter + i, c);
        }
        href[sz((r * top_k + k) * inter + i)] = ref_silu(gate) * up;
      }
      // moe_down from the kernel's own h, so only the down step is measured
      for (std::int64_t o = 0; o < hidden; ++o) {
        double acc = 0;
        for (std::int64_t i = 0; i < inter; ++i) acc += hd[sz((r * top_k + k) * inter + i)] * wd.at(e * hidden + o, i);
        yref[sz(r * hidden + o)] += wts[r * top_k + k] * acc;
      }
    }
  check_close(h, href);
  check_close(y, yref);
}

TEST_CASE("moe_down_mma rows=37 hidden=64 inter=32 experts=9 top_k=3, ids past the experts and repeated within a row: y equals moe_down's bytes and acc holds the fp32 sums y rounds (catches a grouped reference that sums in another order)") {
  std::mt19937 g(172);
  const std::int64_t hidden = 64, inter = 32, experts = 9, rows = 37;
  const std::int32_t top_k = 3;
  const auto wd = make_weight(g, MET_WEIGHT_BF16, experts * hidden, inter);
  const auto h = random_bf16(g, rows * top_k * inter, -2, 2);
  std::vector<std::int32_t> ids(sz(rows * top_k));
  std::vector<float> wts(ids.size());
  for (std::size_t t = 0; t < ids.size(); ++t) {
    ids[t] = static_cast<std::int32_t>(g() % (experts + 1));  // experts: a slot routed to no expert
    wts[t] = met::cpu::round_bf16(static_cast<float>(g() % 1000) / 1000.0f);
  }
  ids[3] = ids[4] = ids[5] = 4;  // row 1 picks expert 4 three times
  Bf16 y(sz(rows * hidden)), ym(y.size(), 0xffff);
  met_moe_down(h.data(), &wd.w, ids.data(), wts.data(), rows, top_k, static_cast<std::int32_t>(hidden), y.data(), 0, hidden);
  std::vector<float> acc(y.size(), std::nanf(""));
  for (const auto& [c0, c1] : {std::pair<std::int64_t, std::int64_t>{0, 13}, {13, 64}})
    met_moe_down_mma(h.data(), &wd.w, ids.data(), wts.data(), rows, top_k, static_cast<std::int32_t>(hidden), acc.data(), ym.data(), c0, c1);
  CHECK(ym == y);
  for (std::size_t i = 0; i < acc.size(); ++i) CHECK(met::cpu::f32_to_bf16(acc[i]) == y[i]);
}

TEST_CASE("the grouped experts (moe_group in three row parts, the gate_up and down tiles in two column parts, moe_combine) give moe_gate_up_silu's h at each slot's place and moe_down's bytes, with ids past the experts, an expert repeated in a row and experts of two tiles (catches an unstable sort, a lost or doubled tile, or a sum in another order)") {
  std::mt19937 g(173);
  const std::int64_t hidden = 64, inter = 32, experts = 3, rows = 211;
  const std::int32_t top_k = 3;
  const std::int64_t slots = rows * top_k;
  const auto wgu = make_weight(g, MET_WEIGHT_BF16, experts * 2 * inter, hidden);
  const auto wd = make_weight(g, MET_WEIGHT_BF16, experts * hidden, inter);
  const auto x = random_bf16(g, rows * hidden, -2, 2);
  std::vector<std::int32_t> ids(sz(slots));
  std::vector<float> wts(ids.size());
  for (std::size_t t = 0; t < ids.size(); ++t) {
    ids[t] = static_cast<std::int32_t>(g() % (experts + 1));  // experts: a slot routed to no expert
    wts[t] = met::cpu::round_bf16(static_cast<float>(g() % 1000) / 1000.0f);
  }
  ids[3] = ids[4] = ids[5] = 1;  // row 1 picks expert 1 three times
  Bf16 h(sz(slots * inter), 0), y(sz(rows * hidden));
  met_moe_gate_up_silu(x.data(), &wgu.w, ids.data(), rows, top_k, static_cast<std::int32_t>(inter), h.data(), 0, inter);
  met_moe_down(h.data(), &wd.w, ids.data(), wts.data(), rows, top_k, static_cast<std::int32_t>(hidden), y.data(), 0, hidden);

  Bf16 xs(sz(slots * hidden), 0xffff), hs(sz(slots * inter), 0xffff), ys(sz(slots * hidden), 0xffff);
  std::vector<std::int32_t> pos(ids.size(), -7), tiles(sz(4 * (1 + MET_MOE_WGMMA_MAX_TILES(slots, experts))), -7);
  for (const auto& [r0, r1] : {std::pair<std::int64_t, std::int64_t>{23, 150}, {0, 23}, {150, rows}})
    met::cpu::moe_group_rows(x.data(), ids.data(), rows, top_k, experts, hidden, r0, r1, xs.data(), pos.data(), tiles.data());
  // Places: each expert's slots in slot order from where the expert before ended; none for the rest.
  std::vector<std::int64_t> next(sz(experts + 1), 0);
  for (std::int64_t t = 0; t < slots; ++t)
    if (ids[sz(t)] < experts) ++next[sz(ids[sz(t)] + 1)];
  for (std::int64_t e = 1; e <= experts; ++e) next[sz(e)] += next[sz(e - 1)];
  std::int64_t two_tiles = 0;
  for (std::int64_t t = 0; t < slots; ++t) {
    if (ids[sz(t)] >= experts) {
      CHECK(pos[sz(t)] == -1);
      continue;
    }
    REQUIRE(pos[sz(t)] == next[sz(ids[sz(t)])]++);
    CHECK(std::equal(x.begin() + (t / top_k) * hidden, x.begin() + (t / top_k + 1) * hidden, xs.begin() + pos[sz(t)] * hidden));
  }
  std::int64_t covered = 0;
  for (std::int32_t i = 0; i < tiles[0]; ++i) {
    const std::int32_t* row = tiles.data() + 4 * (1 + i);
    CHECK(row[1] == covered);  // tiles in expert order, back to back
    CHECK(row[2] <= MET_MOE_WGMMA_BM);
    two_tiles += row[2] == MET_MOE_WGMMA_BM;
    covered += row[2];
  }
  CHECK(covered == next[sz(experts - 1)]);
  CHECK(two_tiles > 0);
  // The GEMMs over the tiles: 2 column parts on slices s and the tiles' stride.
  const std::uint32_t slices = 2 * static_cast<std::uint32_t>(MET_MOE_WGMMA_MAX_TILES(slots, experts));
  for (std::uint32_t s = 0; s < slices; ++s) {
    met::cpu::moe_grouped_slice(tiles.data(), slots, experts, s, slices, 2, inter, [&](auto e, auto p0, auto n, auto c0, auto c1) {
      met::cpu::moe_grouped_tile(xs.data(), &wgu.w, hs.data(), e, p0, n, inter, c0, c1, true);
    });
  }
  for (std::int64_t t = 0; t < slots; ++t)
    if (pos[sz(t)] >= 0)
      CHECK(std::equal(h.begin() + t * inter, h.begin() + (t + 1) * inter, hs.begin() + pos[sz(t)] * inter));
  for (std::uint32_t s = 0; s < slices; ++s) {
    met::cpu::moe_grouped_slice(tiles.data(), slots, experts, s, slices, 2, hidden, [&](auto e, auto p0, auto n, auto c0, auto c1) {
      met::cpu::moe_grouped_tile(hs.data(), &wd.w, ys.data(), e, p0, n, hidden, c0, c1, false);
    });
  }
  Bf16 yc(y.size(), 0xffff);
  std::vector<float> yf(y.size(), std::nanf(""));
  for (const auto& [r0, r1] : {std::pair<std::int64_t, std::int64_t>{0, 100}, {100, rows}})
    for (const auto& [c0, c1] : {std::pair<std::int64_t, std::int64_t>{0, 13}, {13, hidden}}) {
      met::cpu::moe_combine_rows(ys.data(), pos.data(), ids.data(), wts.data(), slots, top_k, hidden, r0, r1, c0, c1, true,
                                 [&](std::int64_t r, std::int64_t c, float v) { yc[sz(r * hidden + c)] = met::cpu::f32_to_bf16(v); });
      met::cpu::moe_combine_rows(ys.data(), pos.data(), ids.data(), wts.data(), slots, top_k, hidden, r0, r1, c0, c1, false,
                                 [&](std::int64_t r, std::int64_t c, float v) { yf[sz(r * hidden + c)] = v; });
    }
  CHECK(yc == y);
  // Unrounded: moe_down_f32's sums but for each projection's one bf16 rounding (ys is bf16), so
  // within 2^-8 of the sum of the terms' magnitudes.
  std::vector<float> f32(y.size());
  met_moe_down_f32(h.data(), &wd.w, ids.data(), wts.data(), rows, top_k, static_cast<std::int32_t>(hidden), f32.data(), 0, hidden);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < hidden; ++c) {
      float mag = 0;
      for (std::int64_t k = 0; k < top_k; ++k) {
        const std::int64_t t = r * top_k + k;
        if (pos[sz(t)] >= 0) mag += std::abs(wts[sz(t)] * met::cpu::bf16_to_f32(ys[sz(pos[sz(t)] * hidden + c)]));
      }
      CHECK(std::abs(yf[sz(r * hidden + c)] - f32[sz(r * hidden + c)]) <= mag / 256 + 1e-6f);
    }
}

// ---------------------------------------------------------------- sampling

namespace {
std::vector<std::uint16_t> logits_bf16(const std::vector<float>& v) {
  std::vector<std::uint16_t> out;
  for (float f : v) out.push_back(met::cpu::f32_to_bf16(f));
  return out;
}
}  // namespace

TEST_CASE("sample: temperature 0, top_k 1 and a tiny top_p all give the argmax; ties go to the lowest index") {
  const auto l = logits_bf16({0.5f, 2.0f, -1.0f, 2.0f, 1.9f});
  for (float u : {0.0f, 0.3f, 0.999f}) {
    CHECK(met::cpu::sample_row(l.data(), 5, 0.0f, 1.0f, 0.0f, u) == 1);
    CHECK(met::cpu::sample_row(l.data(), 5, 1.0f, 1.0f, 1.0f, u) <= 3);  // top_k 1 keeps both tied maxima
    CHECK(met::cpu::sample_row(l.data(), 5, 1.0f, 1e-6f, 0.0f, u) != 4);
  }
  CHECK(met::cpu::sample_row(l.data(), 5, 1.0f, 1.0f, 1.0f, 0.0f) == 1);
  CHECK(met::cpu::sample_row(l.data(), 5, 1.0f, 1.0f, 1.0f, 0.999f) == 3);
}

TEST_CASE("sample: frequencies over evenly spaced u follow softmax(logits / T); top_k and top_p cut the tail") {
  std::mt19937 g(7);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  std::vector<float> raw(64);
  for (auto& x : raw) x = d(g);
  const auto l = logits_bf16(raw);
  const float t = 0.7f;
  std::vector<double> p(64);
  double z = 0;
  for (int i = 0; i < 64; ++i) z += p[i] = std::exp((met::cpu::bf16_to_f32(l[i]) - 3.0) / t);
  std::vector<int> count(64, 0);
  const int n = 20000;
  for (int k = 0; k < n; ++k) ++count[met::cpu::sample_row(l.data(), 64, t, 1.0f, 0.0f, (static_cast<float>(k) + 0.5f) / n)];
  for (int i = 0; i < 64; ++i) CHECK(std::abs(count[i] / double(n) - p[i] / z) < 2e-3);
  // top_k 5: only the five largest logits ever come out; top_p 0.5: only the head holding half the mass.
  std::vector<int> order(64);
  for (int i = 0; i < 64; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  std::vector<bool> top5(64, false), head(64, false);
  for (int i = 0; i < 5; ++i) top5[order[i]] = true;
  double mass = 0;
  for (int i = 0; i < 64 && mass < 0.5 * z; ++i) {
    head[order[i]] = true;
    mass += p[order[i]];
  }
  for (int k = 0; k < 2000; ++k) {
    const float u = (static_cast<float>(k) + 0.5f) / 2000;
    CHECK(top5[met::cpu::sample_row(l.data(), 64, t, 1.0f, 5.0f, u)]);
    CHECK(head[met::cpu::sample_row(l.data(), 64, t, 0.5f, 0.0f, u)]);
  }
}

TEST_CASE("sample: rows with temperature <= 0 are left alone; -inf and NaN logits are never drawn") {
  const float nan = std::nanf("");
  const auto l = logits_bf16({-INFINITY, 0.0f, nan, 0.0f, -INFINITY, nan, 0.0f, 0.0f});
  const float params[8] = {0.0f, 1.0f, 0.0f, 0.5f, 1.0f, 1.0f, 0.0f, 0.5f};
  std::int32_t tokens[2] = {-7, -7};
  met_sample(l.data(), params, tokens, 2, 4);
  CHECK(tokens[0] == -7);
  CHECK((tokens[1] == 6 || tokens[1] == 7) == false);  // row 1 is logits 4..7: indices within the row
  CHECK((tokens[1] == 2 || tokens[1] == 3));
}

TEST_CASE("attn_prefill with fp8 caches (k_scale=0.005 v_scale=0.002) matches fp64 over the dequantised codes (a scale left out or a bf16 read of the codes fails)") {
  std::mt19937 g(152);
  MetAttnShape s{4, 2, 32, 32, 0, 0.0f, 0.2f};
  s.kv_fp8 = 1;
  s.k_scale = 0.005f;
  s.v_scale = 0.002f;
  const std::int64_t tokens = 24, start = 5, base = 2, slots = base + start + tokens;
  const auto q = random_bf16(g, tokens * 4 * 32, -2, 2);
  const auto kc = random_cache(g, slots * 2 * 32, 0, 0, 1, s.k_scale), vc = random_cache(g, slots * 2 * 32, 0, 0, 1, s.v_scale);
  Bf16 out(sz(tokens * 4 * 32));
  met_attn_prefill(q.data(), kc.data.data(), vc.data.data(), base, static_cast<std::int32_t>(start), tokens, &s, 0, 4, nullptr,
                   out.data());
  const auto qd = to_dbl(q);
  Dbl ref;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (int h = 0; h < 4; ++h) {
      const auto o = ref_attn(qd.data() + (t * 4 + h) * 32, kc.values, vc.values, base, start + t, h / 2, s, nullptr);
      ref.insert(ref.end(), o.begin(), o.end());
    }
  check_close(out, ref);
}

TEST_CASE("kv_append and the fused qkv body with fp8 caches write e4m3(x / scale) at the row's slot (catches an unscaled or bf16 write)") {
  std::mt19937 g(92);
  const auto k = random_bf16(g, 2 * 64, -3, 3), v = random_bf16(g, 2 * 32, -1, 1);
  std::vector<std::uint8_t> kc(4 * 64, 0xaa), vc(4 * 32, 0xaa);
  const std::int64_t slots[2] = {3, 1};
  const float ks = 3.0f / 448.0f, vs = 0.5f / 448.0f;
  met_kv_append(k.data(), 64, v.data(), 32, reinterpret_cast<std::uint16_t*>(kc.data()),
                reinterpret_cast<std::uint16_t*>(vc.data()), slots, 2, 1, 64, 32, /*kv_fp8=*/1, ks, vs);
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 64; ++i)
      CHECK(kc[sz(slots[r] * 64 + i)] == met::cpu::f32_to_fp8_e4m3(bf16_to_f32(k[sz(r * 64 + i)]) / ks));
    for (int i = 0; i < 32; ++i)
      CHECK(vc[sz(slots[r] * 32 + i)] == met::cpu::f32_to_fp8_e4m3(bf16_to_f32(v[sz(r * 32 + i)]) / vs));
  }
  for (int i = 0; i < 64; ++i) CHECK(kc[sz(i)] == 0xaa);  // slot 0 untouched
  // A code is within half a step of x / scale: e4m3 keeps 3 mantissa bits.
  for (int i = 0; i < 64; ++i) {
    const double x = bf16_to_f32(k[sz(64 + i)]) / ks, y = met::cpu::fp8_e4m3_to_f32(kc[sz(64 + i)]);
    CHECK(std::abs(x - y) <= std::max(std::abs(x) / 16.0, 1.0 / 1024.0));
  }
}

TEST_CASE("f32_to_fp8_e4m3 (cpu) round-trips every finite code, rounds ties to even, saturates at 448 and keeps NaN (catches truncation or an overflow to NaN)") {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    CAPTURE(c);
    const float v = met::cpu::fp8_e4m3_to_f32(static_cast<std::uint8_t>(c));
    if (c == 0x80) continue;  // -0 encodes as 0x80 too, checked below
    CHECK(met::cpu::f32_to_fp8_e4m3(v) == c);
  }
  CHECK(met::cpu::f32_to_fp8_e4m3(-0.0f) == 0x80);
  CHECK(met::cpu::f32_to_fp8_e4m3(1.0625f) == met::cpu::f32_to_fp8_e4m3(1.0f));   // halfway 1 (even) / 1.125
  CHECK(met::cpu::f32_to_fp8_e4m3(1.1875f) == met::cpu::f32_to_fp8_e4m3(1.25f));  // halfway 1.125 / 1.25 (even)
  CHECK(met::cpu::f32_to_fp8_e4m3(3.0f / 1024.0f) == 0x02);                      // halfway subnormals 1/512, 2/512
  CHECK(met::cpu::f32_to_fp8_e4m3(1.9f / 64.0f) == 0x0f);                        // 1.875 * 2^-6, top of exponent 1
  CHECK(met::cpu::f32_to_fp8_e4m3(460.0f) == 0x7e);
  CHECK(met::cpu::f32_to_fp8_e4m3(-1e30f) == 0xfe);
  CHECK(met::cpu::f32_to_fp8_e4m3(std::nanf("")) == 0x7f);
}

TEST_CASE("gelu_mul_split rows=3 dim=16 with up at column 32 of rows of 64 matches fp64 gelu_tanh(gate) * up (a wrong stride or column fails)") {
  std::mt19937 g(54);
  const auto gate = random_bf16(g, 3 * 16, -3, 3);
  const auto up = random_bf16(g, 3 * 64, -2, 2);
  Bf16 out(3 * 16);
  met_gelu_mul_split(gate.data(), up.data() + 32, 64, out.data(), 3, 16);
  Dbl ref(out.size());
  const auto gd = to_dbl(gate), ud = to_dbl(up);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 16; ++i) {
      const double x = gd[sz(r * 16 + i)];
      ref[sz(r * 16 + i)] = 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))) * ud[sz(r * 64 + 32 + i)];
    }
  check_close(out, ref, /*rel=*/1.0 / 128);
}

// ---------------------------------------------------------------- gpt-oss

namespace {
float bf(std::uint16_t v) { return met::cpu::bf16_to_f32(v); }
std::uint16_t tobf(float v) { return met::cpu::f32_to_bf16(v); }
constexpr float kHalfUlpAtOne = 1.0f / 256.0f;  // 2^-8: 1 + it is a bf16 tie, rounded to 1
}  // namespace

TEST_CASE("rope attn_scale=1.5 at position 0 multiplies every rotated element by bf16(1.5) (YaRN's attention factor; a body that drops it leaves x unchanged)") {
  MetRopeShape s{1, 1, 4, 4, 10000.0f};
  s.attn_scale = 1.5f;
  Bf16 q = {tobf(1), tobf(2), tobf(-3), tobf(4)}, k = {tobf(0.5f), tobf(-1), tobf(2), tobf(8)};
  const std::int32_t pos[1] = {0};
  met_rope(q.data(), 4, k.data(), 4, pos, 1, &s, nullptr);
  const float wq[4] = {1.5f, 3, -4.5f, 6}, wk[4] = {0.75f, -1.5f, 3, 12};
  for (int i = 0; i < 4; ++i) {
    CHECK(bf(q[sz(i)]) == wq[i]);
    CHECK(bf(k[sz(i)]) == wk[i]);
  }
}

TEST_CASE("gemv_bias and gemm_bias round x W^T + b once: 1 + 2^-8 + 2^-8 is 1 + 2^-7, where rounding the product first gives 1 (catches a bias added after the projection's rounding)") {
  const auto w = bf16_weight({1, kHalfUlpAtOne, 1, 0}, 2, 2);
  const Bf16 x = {tobf(1), tobf(1), tobf(1), tobf(1)};
  const Bf16 b = {tobf(kHalfUlpAtOne), tobf(0.5f)};
  for (int gemm : {0, 1}) {
    CAPTURE(gemm);
    Bf16 y(4);
    (gemm ? met_gemm_bias : met_gemv_bias)(x.data(), &w.w, b.data(), y.data(), 2, 0, 2);
    for (int r = 0; r < 2; ++r) {
      CHECK(bf(y[sz(r * 2)]) == 1.0f + 2 * kHalfUlpAtOne);
      CHECK(bf(y[sz(r * 2 + 1)]) == 1.5f);
    }
  }
}

TEST_CASE("moe_router_topk_bias by hand: experts=4, logits {1, 2, 2, 0} + bias {0, 0, 0.5, 3}: the top 2 are experts 3 and 2 (the bias decides), weights a softmax over those two only; with no bias a tie goes to the lower expert") {
  const auto w = bf16_weight({1, 0, 2, 0, 2, 0, 0, 0}, 4, 2);
  const Bf16 x = {tobf(1), 0};
  const Bf16 bias = {0, 0, tobf(0.5f), tobf(3)}, zero(4, 0);
  std::int32_t ids[2];
  float wts[2];
  met_moe_router_topk_bias(x.data(), &w.w, bias.data(), 1, 2, ids, wts);
  CHECK(ids[0] == 3);
  CHECK(ids[1] == 2);
  const double p3 = 1 / (1 + std::exp(-0.5));  // softmax of {3, 2.5}
  CHECK(wts[0] == doctest::Approx(p3).epsilon(1.0 / 256));
  CHECK(wts[1] == doctest::Approx(1 - p3).epsilon(1.0 / 256));
  for (int k = 0; k < 2; ++k) CHECK(met::cpu::round_bf16(wts[k]) == wts[k]);
  met_moe_router_topk_bias(x.data(), &w.w, zero.data(), 1, 1, ids, wts);
  CHECK(ids[0] == 1);
  CHECK(wts[0] == 1.0f);  // a softmax over one logit
}

TEST_CASE("moe_gate_up_swiglu by hand: bf16 [experts, hidden, 2 * inter] with gate and up interleaved, a bias per expert, gate clamped above and up both ways at limit 7, (up + 1) * gate * sigmoid(1.702 gate); an expert no row picked is never read") {
  const float nan = std::nanf("");
  // experts=2, hidden=2, inter=2: expert 0 NaN (never routed); expert 1's input row 0 is
  // [gate0, up0, gate1, up1] = [1, 0.5, 8, -9], row 1 unused (x = [1, 0]).
  const auto w = bf16_weight({nan, nan, nan, nan, nan, nan, nan, nan, 1, 0.5f, 8, -9, 100, 100, 100, 100}, 4, 4);
  const Bf16 bias = {tobf(nan), tobf(nan), tobf(nan), tobf(nan), tobf(0.5f), 0, 0, 0};
  const Bf16 x = {tobf(1), 0};
  const std::int32_t ids[1] = {1};
  Bf16 h(2);
  met_moe_gate_up_swiglu(x.data(), &w.w, bias.data(), ids, 1, 1, /*inter=*/2, /*hidden=*/2, /*experts=*/2, /*limit=*/7.0f,
                         /*alpha=*/1.702f, h.data(), 0, 2);
  auto r = [](double v) { return static_cast<double>(met::cpu::round_bf16(static_cast<float>(v))); };
  auto act = [&](double gate, double up) {
    const double sig = r(1 / (1 + std::exp(-r(gate * static_cast<double>(1.702f)))));
    return r(r(up + 1) * r(gate * sig));
  };
  CHECK(bf(h[0]) == doctest::Approx(act(1.5, 0.5)).epsilon(1e-6));  // gate 1 + bias 0.5
  CHECK(bf(h[1]) == doctest::Approx(act(7, -7)).epsilon(1e-6));     // both clamped: (1 - 7) * 7 sigmoid(11.9)
  CHECK(bf(h[1]) < -40.0f);
}

TEST_CASE("moe_gate_up_swiglu and moe_down_bias read an MXFP4 expert weight (rows [experts * out, in], low nibble first, 2^(scale - 127)) as the bf16 [experts, in, out] of the same values: equal bytes (catches a transposed or nibble-swapped read)") {
  std::mt19937 g(909);
  const std::int64_t experts = 3, hidden = 64, inter = 32;
  auto gu = make_weight(g, MET_WEIGHT_MXFP4, experts * 2 * inter, hidden);
  auto dn = make_weight(g, MET_WEIGHT_MXFP4, experts * hidden, inter);
  auto transposed = [](const TestWeight& t, std::int64_t e_count, std::int64_t outs, std::int64_t ins) {
    std::vector<float> v(sz(e_count * ins * outs));
    for (std::int64_t e = 0; e < e_count; ++e)
      for (std::int64_t o = 0; o < outs; ++o)
        for (std::int64_t i = 0; i < ins; ++i) v[sz((e * ins + i) * outs + o)] = static_cast<float>(t.at(e * outs + o, i));
    return bf16_weight(v, e_count * ins, outs);
  };
  const auto gu16 = transposed(gu, experts, 2 * inter, hidden), dn16 = transposed(dn, experts, hidden, inter);
  const auto x = random_bf16(g, 2 * hidden), gbias = random_bf16(g, experts * 2 * inter, -0.1f, 0.1f),
             dbias = random_bf16(g, experts * hidden, -0.1f, 0.1f);
  const std::int32_t ids[4] = {2, 0, 1, 2};
  const float wts[4] = {0.625f, 0.375f, 0.5f, 0.5f};
  Bf16 h4(4 * inter), h16(4 * inter), y4(2 * hidden), y16(2 * hidden);
  met_moe_gate_up_swiglu(x.data(), &gu.w, gbias.data(), ids, 2, 2, inter, hidden, experts, 7.0f, 1.702f, h4.data(), 0, inter);
  met_moe_gate_up_swiglu(x.data(), &gu16.w, gbias.data(), ids, 2, 2, inter, hidden, experts, 7.0f, 1.702f, h16.data(), 0, inter);
  CHECK(h4 == h16);
  met_moe_down_bias(h4.data(), &dn.w, dbias.data(), ids, wts, 2, 2, hidden, inter, experts, y4.data(), 0, hidden);
  met_moe_down_bias(h4.data(), &dn16.w, dbias.data(), ids, wts, 2, 2, hidden, inter, experts, y16.data(), 0, hidden);
  CHECK(y4 == y16);
  double amax = 0;
  for (auto v : y4) amax = std::max(amax, static_cast<double>(std::abs(bf(v))));
  CHECK(amax > 0.01);  // the experts really contributed
}

TEST_CASE("moe_down_bias by hand: hidden = inter = 1, identity experts; the weighted copies sum in fp32 and round once: 1 + 2^-8 + 2^-8 is 1 + 2^-7, where a bf16 sum rounding after each add stays 1 (catches a per-add rounding), and the bias joins before the weight") {
  const auto w = bf16_weight({1, 1, 1}, 3, 1);  // [experts, inter, hidden] = [3, 1, 1]
  const Bf16 zero(3, 0);
  // slots in the order experts 2, 0, 1; expert 0 carries 1, the others 2^-8.
  const std::int32_t ids[3] = {2, 0, 1};
  const float wts[3] = {1, 1, 1};
  const Bf16 h = {tobf(kHalfUlpAtOne), tobf(1), tobf(kHalfUlpAtOne)};
  Bf16 y(1);
  met_moe_down_bias(h.data(), &w.w, zero.data(), ids, wts, 1, 3, 1, 1, 3, y.data(), 0, 1);
  CHECK(bf(y[0]) == 1.0f + 2 * kHalfUlpAtOne);
  // One expert with bias 0.5 and weight 0.5: 0.5 * (2 + 0.5).
  const Bf16 bias = {tobf(0.5f), 0, 0}, h2 = {tobf(2)};
  const std::int32_t id0[1] = {0};
  const float w05[1] = {0.5f};
  met_moe_down_bias(h2.data(), &w.w, bias.data(), id0, w05, 1, 1, 1, 1, 3, y.data(), 0, 1);
  CHECK(bf(y[0]) == 1.25f);
}

TEST_CASE("moe_router_scaled by hand (Gemma-4's router): x = c (1, 1, 1, 1) normalises to ones for any c, times scale (1, 1, 1, 1) and hidden^-1/2 = 0.5; logits {2, 1, 1, 0}: the top 2 are experts 0 and 1 (a tie goes to the lower expert), their softmax probabilities over all four divided by their sum, then times per_expert_scale {0.5, 2, 1, 1}; a scale of (1, 1, 3, 3) makes expert 2 the second (catches a router that skips the norm, the scale vector, the renormalisation or the per-expert scale)") {
  const auto w = bf16_weight({1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0}, 4, 4);
  const Bf16 ones(4, tobf(1)), pes = {tobf(0.5f), tobf(2), tobf(1), tobf(1)};
  const double z = std::exp(2.0) + 2 * std::exp(1.0) + 1, p0 = std::exp(2.0) / z, p1 = std::exp(1.0) / z;
  for (const float c : {2.0f, 10.0f}) {
    CAPTURE(c);
    const Bf16 x(4, tobf(c));
    std::int32_t ids[2];
    float wts[2];
    met_moe_router_scaled(x.data(), &w.w, ones.data(), pes.data(), 1, 2, kEps, 0.5f, ids, wts);
    CHECK(ids[0] == 0);
    CHECK(ids[1] == 1);
    CHECK(wts[0] == doctest::Approx(0.5 * p0 / (p0 + p1)).epsilon(1.0 / 128));
    CHECK(wts[1] == doctest::Approx(2 * p1 / (p0 + p1)).epsilon(1.0 / 128));
    for (int k = 0; k < 2; ++k) CHECK(met::cpu::round_bf16(wts[k]) == wts[k]);
  }
  // scale (1, 1, 3, 3): n = (0.5, 0.5, 1.5, 1.5), logits {4, 1, 3, 0}.
  const Bf16 x(4, tobf(2)), scale = {tobf(1), tobf(1), tobf(3), tobf(3)};
  std::int32_t ids[2];
  float wts[2];
  met_moe_router_scaled(x.data(), &w.w, scale.data(), ones.data(), 1, 2, kEps, 0.5f, ids, wts);
  CHECK(ids[0] == 0);
  CHECK(ids[1] == 2);
  CHECK(wts[0] == doctest::Approx(1 / (1 + std::exp(-1.0))).epsilon(1.0 / 128));
}

TEST_CASE("moe_gate_up_gelu rows=3 hidden=64 inter=32 experts=6 top_k=2: each routed slot's h is the bytes of a gemv over its expert's [2 * inter, hidden] rows (gate rows, then up rows) and gelu_mul, and column parts give the same bytes (catches silu for gelu, interleaved gate and up, or a part that overruns its columns)") {
  std::mt19937 g(172);
  const std::int64_t hidden = 64, inter = 32, experts = 6, rows = 3;
  const std::int32_t top_k = 2;
  const auto wgu = make_weight(g, MET_WEIGHT_BF16, experts * 2 * inter, hidden);
  const auto x = random_bf16(g, rows * hidden, -2, 2);
  const std::int32_t ids[6] = {5, 0, 2, 3, 3, 1};
  Bf16 h(sz(rows * top_k * inter));
  met_moe_gate_up_gelu(x.data(), &wgu.w, ids, rows, top_k, static_cast<std::int32_t>(inter), h.data(), 0, inter);
  Bf16 hp(h.size(), 0xffff);
  for (const auto& [c0, c1] : {std::pair<std::int64_t, std::int64_t>{0, 5}, {5, 17}, {17, 32}})
    met_moe_gate_up_gelu(x.data(), &wgu.w, ids, rows, top_k, static_cast<std::int32_t>(inter), hp.data(), c0, c1);
  CHECK(hp == h);
  for (std::int64_t r = 0; r < rows; ++r)
    for (int k = 0; k < top_k; ++k) {
      const Bf16 h2 = unfused_slot(wgu, x.data() + r * hidden, ids[r * top_k + k], inter, met_gelu_mul);
      CHECK(std::equal(h2.begin(), h2.end(), h.begin() + (r * top_k + k) * inter));
    }
}
