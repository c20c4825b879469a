#include <doctest/doctest.h>

#include "core/numfmt.hpp"

TEST_CASE("fmt_exact round-trips and prints -0 as 0 (catches locale- or printf-dependent output)") {
  CHECK(met::fmt_exact(0.1) == "0.1");
  CHECK(met::fmt_exact(-0.0) == "0");
  CHECK(met::fmt_exact(16060522496.0) == "16060522496");
  CHECK(met::fmt_exact(1.0 / 3.0) == "0.3333333333333333");
}

TEST_CASE("fmt_fixed and fmt_bytes use decimal units") {
  CHECK(met::fmt_fixed(16.0605, 2) == "16.06");
  CHECK(met::fmt_fixed(-0.0001, 2) == "0.00");
  CHECK(met::fmt_bytes(16.06e9) == "16.06 GB");
  CHECK(met::fmt_bytes(512) == "512 B");
  CHECK(met::fmt_sig(4.2512, 3) == "4.25");
  CHECK(met::fmt_sig(0.013149, 3) == "0.0131");
}
