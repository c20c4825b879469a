#include <doctest/doctest.h>

#include "core/digest.hpp"
#include "core/format.hpp"

TEST_CASE("sha256 matches the FIPS 180-2 test vector (catches a wrong digest routine)") {
  CHECK(met::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("format bytes count block scales (catches mxfp4 priced as a bare 4-bit format)") {
  CHECK(met::format_bytes(met::Format::mxfp4) == doctest::Approx(0.53125));
  CHECK(met::format_bytes(met::Format::nvfp4) == doctest::Approx(0.5625));
  for (auto name : met::format_names()) CHECK(met::format_name(*met::parse_format(name)) == name);
  CHECK_FALSE(met::parse_format("fp8"));
}
