// The rope's inverse frequencies (default, linear, llama3 and proportional) and the generated tensor that
// carries them: its descriptor (written by emit) and its bytes (computed by the loader from
// build.json), so the table's shape is stated in one room.
#include "emit/rope.hpp"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace met::emit {

namespace detail {

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

}  // namespace detail

std::vector<float> rope_inv_freq(const RopeConfig& rope, std::int64_t rotary_dim) {
  constexpr double kTwoPi = 6.283185307179586;
  constexpr double kYarnRampGuard = 0.001;  // a zero-width ramp widened, as transformers does
  std::vector<float> out;
  // proportional: the rotated frequencies, floor(partial * rotary_dim / 2) of them (Python's
  // int(partial * head_dim // 2)); the others are 0.
  const auto rotated =
      rope.type == "proportional"
          ? static_cast<std::int64_t>(std::floor(rope.partial_rotary_factor * static_cast<double>(rotary_dim) / 2.0))
          : rotary_dim / 2;
  for (std::int64_t i = 0; i < rotary_dim / 2; ++i) {
    double f = std::pow(rope.theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim));
    if (rope.type == "proportional") {
      f = i < rotated ? f / rope.factor : 0.0;
    } else if (rope.type == "linear") {
      f /= rope.factor;
    } else if (rope.type == "yarn") {
      // The ramp runs over the correction range: below `low` the frequency is kept
      // (extrapolated), above `high` divided by the factor (interpolated), linear between.
      auto correction_dim = [&](double rotations) {
        return static_cast<double>(rotary_dim) * std::log(rope.original_max_position_embeddings / (rotations * kTwoPi)) /
               (2.0 * std::log(rope.theta));
      };
      double low = correction_dim(rope.beta_fast), high = correction_dim(rope.beta_slow);
      if (rope.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(rotary_dim - 1));
      if (low == high) high += kYarnRampGuard;
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double kept = 1.0 - ramp;
      f = f / rope.factor * (1.0 - kept) + f * kept;
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
