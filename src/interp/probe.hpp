// The device probe (`met circuit probe`): what the GPU met runs on delivers to met's own kernels:
// streaming read bandwidth, copy bandwidth (a copy kernel and the driver's device-to-device copy,
// bytes read + written) and the bf16 tensor-core rate (wgmma from shared memory, fp32
// accumulate). The kernels are kernels/hopper/probe.cu, built by nvcc and embedded like the
// interpreter. Every timed run's result is checked against a value computed on the host (the sum
// of every word read, every element of the product), so a wrong kernel is an error, not a figure.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/expected.hpp"
#include "interp/cuda_backend.hpp"

namespace met::interp {

// The probe kernels' cubin embedded at build time (empty when nvcc was absent).
InterpImage probe_image();

struct ProbeOptions {
  std::uint64_t read_bytes = 8ull << 30;  // the streamed buffer, far beyond L2; copies move half of it
  int warmup = 3;
  int repeats = 20;
  int mma_iters = 8192;  // loop iterations of the tensor-core kernel per timed launch (4 wgmma each)
};

// Runs every test on device 0 and returns the record (schema met-probe/1): the device as the
// driver reports it, the options, per test its samples and median, p10, p90 and min, and the
// figures (read_gbs, copy_gbs, bf16_tflops: the best variant of each). Fails, naming the call or
// the check, when there is no driver or GPU, the GPU is not sm_90, memory is short, or a result is
// wrong.
Expected<nlohmann::json> run_probe(const ProbeOptions& options);

// What the record says about the device and its figures, checked: a file another run wrote is
// read through this (schema, types, positive figures), with `where` naming it in errors.
struct ProbeRecord {
  std::string device;  // the driver's name: "NVIDIA H200"
  int sm_count = 0;
  int compute_major = 0, compute_minor = 0;
  double memory_bytes = 0;  // cuDeviceTotalMem
  std::string stamp;        // UTC, "20261201T101500Z"
  std::string command;      // how it was measured
  double read_gbs = 0, copy_gbs = 0, bf16_tflops = 0;
};
Expected<ProbeRecord> read_probe_record(const nlohmann::json& j, const std::string& where);

// The tables people read: one row per test, then the figures.
std::string probe_markdown(const nlohmann::json& j);

// What the read kernels must sum to over the 32-bit words [first_word, end_word) of the filled
// buffer (word w holds w mod 2^32), mod 2^64: how every read run is checked.
std::uint64_t probe_filled_sum(std::uint64_t first_word, std::uint64_t end_word);

}  // namespace met::interp
