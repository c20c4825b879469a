// INSTANCES.toml: the shipped instances load; unknown formats, keys and config dirs are refused.
#include <doctest/doctest.h>

#include "model/instance.hpp"
#include "tree/disk_tree.hpp"

using namespace met;
using namespace met::model;

namespace {
std::string load_error(const std::string& text) {
  MemTree tree({{"circuits/INSTANCES.toml", text}, {"circuits/configs/x/config.json", "{}"}});
  auto r = load_instances(tree);
  return r ? std::string("no error") : r.error().message;
}
const char* kGood = "[[instance]]\nid = \"x\"\nconfig = \"circuits/configs/x\"\nweights = { default = \"bf16\" }\nkv = \"bf16\"\n";
}  // namespace

TEST_CASE("the shipped instances load with their recipe formats") {
  DiskTree tree(std::string(MET_SOURCE_DIR) + "/kernels", "kernels/");
  auto all = load_instances(tree);
  REQUIRE_MESSAGE(all.ok(), all.error().message);
  REQUIRE(all->count("llama-3.1-8b-instruct") == 1);
  const auto& l = all->at("llama-3.1-8b-instruct");
  CHECK(l.config_dir == "circuits/configs/meta-llama--Llama-3.1-8B-Instruct");
  CHECK(l.weights.at("default") == Format::bf16);
  CHECK(l.context == 4096);
  CHECK(all->count("qwen3-8b") == 1);
}

TEST_CASE("a minimal instance loads; context defaults to 4096") {
  CHECK(load_error(kGood) == "no error");
}

TEST_CASE("an unknown weight format is refused with the known ones") {
  std::string t = kGood;
  t.replace(t.find("default = \"bf16\""), 16, "default = \"fp9\"");
  CHECK(load_error(t).find("instance 'x' weights: 'default': unknown format 'fp9' (known: f32, bf16,") != std::string::npos);
}

TEST_CASE("a config directory without config.json is refused") {
  std::string t = kGood;
  t.replace(t.find("configs/x"), 9, "configs/y");
  CHECK(load_error(t).find("'config': no kernels/circuits/configs/y/config.json") != std::string::npos);
}

TEST_CASE("an unknown key, a missing default format and a duplicate id are refused") {
  CHECK(load_error(std::string(kGood) + "batch = 4\n").find("'batch': unknown key") != std::string::npos);
  std::string nodef = kGood;
  nodef.replace(nodef.find("default = \"bf16\""), 16, "o = \"bf16\"");
  CHECK(load_error(nodef).find("'weights': missing 'default'") != std::string::npos);
  CHECK(load_error(std::string(kGood) + kGood).find("duplicate instance id 'x'") != std::string::npos);
}
