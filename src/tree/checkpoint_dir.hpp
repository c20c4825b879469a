// CheckpointSource: how the model layer reads a checkpoint directory (config.json, quantization
// sidecars, safetensors headers) without touching the disk itself; DiskCheckpoint serves a real
// directory and reads only what is asked for (a header prefix, a few bytes of a small tensor such
// as a calibrated KV scale, never the weight matrices).
#pragma once

#include <cstdint>
#include <string>

#include "core/expected.hpp"

namespace met {

class CheckpointSource {
 public:
  virtual ~CheckpointSource();
  virtual std::string name() const = 0;  // directory name: "meta-llama--Llama-3.1-8B-Instruct"
  virtual bool exists(const std::string& file) const = 0;
  virtual Expected<std::string> read(const std::string& file) const = 0;  // small files
  // The first min(n, size) bytes.
  virtual Expected<std::string> read_prefix(const std::string& file, std::uint64_t n) const = 0;
  virtual Expected<std::uint64_t> size(const std::string& file) const = 0;
  virtual std::string display(const std::string& file) const = 0;  // "checkpoints/x/config.json"
  // Bytes [offset, offset + n), all of them or an error. The default reads the prefix up to them.
  virtual Expected<std::string> read_range(const std::string& file, std::uint64_t offset, std::uint64_t n) const;
};

class DiskCheckpoint final : public CheckpointSource {
 public:
  // dir: the directory as the user named it; errors show it as given.
  explicit DiskCheckpoint(std::string dir);
  std::string name() const override;
  bool exists(const std::string& file) const override;
  Expected<std::string> read(const std::string& file) const override;
  Expected<std::string> read_prefix(const std::string& file, std::uint64_t n) const override;
  Expected<std::uint64_t> size(const std::string& file) const override;
  std::string display(const std::string& file) const override;
  Expected<std::string> read_range(const std::string& file, std::uint64_t offset, std::uint64_t n) const override;

 private:
  std::string dir_;
};

}  // namespace met
