// Prometheus text exposition: every family has HELP and TYPE lines, histogram buckets are
// cumulative with an le="+Inf" bucket equal to _count, label values are escaped.
#include "serve/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace met::serve {
namespace {

// Latency bucket bounds in seconds: sub-millisecond steps of the cpu interpreter up to minutes.
const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                         0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
const std::vector<double> kItlBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
                                        0.2,   0.3,    0.4,   0.5,  0.75,  1.0,  2.5,   5.0, 10.0};
const std::vector<double> kE2eBounds = {0.01, 0.05, 0.1, 0.3, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0};

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// Shortest text that reads back as the same double (Go's strconv accepts it).
std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  const auto i = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[i];
  sum_ += v;
  ++count_;
}

double Histogram::quantile(double q) const {
  if (count_ == 0) return 0;
  const double rank = q * static_cast<double>(count_);
  std::uint64_t cum = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    const std::uint64_t prev = cum;
    cum += counts_[i];
    if (static_cast<double>(cum) >= rank) {
      if (i == bounds_.size()) return bounds_.empty() ? 0 : bounds_.back();
      const double lo = i == 0 ? 0 : bounds_[i - 1], hi = bounds_[i];
      if (counts_[i] == 0) return hi;
      return lo + (hi - lo) * (rank - static_cast<double>(prev)) / static_cast<double>(counts_[i]);
    }
  }
  return bounds_.empty() ? 0 : bounds_.back();
}

ModelMetrics::ModelMetrics() : ttft(kTtftBounds), itl(kItlBounds), e2e(kE2eBounds) {}

void Metrics::add_model(const std::string& name) {
  std::lock_guard lock(mu_);
  models_.try_emplace(name);
}

ModelMetrics Metrics::snapshot(const std::string& model) const {
  std::lock_guard lock(mu_);
  return models_.at(model);
}

std::string Metrics::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  auto label = [](const std::string& model) { return "model_name=\"" + escape_label(model) + "\""; };
  auto gauge = [&](const char* name, const char* help, auto value) {
    family(name, "gauge", help);
    for (const auto& [m, mm] : models_) out += fmt::format("{}{{{}}} {}\n", name, label(m), value(mm));
  };
  auto counter = [&](const char* name, const char* help, auto value) {
    family(name, "counter", help);
    for (const auto& [m, mm] : models_) out += fmt::format("{}{{{}}} {}\n", name, label(m), value(mm));
  };
  auto histogram = [&](const char* name, const char* help, auto which) {
    family(name, "histogram", help);
    for (const auto& [m, mm] : models_) {
      const Histogram& h = which(mm);
      std::uint64_t cum = 0;
      for (std::size_t i = 0; i < h.counts().size(); ++i) {
        cum += h.counts()[i];
        const std::string le = i < h.bounds().size() ? num(h.bounds()[i]) : "+Inf";
        out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, label(m), le, cum);
      }
      out += fmt::format("{}_sum{{{}}} {}\n", name, label(m), num(h.sum()));
      out += fmt::format("{}_count{{{}}} {}\n", name, label(m), h.count());
    }
  };
  gauge("vllm:num_requests_running", "Number of requests in model execution batches.", [](const ModelMetrics& m) { return m.running; });
  gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", [](const ModelMetrics& m) { return m.waiting; });
  counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", [](const ModelMetrics& m) { return m.prompt_tokens; });
  counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
          [](const ModelMetrics& m) { return m.generation_tokens; });
  family("vllm:request_success_total", "counter", "Count of finished requests by finish reason.");
  for (const auto& [m, mm] : models_)
    for (const char* reason : {"stop", "length", "abort", "error"}) {
      const auto it = mm.finished.find(reason);
      out += fmt::format("vllm:request_success_total{{finished_reason=\"{}\",{}}} {}\n", reason, label(m),
                         it == mm.finished.end() ? 0 : it->second);
    }
  histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
            [](const ModelMetrics& m) -> const Histogram& { return m.ttft; });
  histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
            [](const ModelMetrics& m) -> const Histogram& { return m.itl; });
  histogram("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
            [](const ModelMetrics& m) -> const Histogram& { return m.e2e; });
  return out;
}

}  // namespace met::serve
