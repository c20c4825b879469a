// Checkpoint sources: DiskCheckpoint over a real temporary directory reads only the header prefix
// of a safetensors file and names files as the user gave the directory; TreeCheckpoint serves an
// instance's config directory from the kernel tree.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "model/instantiate.hpp"
#include "model/safetensors.hpp"
#include "model/safetensors_writer.hpp"
#include "tree/checkpoint_dir.hpp"
#include "tree/disk_tree.hpp"

#include <unistd.h>

using namespace met;
using namespace met::model;
using namespace met::model::testing;

namespace {
std::filesystem::path temp_checkpoint(const std::string& name, const std::map<std::string, std::string>& files) {
  const auto dir = std::filesystem::temp_directory_path() / ("met_model_test_" + std::to_string(::getpid())) / name;
  std::filesystem::create_directories(dir);
  for (const auto& [file, bytes] : files) {
    std::ofstream out(dir / file, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  return dir;
}
}  // namespace

TEST_CASE("DiskCheckpoint: a real directory with config.json and model.safetensors instantiates with declared formats") {
  const TinyDims d;
  const auto dir = temp_checkpoint("Tiny-Llama", {{"config.json", tiny_llama_config(d)},
                                                  {"model.safetensors", safetensors(tiny_llama_tensors(d))}});
  DiskCheckpoint src(dir.string() + "/");
  CHECK(src.name() == "Tiny-Llama");
  CHECK(src.display("config.json") == dir.string() + "/config.json");
  auto prefix = src.read_prefix("model.safetensors", 8);
  REQUIRE(prefix.ok());
  CHECK(prefix->size() == 8);
  auto circuit = load_circuit(DiskTree(std::string(MET_SOURCE_DIR) + "/kernels", "kernels/"), "circuits/dense-gqa.toml");
  REQUIRE(circuit.ok());
  std::map<std::string, Circuit> circuits{{circuit->id, *circuit}};
  MemTree empty;
  auto g = instantiate_checkpoint(empty, circuits, src);
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  CHECK(g->id == "tiny-llama");
  CHECK(g->kinds[0].nodes[1].format_source == "safetensors header");
  std::filesystem::remove_all(dir.parent_path());
}

TEST_CASE("DiskCheckpoint: a missing file is an error naming its path") {
  const auto dir = temp_checkpoint("empty", {});
  DiskCheckpoint src(dir.string());
  CHECK_FALSE(src.exists("config.json"));
  auto r = src.read("config.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.rfind(dir.string() + "/config.json: ", 0) == 0);
  std::filesystem::remove_all(dir.parent_path());
}

TEST_CASE("TreeCheckpoint: an instance directory inside the tree, named by its last component") {
  MemTree tree(std::map<std::string, std::string>{{"circuits/configs/org--Model/config.json", "{}"}});
  TreeCheckpoint src(tree, "circuits/configs/org--Model");
  CHECK(src.name() == "org--Model");
  CHECK(src.exists("config.json"));
  CHECK(src.display("config.json") == "kernels/circuits/configs/org--Model/config.json");
  CHECK(*src.size("config.json") == 2);
}
