#include <doctest/doctest.h>

#include "core/strings.hpp"

using met::split;
using V = std::vector<std::string>;

TEST_CASE("split keeps every piece, empty ones included (list parsers reject them with the piece named)") {
  CHECK(split("1,2,4", ',') == V{"1", "2", "4"});
  CHECK(split("decode_1", ',') == V{"decode_1"});
  CHECK(split("", ',') == V{""});
  CHECK(split("1,,2", ',') == V{"1", "", "2"});
  CHECK(split(",1,", ',') == V{"", "1", ""});
}
