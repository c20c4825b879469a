// Safetensors headers written as real bytes in memory; each corruption a reader must refuse is one
// named case with its message checked. Only headers are read: the data bytes are never asked for.
#include <doctest/doctest.h>

#include "model/safetensors.hpp"
#include "model/safetensors_writer.hpp"

using namespace met;
using namespace met::model;
using namespace met::model::testing;

namespace {
std::string header_error(const std::string& file_bytes) {
  MemCheckpoint src("ck", {{"model.safetensors", file_bytes}});
  auto h = read_safetensors_header(src, "model.safetensors");
  return h ? std::string("no error") : h.error().message;
}
const char* kPath = "checkpoints/ck/model.safetensors";
}  // namespace

TEST_CASE("a well-formed file parses: metadata, dtype, shape, offsets") {
  MemCheckpoint src("ck", {{"model.safetensors", safetensors({{"a", "BF16", {2, 3}}, {"b", "F8_E4M3", {4}}})}});
  auto h = read_safetensors_header(src, "model.safetensors");
  REQUIRE_MESSAGE(h.ok(), h.error().message);
  CHECK(h->metadata.at("format") == "pt");
  CHECK(h->tensors.at("a").shape == std::vector<std::uint64_t>{2, 3});
  CHECK(h->tensors.at("a").end == 12);
  CHECK(h->tensors.at("b").begin == 12);
  CHECK(h->tensors.at("b").dtype == "F8_E4M3");
}

TEST_CASE("truncated header: the file ends inside the 8-byte length") {
  CHECK(header_error(std::string("\x10\x00\x00", 3)) == std::string(kPath) + ": 3 bytes is too short for the 8-byte header length");
}

TEST_CASE("length past end: the declared header length exceeds the file") {
  const std::string file = le64(1'000'000'000'000ULL) + "{}";
  CHECK(header_error(file) == std::string(kPath) + ": header length 1000000000000 exceeds file size 10");
}

TEST_CASE("truncated json: the header bytes stop mid-object") {
  const std::string header = R"({"a": {"dtype": "BF16", "shape": [2], "data_of)";
  CHECK(header_error(safetensors_file(header, 4)).rfind(std::string(kPath) + ": invalid json:", 0) == 0);
}

TEST_CASE("the header must be a json object") {
  CHECK(header_error(safetensors_file("[1, 2]", 0)) == std::string(kPath) + ": header is an array, expected a json object");
}

TEST_CASE("lying shape: the shape disagrees with the byte size of data_offsets") {
  const std::string header = R"({"w": {"dtype": "BF16", "shape": [4, 4], "data_offsets": [0, 30]}})";
  CHECK(header_error(safetensors_file(header, 32)) ==
        std::string(kPath) + ": tensor 'w': shape [4, 4] of BF16 needs 32 bytes, data_offsets hold 30");
}

TEST_CASE("overlapping offsets: two tensors share bytes") {
  const std::string header = R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
                                  "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}})";
  CHECK(header_error(safetensors_file(header, 12)) ==
        std::string(kPath) + ": tensors 'a' [0, 8] and 'b' [4, 12] overlap");
}

TEST_CASE("offsets out of bounds: a tensor ends past the data") {
  const std::string header = R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}})";
  CHECK(header_error(safetensors_file(header, 4)) ==
        std::string(kPath) + ": tensor 'a': data_offsets end 8 is past the 4 data bytes of the file");
}

TEST_CASE("offsets reversed: end before begin") {
  const std::string header = R"({"a": {"dtype": "U8", "shape": [0], "data_offsets": [4, 0]}})";
  CHECK(header_error(safetensors_file(header, 4)) == std::string(kPath) + ": tensor 'a': data_offsets [4, 0] end before begin");
}

TEST_CASE("unknown dtype: refused with the known ones") {
  const std::string header = R"({"a": {"dtype": "Q4_K", "shape": [2], "data_offsets": [0, 2]}})";
  CHECK(header_error(safetensors_file(header, 2)).rfind(
            std::string(kPath) + ": tensor 'a': unknown dtype 'Q4_K' (known: BOOL, U8, I8, F8_E4M3, F8_E5M2, F8_E8M0,", 0) == 0);
}

TEST_CASE("an unknown key in a tensor entry is refused") {
  const std::string header = R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2], "strides": [1]}})";
  CHECK(header_error(safetensors_file(header, 2)) == std::string(kPath) + ": tensor 'a': unknown key 'strides'");
}

TEST_CASE("a shape whose element count overflows 64 bits is refused, not wrapped") {
  const std::string header =
      R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 0]}})";
  CHECK(header_error(safetensors_file(header, 0)).find("needs more than 2^64 bytes") != std::string::npos);
}

TEST_CASE("missing shard: the index names a file the directory lacks") {
  nlohmann::json index = {{"weight_map", {{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}}}};
  MemCheckpoint src("ck", {{"model.safetensors.index.json", index.dump()},
                           {"model-00001-of-00002.safetensors", safetensors({{"a", "U8", {2}}})}});
  auto t = read_checkpoint_tensors(src);
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message == "checkpoints/ck/model-00002-of-00002.safetensors: missing shard "
                             "'model-00002-of-00002.safetensors' named by model.safetensors.index.json");
}

TEST_CASE("a shard that lacks a tensor its index places there is refused") {
  nlohmann::json index = {{"weight_map", {{"a", "s1.safetensors"}, {"b", "s1.safetensors"}}}};
  MemCheckpoint src("ck", {{"model.safetensors.index.json", index.dump()}, {"s1.safetensors", safetensors({{"a", "U8", {2}}})}});
  auto t = read_checkpoint_tensors(src);
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message ==
        "checkpoints/ck/s1.safetensors: tensor 'b' named by model.safetensors.index.json is not in this shard");
}

TEST_CASE("an index entry that escapes the directory is refused") {
  nlohmann::json index = {{"weight_map", {{"a", "../x.safetensors"}}}};
  MemCheckpoint src("ck", {{"model.safetensors.index.json", index.dump()}});
  auto t = read_checkpoint_tensors(src);
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message.find("not a file of this directory") != std::string::npos);
}

TEST_CASE("a directory without safetensors has no headers (not an error)") {
  MemCheckpoint src("ck", {{"config.json", "{}"}});
  auto t = read_checkpoint_tensors(src);
  REQUIRE(t.ok());
  CHECK_FALSE(t->has_value());
}
