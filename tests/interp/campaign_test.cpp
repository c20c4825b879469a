// Campaign specs as `met circuit run --campaign` takes them: kinds, row lists, the decode context.
#include <doctest/doctest.h>

#include "interp/campaign.hpp"

using met::interp::parse_campaign;

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
