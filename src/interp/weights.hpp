// LoadedWeights: the checkpoint bytes behind a weights.json, mapped read-only. Loading checks every
// part against the safetensors header it names (dtype, shape, offset, bytes), so a checkpoint that
// changed since emit is refused, not misread. A one-part entry is used in place; a fused entry
// (q/k/v, gate/up) is concatenated once into owned memory, its block scales stacked to match; a
// tensor-parallel rank's window of a tensor (emit --tp) is copied out once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/quant.hpp"
#include "core/expected.hpp"
#include "emit/weights_manifest.hpp"

namespace met::interp {

class LoadedWeights {
 public:
  // checkpoint_dir: the directory as the user named it (errors show paths under it).
  static Expected<LoadedWeights> load(const emit::WeightsManifest& manifest, const std::string& checkpoint_dir);

  LoadedWeights(LoadedWeights&&) noexcept;
  LoadedWeights& operator=(LoadedWeights&&) noexcept;
  LoadedWeights(const LoadedWeights&) = delete;
  LoadedWeights& operator=(const LoadedWeights&) = delete;
  ~LoadedWeights();

  std::size_t size() const { return slots_.size(); }
  const emit::WeightEntry& entry(std::size_t e) const { return manifest_.tensors[e]; }
  std::optional<std::size_t> find(const std::string& name) const;

  // Contiguous bytes of the stacked entry, aligned to its element size.
  const std::byte* data(std::size_t e) const { return slots_[e].data; }
  std::uint64_t bytes(std::size_t e) const { return slots_[e].bytes; }
  // F32 block scales [ceil(rows / block_rows), ceil(cols / block_cols)] (nullptr without scales);
  // per-tensor scales come as one per row (block 1 x cols).
  const std::byte* scales(std::size_t e) const { return slots_[e].scales; }
  std::uint64_t scale_bytes(std::size_t e) const { return slots_[e].scale_bytes; }
  // Scale block of the stacked entry: the checkpoint's block, or finer rows when fused parts do not
  // start on a block boundary (each finer row repeats its checkpoint block's scale).
  std::int32_t block_rows(std::size_t e) const { return slots_[e].block_rows; }
  std::int32_t block_cols(std::size_t e) const { return slots_[e].block_cols; }

  // The view the cpu op bodies read (kernels/cpu/quant.hpp): rows = shape[0], cols = the product
  // of the other dims; a 1-d weight (norm) is one row. Errors for formats MetHostWeight lacks.
  Expected<MetHostWeight> host_weight(std::size_t e) const;

  // Bytes mapped from the checkpoint and bytes copied into owned memory (for reports).
  std::uint64_t mapped_bytes() const;
  std::uint64_t owned_bytes() const;

 private:
  struct Mapping;
  struct Slot {
    const std::byte* data = nullptr;
    std::uint64_t bytes = 0;
    const std::byte* scales = nullptr;
    std::uint64_t scale_bytes = 0;
    std::int32_t block_rows = 0, block_cols = 0;
    float act_scale = 0;  // static per-tensor activation scale (W8A8), 0 without
  };
  LoadedWeights();

  emit::WeightsManifest manifest_;
  std::vector<std::unique_ptr<Mapping>> maps_;
  std::vector<std::unique_ptr<std::byte[]>> owned_;
  std::uint64_t owned_bytes_ = 0;
  std::vector<Slot> slots_;
};

}  // namespace met::interp
