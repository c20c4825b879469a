// Metrics (src/serve/metrics.cpp): histogram buckets are cumulative in the exposition with +Inf equal
// to _count, every family has HELP and TYPE, the model_name label is escaped. promtool checks the
// live text end to end (tests/serve/server_test.sh promtool).
#include <doctest/doctest.h>

#include "serve/metrics.hpp"

using met::serve::Histogram;
using met::serve::Metrics;

TEST_CASE("a histogram counts each value in the first bucket whose bound holds it (le is inclusive)") {
  Histogram h({1.0, 2.0});
  h.observe(1.0);
  h.observe(1.5);
  h.observe(5.0);
  CHECK(h.counts() == std::vector<std::uint64_t>{1, 1, 1});
  CHECK(h.count() == 3);
  CHECK(h.sum() == doctest::Approx(7.5));
  CHECK(h.quantile(0.5) == doctest::Approx(1.5));
}

TEST_CASE("the exposition is cumulative, ends buckets with +Inf = _count, and escapes the model label") {
  Metrics m;
  m.add_model("a\"b");
  m.update("a\"b", [](met::serve::ModelMetrics& mm) {
    mm.ttft.observe(0.003);
    mm.ttft.observe(100.0);
    mm.running = 2;
    mm.prompt_tokens = 11;
  });
  const std::string t = m.render();
  CHECK(t.find("# TYPE vllm:time_to_first_token_seconds histogram\n") != std::string::npos);
  CHECK(t.find("vllm:time_to_first_token_seconds_bucket{model_name=\"a\\\"b\",le=\"0.001\"} 0\n") != std::string::npos);
  CHECK(t.find("vllm:time_to_first_token_seconds_bucket{model_name=\"a\\\"b\",le=\"0.005\"} 1\n") != std::string::npos);
  CHECK(t.find("vllm:time_to_first_token_seconds_bucket{model_name=\"a\\\"b\",le=\"80\"} 1\n") != std::string::npos);
  CHECK(t.find("vllm:time_to_first_token_seconds_bucket{model_name=\"a\\\"b\",le=\"+Inf\"} 2\n") != std::string::npos);
  CHECK(t.find("vllm:time_to_first_token_seconds_count{model_name=\"a\\\"b\"} 2\n") != std::string::npos);
  CHECK(t.find("vllm:num_requests_running{model_name=\"a\\\"b\"} 2\n") != std::string::npos);
  CHECK(t.find("# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{model_name=\"a\\\"b\"} 11\n") != std::string::npos);
  for (const char* name : {"vllm:num_requests_waiting", "vllm:generation_tokens_total", "vllm:inter_token_latency_seconds",
                           "vllm:e2e_request_latency_seconds"})
    CHECK_MESSAGE(t.find(std::string("# HELP ") + name + " ") != std::string::npos, name);
}
