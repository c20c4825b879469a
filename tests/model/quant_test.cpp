// Quantization exclusion patterns as the producers write them: module prefixes (fp8, mxfp4) and
// globs (modelopt, compressed-tensors), matched on dotted boundaries only.
#include <doctest/doctest.h>

#include "model/quant.hpp"

using namespace met::model;

TEST_CASE("a module prefix excludes its tensors, but not a sibling whose index merely starts the same") {
  const std::vector<std::string> ex{"model.layers.1.mlp"};
  CHECK(excluded(ex, "model.layers.1.mlp.down_proj.weight"));
  CHECK_FALSE(excluded(ex, "model.layers.10.mlp.down_proj.weight"));
  CHECK_FALSE(excluded(ex, "model.layers.1.mlpx.weight"));
}

TEST_CASE("globs: gpt-oss '*' layer wildcards and modelopt trailing stars") {
  CHECK(excluded({"model.layers.*.self_attn"}, "model.layers.7.self_attn.q_proj.weight"));
  CHECK_FALSE(excluded({"model.layers.*.self_attn"}, "model.layers.7.mlp.experts.gate_up_proj_blocks"));
  CHECK(excluded({"model.language_model.layers.0.mlp*"}, "model.language_model.layers.0.mlp.down_proj.weight"));
  CHECK(excluded({"lm_head"}, "lm_head.weight"));
}
