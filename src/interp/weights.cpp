// Maps checkpoint shards (mmap, read-only), re-reads each shard's safetensors header and holds the
// manifest to it, then lays out one contiguous buffer per manifest entry. Only fused entries and
// misaligned tensors cost a copy; everything else is read in place from the page cache.
#include "interp/weights.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <string_view>

#include "core/strings.hpp"
#include "model/safetensors.hpp"

namespace met::interp {

struct LoadedWeights::Mapping {
  std::string path;
  const std::byte* addr = nullptr;
  std::uint64_t size = 0;
  std::uint64_t data_start = 0;                       // 8 + header length
  std::map<std::string, model::TensorInfo> tensors;   // its header
  ~Mapping() {
    if (addr) munmap(const_cast<std::byte*>(addr), size);
  }
};

namespace {

std::uint64_t elems(const std::vector<std::uint64_t>& shape) {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// Copies part p's bytes (at src, the whole tensor) to dst, or its tensor-parallel window of them:
// the window's elements in row-major order. Returns the bytes written.
std::uint64_t copy_window(const emit::WeightPart& p, const std::byte* src, std::byte* dst) {
  if (p.window.empty()) {
    std::memcpy(dst, src, p.bytes);
    return p.bytes;
  }
  const std::size_t nd = p.shape.size();
  const std::uint64_t el = p.bytes / elems(p.shape);
  // The innermost dimensions the window holds whole copy as one run with the first one it cuts.
  std::size_t d0 = nd - 1;
  while (d0 > 0 && p.window[2 * d0] == 0 && p.window[2 * d0 + 1] == p.shape[d0]) --d0;
  std::uint64_t inner = el;  // bytes of one step along d0
  for (std::size_t d = d0 + 1; d < nd; ++d) inner *= p.shape[d];
  const std::uint64_t run = p.window[2 * d0 + 1] * inner;
  std::vector<std::uint64_t> idx(d0, 0);  // the position over the outer dimensions, within the window
  std::uint64_t at = 0;
  while (true) {
    std::uint64_t off = 0;  // element offset of the run's first element, in units of d0 steps
    for (std::size_t d = 0; d < d0; ++d) off = (off + p.window[2 * d] + idx[d]) * p.shape[d + 1];
    off += p.window[2 * d0];
    std::memcpy(dst + at, src + off * inner, run);
    at += run;
    std::size_t d = d0;
    while (d > 0 && ++idx[d - 1] == p.window[2 * (d - 1) + 1]) idx[--d] = 0;
    if (d == 0) break;
  }
  return at;
}

constexpr std::uint64_t kLengthBytes = 8;

std::string shape_text(const std::vector<std::uint64_t>& s) {
  std::vector<std::string> parts;
  for (auto d : s) parts.push_back(std::to_string(d));
  return "[" + join(parts, ", ") + "]";
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

std::size_t element_align(const std::string& safetensors_dtype) {
  const int bits = model::dtype_bits(safetensors_dtype).value_or(8);
  return bits >= 8 ? static_cast<std::size_t>(bits / 8) : 1;
}

bool aligned(const std::byte* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }

}  // namespace

LoadedWeights::LoadedWeights() = default;
LoadedWeights::LoadedWeights(LoadedWeights&&) noexcept = default;
LoadedWeights& LoadedWeights::operator=(LoadedWeights&&) noexcept = default;
LoadedWeights::~LoadedWeights() = default;

std::optional<std::size_t> LoadedWeights::find(const std::string& name) const {
  for (std::size_t k = 0; k < manifest_.tensors.size(); ++k) {
    if (manifest_.tensors[k].name == name) return k;
  }
  return std::nullopt;
}

std::uint64_t LoadedWeights::mapped_bytes() const {
  std::uint64_t n = 0;
  for (const auto& m : maps_) n += m->size;
  return n;
}

std::uint64_t LoadedWeights::owned_bytes() const { return owned_bytes_; }

Expected<LoadedWeights> LoadedWeights::load(const emit::WeightsManifest& manifest, const std::string& checkpoint_dir) {
  LoadedWeights w;
  w.manifest_ = manifest;
  std::map<std::string, Mapping*> by_file;

  auto map_file = [&](const std::string& file, const std::string& who) -> Expected<Mapping*> {
    auto it = by_file.find(file);
    if (it != by_file.end()) return it->second;
    auto m = std::make_unique<Mapping>();
    m->path = checkpoint_dir + "/" + file;
    const int fd = ::open(m->path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(fmt::format("{}: {} (needed by {})", m->path, std::strerror(errno), who));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return fail(fmt::format("{}: not a regular file (needed by {})", m->path, who));
    }
    m->size = static_cast<std::uint64_t>(st.st_size);
    if (m->size < kLengthBytes) {
      ::close(fd);
      return fail(fmt::format("{}: truncated: {} bytes, shorter than the 8-byte header length", m->path, m->size));
    }
    void* addr = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (addr == MAP_FAILED) return fail(fmt::format("{}: mmap failed: {}", m->path, std::strerror(errno)));
    m->addr = static_cast<const std::byte*>(addr);
    std::uint64_t len = 0;
    for (std::size_t k = 0; k < kLengthBytes; ++k) len |= static_cast<std::uint64_t>(m->addr[k]) << (8 * k);
    if (len > m->size - kLengthBytes) {
      return fail(fmt::format("{}: truncated: header of {} bytes, file of {}", m->path, len, m->size));
    }
    m->data_start = kLengthBytes + len;
    const std::string_view text(reinterpret_cast<const char*>(m->addr + kLengthBytes), len);
    MET_TRY(auto header, model::parse_safetensors_header(text, m->size - m->data_start, m->path, file));
    m->tensors = std::move(header.tensors);
    Mapping* raw = m.get();
    w.maps_.push_back(std::move(m));
    by_file[file] = raw;
    return raw;
  };

  // The part's bytes in the mapping, after checking the header still says what the manifest does.
  auto part_bytes = [&](const emit::WeightPart& p, const std::string& entry) -> Expected<const std::byte*> {
    const std::string who = fmt::format("weight '{}' tensor '{}'", entry, p.tensor);
    MET_TRY(Mapping * m, map_file(p.file, who));
    auto it = m->tensors.find(p.tensor);
    if (it == m->tensors.end()) {
      return fail(fmt::format("{}: {}: not in the safetensors header; the checkpoint changed since emit", m->path, who));
    }
    const model::TensorInfo& t = it->second;
    auto differ = [&](const char* what, const std::string& have, const std::string& want) {
      return fail(fmt::format("{}: {}: {} is {} in the checkpoint, {} in weights.json; the checkpoint changed since emit",
                              m->path, who, what, have, want));
    };
    if (t.dtype != p.dtype) return differ("dtype", t.dtype, p.dtype);
    if (t.shape != p.shape) return differ("shape", shape_text(t.shape), shape_text(p.shape));
    if (m->data_start + t.begin != p.offset) {
      return differ("offset", std::to_string(m->data_start + t.begin), std::to_string(p.offset));
    }
    if (t.end - t.begin != p.bytes) return differ("size", std::to_string(t.end - t.begin), std::to_string(p.bytes));
    return m->addr + p.offset;
  };

  auto own = [&](std::uint64_t n) -> std::byte* {
    w.owned_.push_back(std::make_unique<std::byte[]>(n));
    w.owned_bytes_ += n;
    return w.owned_.back().get();
  };

  for (const auto& e : manifest.tensors) {
    Slot s;
    // Weight bytes: in place when one aligned part, else concatenated.
    std::vector<const std::byte*> srcs;
    for (const auto& p : e.parts) {
      MET_TRY(auto ptr, part_bytes(p, e.name));
      srcs.push_back(ptr);
    }
    const std::size_t align = element_align(e.parts.at(0).dtype);
    bool windowed = false;
    for (const auto& p : e.parts) {
      windowed = windowed || !p.window.empty();
      s.bytes += p.window.empty() ? p.bytes : p.bytes / elems(p.shape) * elems(emit::part_shape(p));
    }
    if (windowed) {  // a tensor-parallel rank's window of each part, the parts one after another
      std::byte* buf = own(s.bytes);
      std::uint64_t at = 0;
      for (std::size_t k = 0; k < srcs.size(); ++k) at += copy_window(e.parts[k], srcs[k], buf + at);
      s.data = buf;
    } else if (srcs.size() == 1 && aligned(srcs[0], align)) {
      s.data = srcs[0];
    } else {
      std::byte* buf = own(s.bytes);
      std::uint64_t at = 0;
      for (std::size_t k = 0; k < srcs.size(); ++k) {
        std::memcpy(buf + at, srcs[k], e.parts[k].bytes);
        at += e.parts[k].bytes;
      }
      s.data = buf;
    }
    // Scales: stacked like the parts. A part that does not end on a block boundary would shift
    // the next part's blocks, so rows are re-blocked at g = gcd(block, rows of every part but the last).
    if (e.dtype == "mxfp4") {  // e8m0 bytes, one per 32 codes, in the blocks' order: read in place
      const auto& sp = e.scale_parts.at(0);
      MET_TRY(auto ptr, part_bytes(sp, e.name));
      if (sp.window.empty()) {
        s.scales = ptr;
        s.scale_bytes = sp.bytes;
      } else {  // a tensor-parallel rank's window, as its blocks'
        s.scale_bytes = sp.bytes / elems(sp.shape) * elems(emit::part_shape(sp));
        std::byte* buf = own(s.scale_bytes);
        copy_window(sp, ptr, buf);
        s.scales = buf;
      }
    } else if (!e.scale_parts.empty() && e.block.empty()) {
      // Per-tensor scales (modelopt): one float per row, each part's rows repeating its scale, so the
      // view is a block of 1 x cols and a fused q/k/v keeps each projection's own scale.
      // A tensor-parallel window keeps its tensor's scale over the window's rows and columns.
      const std::uint64_t cols = e.parts[0].shape.size() == 2 ? emit::part_shape(e.parts[0])[1] : 0;
      s.scale_bytes = e.shape.at(0) * sizeof(float);
      std::byte* buf = own(s.scale_bytes);
      std::uint64_t row = 0;
      for (std::size_t k = 0; k < e.parts.size(); ++k) {
        MET_TRY(auto ptr, part_bytes(e.scale_parts[k], e.name));
        float v = 0;
        std::memcpy(&v, ptr, sizeof v);
        const std::uint64_t rows = emit::part_shape(e.parts[k])[0];
        for (std::uint64_t j = 0; j < rows; ++j, ++row) std::memcpy(buf + row * sizeof v, &v, sizeof v);
      }
      s.scales = buf;
      s.block_rows = 1;
      s.block_cols = static_cast<std::int32_t>(cols);
      // Static activation scales: the parts of a fused entry read one input (q/k/v the same normed
      // row, gate/up too), so they share the largest of their calibrated scales, as vLLM's
      // modelopt loader does; a smaller one would clip what the larger was calibrated to hold.
      for (const auto& p : e.input_scale_parts) {
        MET_TRY(auto ptr, part_bytes(p, e.name));
        float v = 0;
        std::memcpy(&v, ptr, sizeof v);
        if (!(v > 0.0f) || !std::isfinite(v)) {
          return fail(fmt::format("weight '{}': input scale '{}' is {}; a static activation scale must be finite and positive",
                                  e.name, p.tensor, v));
        }
        s.act_scale = std::max(s.act_scale, v);
      }
    } else if (!e.scale_parts.empty()) {
      const std::uint64_t br = e.block.at(0), bc = e.block.at(1);
      std::uint64_t g = br;
      // A tensor-parallel rank's parts are windows of whole blocks, their scales windows of the
      // scale tensors (copied out first); the rows below are the windows'.
      for (std::size_t k = 0; k + 1 < e.parts.size(); ++k) g = std::gcd(g, emit::part_shape(e.parts[k])[0]);
      const std::uint64_t cols = emit::part_shape(e.parts[0])[1];
      const std::uint64_t row_bytes = ceil_div(cols, bc) * sizeof(float);
      std::vector<const std::byte*> ssrcs;
      for (const auto& p : e.scale_parts) {
        MET_TRY(auto ptr, part_bytes(p, e.name));
        if (!p.window.empty()) {
          std::byte* win = own(p.bytes / elems(p.shape) * elems(emit::part_shape(p)));
          copy_window(p, ptr, win);
          ptr = win;
        }
        ssrcs.push_back(ptr);
      }
      if (g == br && ssrcs.size() == 1 && aligned(ssrcs[0], sizeof(float))) {
        s.scales = ssrcs[0];
        s.scale_bytes = e.scale_parts[0].bytes / elems(e.scale_parts[0].shape) * elems(emit::part_shape(e.scale_parts[0]));
      } else {
        std::uint64_t rows_out = 0;
        for (const auto& p : e.parts) rows_out += ceil_div(emit::part_shape(p)[0], g);
        s.scale_bytes = rows_out * row_bytes;
        std::byte* buf = own(s.scale_bytes);
        std::uint64_t at = 0;
        for (std::size_t k = 0; k < e.parts.size(); ++k) {
          for (std::uint64_t j = 0; j < ceil_div(emit::part_shape(e.parts[k])[0], g); ++j) {
            std::memcpy(buf + at, ssrcs[k] + (j * g / br) * row_bytes, row_bytes);
            at += row_bytes;
          }
        }
        s.scales = buf;
      }
      s.block_rows = static_cast<std::int32_t>(g);
      s.block_cols = static_cast<std::int32_t>(bc);
    }
    w.slots_.push_back(s);
  }
  // The calibrated KV scales emit put in the packets: the checkpoint must still hold those values.
  for (const auto& k : manifest.kv_scales) {
    for (auto [part, want] : {std::pair{&k.k, k.k_scale}, std::pair{&k.v, k.v_scale}}) {
      MET_TRY(auto ptr, part_bytes(*part, fmt::format("KV scale of layer {}", k.layer)));
      float have = 0;
      std::memcpy(&have, ptr, sizeof have);
      if (std::memcmp(&have, &want, sizeof have) != 0) {
        return fail(fmt::format("{}: KV scale '{}' is {} in the checkpoint, {} in weights.json and the packets; the "
                                "checkpoint changed since emit",
                                checkpoint_dir, part->tensor, have, want));
      }
    }
  }
  return w;
}

Expected<MetHostWeight> LoadedWeights::host_weight(std::size_t e) const {
  const emit::WeightEntry& m = manifest_.tensors.at(e);
  MetHostWeight h{};
  if (m.dtype == "bf16") h.format = MET_WEIGHT_BF16;
  else if (m.dtype == "fp8-e4m3") h.format = MET_WEIGHT_FP8_E4M3;
  else if (m.dtype == "mxfp4") h.format = MET_WEIGHT_MXFP4;
  else return fail(fmt::format("weight '{}': {} has no cpu weight view (bf16, fp8-e4m3, mxfp4)", m.name, m.dtype));
  if (h.format == MET_WEIGHT_MXFP4) {  // blocks [experts, rows, cols / 32, 16]: rows of every expert stacked
    h.rows = static_cast<std::int64_t>(m.shape.at(0) * m.shape.at(1));
    h.cols = static_cast<std::int64_t>(m.shape.at(2) * emit::kMxfp4BlockBytes * 2);
    h.data = slots_[e].data;
    h.scales = slots_[e].scales;
    h.tensor_scale = 1.0f;
    return h;
  }
  if (m.shape.size() == 1) {
    h.rows = 1;
    h.cols = static_cast<std::int64_t>(m.shape[0]);
  } else {  // rows: every dimension but the last (a tensor over every expert: each expert's rows stacked)
    std::uint64_t rows = 1;
    for (std::size_t k = 0; k + 1 < m.shape.size(); ++k) rows *= m.shape[k];
    h.rows = static_cast<std::int64_t>(rows);
    h.cols = static_cast<std::int64_t>(m.shape.back());
  }
  h.data = slots_[e].data;
  h.scales = slots_[e].scales;
  h.block_rows = slots_[e].block_rows;
  h.block_cols = slots_[e].block_cols;
  h.tensor_scale = 1.0f;
  h.act_scale = slots_[e].act_scale;
  return h;
}

}  // namespace met::interp
