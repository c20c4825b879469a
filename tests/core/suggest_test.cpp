#include <doctest/doctest.h>

#include "core/suggest.hpp"

using met::edit_distance;
using met::near_names;
using met::suggest;
using V = std::vector<std::string>;

TEST_CASE("edit distance counts a swap of neighbours as one edit and ignores ASCII case") {
  CHECK(edit_distance("hardwre", "hardware") == 1);
  CHECK(edit_distance("hadrware", "hardware") == 1);  // a plain Levenshtein distance would say 2
  CHECK(edit_distance("H200-SXM", "h200-sxm") == 0);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("qwen3-8b", "qwen3-8b") == 0);
}

TEST_CASE("near names: a typo, a prefix and a suffixed name are found; an unrelated name is not") {
  const V devices = {"b200", "h100-sxm", "h200-sxm", "mi355x", "rtx-5090"};
  CHECK(near_names("h2", devices) == V{"h200-sxm"});
  CHECK(near_names("b200-sx", devices) == V{"b200"});
  CHECK(near_names("b200-sxm", devices) == V{"h200-sxm"});  // one edit beats a prefix
  CHECK(near_names("tpu-v5", devices).empty());
  // ties by name: a list that came out in hash order would fail here; farther names are left out
  CHECK(near_names("h300-sxm", devices) == V{"h100-sxm", "h200-sxm"});
  CHECK(near_names("h200-sx", devices) == V{"h200-sxm"});
}

TEST_CASE("suggest names the near candidates first and still lists every one") {
  const V modes = {"batch", "decode", "prefill"};
  CHECK(suggest("decod", modes) == "did you mean 'decode'? (known: batch, decode, prefill)");
  CHECK(suggest("zzz", modes) == "(known: batch, decode, prefill)");
  CHECK(suggest("h200-sx", {"h200", "h200-sxm"}, {"h200-sxm"}) == "did you mean 'h200-sxm'? (known: h200-sxm)");
}
