// Campaign specs as `met circuit run --campaign` takes them: kinds, row lists, the decode context;
// and the Markdown of a campaign record (its tensor-parallel table).
#include <doctest/doctest.h>

#include "interp/campaign.hpp"

using met::interp::parse_campaign;
namespace interp = met::interp;

TEST_CASE("decode and prefill specs give one case per row count; decode's context defaults to 4096") {
  auto d = parse_campaign("decode:1,2,16@ctx=8192");
  REQUIRE(d.ok());
  REQUIRE(d->size() == 3);
  CHECK((*d)[2].kind == "decode");
  CHECK((*d)[2].rows == 16);
  CHECK((*d)[2].ctx == 8192);
  auto d0 = parse_campaign("decode:4");
  REQUIRE(d0.ok());
  CHECK((*d0)[0].ctx == 4096);
  auto p = parse_campaign("prefill:128,4096");
  REQUIRE(p.ok());
  CHECK((*p)[1].kind == "prefill");
  CHECK((*p)[1].rows == 4096);
}

TEST_CASE("bad campaign specs are refused naming the part that is wrong") {
  auto err = [](const char* spec) {
    auto r = parse_campaign(spec);
    REQUIRE_MESSAGE(!r.ok(), spec);
    return r.error().message;
  };
  CHECK(err("decode") == "--campaign 'decode': expected decode:C,..[@ctx=N] or prefill:T,..");
  CHECK(err("sideways:1") == "--campaign 'sideways:1': kind 'sideways' is not decode or prefill");
  CHECK(err("decode:1,,2") == "--campaign 'decode:1,,2': '' is not a positive integer");
  CHECK(err("decode:0") == "--campaign 'decode:0': '0' is not a positive integer");
  CHECK(err("prefill:128@ctx=4") == "--campaign 'prefill:128@ctx=4': only decode takes @ctx=N");
  CHECK(err("decode:1@ctx=1,2") == "--campaign 'decode:1@ctx=1,2': one context per decode campaign");
}

namespace {
// One decode case of a campaign record, as run_campaign writes it, with no kernel walls.
nlohmann::json decode_case() {
  nlohmann::json c;
  c["kind"] = "decode";
  c["rows"] = 1;
  c["ctx"] = 4096;
  c["program"] = "decode_1";
  c["ms"] = {{"median", 5.0}, {"p10", 4.9}, {"p90", 5.1}, {"min", 4.8}};
  c["ceiling_ms"] = 4.0;
  c["ceiling_share"] = 0.8;
  c["tokens_per_s"] = 200.0;
  c["family_ms"] = nlohmann::json::object();
  c["kernel_ms"] = nlohmann::json::object();
  c["kernel_slice_mean_ms"] = nlohmann::json::object();
  c["kernel_start_spread_ms"] = nlohmann::json::object();
  return c;
}
nlohmann::json campaign_of(const nlohmann::json& c) {
  nlohmann::json j;
  j["device"] = "NVIDIA H200";
  j["assets"] = "a";
  j["target"] = {{"class", "hopper"}, {"sm_count", 132}};
  j["cases"] = nlohmann::json::array({c});
  return j;
}
}  // namespace

TEST_CASE(
    "a TP campaign's Markdown lists every rank's step and collective walls, and a one-rank campaign has no such table "
    "(a rendering that drops a rank, swaps its numbers or tables a one-rank run fails)") {
  nlohmann::json j = campaign_of(decode_case());
  nlohmann::json c = j["cases"][0];
  const std::string one = interp::campaign_markdown(j);
  CHECK(one.find("Tensor-parallel ranks") == std::string::npos);
  c["rank_ms"] = {{{"median", 4.5}, {"p10", 4.4}, {"p90", 4.6}, {"min", 4.3}},
                  {{"median", 5.0}, {"p10", 4.9}, {"p90", 5.1}, {"min", 4.8}}};
  c["collective_ms"] = {1.25, 0.75};
  j["tp_ranks"] = 2;
  j["cases"][0] = c;
  const std::string two = interp::campaign_markdown(j);
  CHECK(two.find("Tensor-parallel ranks (ms)") != std::string::npos);
  CHECK(two.find("| decode C=1 ctx=4096 | 0 | 4.500 | 4.400 | 4.600 | 1.250 |\n") != std::string::npos);
  CHECK(two.find("| decode C=1 ctx=4096 | 1 | 5.000 | 4.900 | 5.100 | 0.750 |\n") != std::string::npos);
}

TEST_CASE(
    "a campaign's Markdown splits the walls of a kernel found in more than one kind of scope (sliding and full layers) "
    "by kind, and lists no kernel that sits in one kind (a table that drops a kind, swaps the numbers or lists every "
    "kernel fails)") {
  nlohmann::json c = decode_case();
  c["kernel_ms"] = {{"attn_decode_split_merge", 1.5}, {"gemv", 3.0}};
  c["kernel_scope_ms"] = {{"attn_decode_split_merge", {{"layers:full", 1.25}, {"layers:sliding", 0.25}}},
                          {"gemv", {{"layers:full", 3.0}}}};
  nlohmann::json j = campaign_of(c);
  const std::string md = interp::campaign_markdown(j);
  CHECK(md.find("| `decode_1` | attn_decode_split_merge | layers:full 1.250, layers:sliding 0.250 |\n") != std::string::npos);
  CHECK(md.find("| `decode_1` | gemv | layers:full") == std::string::npos);
  j["cases"][0]["kernel_scope_ms"]["attn_decode_split_merge"] = {{"layers:full", 1.5}};
  CHECK(interp::campaign_markdown(j).find("by the kind of scope") == std::string::npos);
}
