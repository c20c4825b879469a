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

TEST_CASE(
    "a TP campaign's Markdown lists every rank's step and collective walls, and a one-rank campaign has no such table "
    "(a rendering that drops a rank, swaps its numbers or tables a one-rank run fails)") {
  nlohmann::json j;
  j["device"] = "NVIDIA H200";
  j["assets"] = "a";
  j["target"] = {{"class", "hopper"}, {"sm_count", 132}};
  j["cases"] = nlohmann::json::array();
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
  j["cases"].push_back(c);
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
