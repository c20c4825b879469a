// The backend factory (src/interp/backend_factory.cpp): every command gets its backend by name from
// one table; an unknown name is refused with the list of the known ones, and a known backend that
// cannot take the assets says why.
#include <doctest/doctest.h>

#include "interp/assets.hpp"
#include "interp/backend_factory.hpp"
#include "tiny_model.hpp"

namespace {

using namespace met;

interp::Assets tiny_assets(const std::string& device, const std::string& name) {
  const auto ckpt = testing::tiny_checkpoint(name, testing::tiny_llama_config(1, /*hidden=*/device == "host-cpu" ? 64 : 128));
  testing::EmitSpec spec;
  spec.device = device;
  if (device != "host-cpu") spec.buckets = {128};  // a GPU class's prefill runs GEMMs, over more rows than a decode
  spec.max_ctx = 256;
  auto a = interp::load_assets(testing::write_assets(ckpt, spec, name + "-assets").string());
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  return std::move(*a);
}

}  // namespace

TEST_CASE("the known backends are cpu, cuda and cpu-oracle; an unknown name is refused listing them") {
  CHECK(interp::backend_names() == std::vector<std::string>{"cpu", "cuda", "cpu-oracle"});
  for (const auto& n : interp::backend_names()) CHECK(interp::check_backend_name(n).ok());
  auto bad = interp::check_backend_name("tpu");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "--backend 'tpu': expected cpu, cuda or cpu-oracle");
  const auto assets = tiny_assets("host-cpu", "factory-unknown");
  auto made = interp::make_backend("cpu-oracl", assets);
  REQUIRE_FALSE(made.ok());
  CHECK(made.error().message == "--backend 'cpu-oracl': expected cpu, cuda or cpu-oracle");
}

TEST_CASE("cpu runs its own class only; cpu-oracle runs a GPU class's packets on the cpu bodies") {
  const auto host = tiny_assets("host-cpu", "factory-host");
  auto cpu = interp::make_backend("cpu", host);
  REQUIRE_MESSAGE(cpu.ok(), (cpu.ok() ? "" : cpu.error().message));
  CHECK((*cpu)->name() == "cpu");
  const auto gpu = tiny_assets("h200-sxm", "factory-gpu");
  auto refused = interp::make_backend("cpu", gpu);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("hopper") != std::string::npos);
  auto oracle = interp::make_backend("cpu-oracle", gpu);
  REQUIRE_MESSAGE(oracle.ok(), (oracle.ok() ? "" : oracle.error().message));
}

TEST_CASE("the cpu backend's thread count passes through: one other than the emit's is refused") {
  const auto host = tiny_assets("host-cpu", "factory-threads");
  auto b = interp::make_backend("cpu", host, {.threads = 3, .fetch_logits = true});
  REQUIRE_FALSE(b.ok());
  CHECK(b.error().message.find("with 3 threads") != std::string::npos);
}
