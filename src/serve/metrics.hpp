// Serving metrics under vLLM's names (vllm:time_to_first_token_seconds, ...), one series per
// model_name label, rendered as Prometheus text exposition (version 0.0.4). Thread-safe: the
// engines record, the /metrics handler renders.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace met::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<std::uint64_t>& counts() const { return counts_; }  // per bucket, not cumulative
  double sum() const { return sum_; }
  std::uint64_t count() const { return count_; }
  // The q-quantile (0..1) estimated from the buckets as Prometheus' histogram_quantile does.
  double quantile(double q) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // bounds_.size() + 1 (the last is +Inf)
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

struct ModelMetrics {
  Histogram ttft, itl, e2e;
  std::int64_t running = 0, waiting = 0;
  std::uint64_t prompt_tokens = 0, generation_tokens = 0;
  std::map<std::string, std::uint64_t> finished;  // by finish reason: stop, length, abort, error
  ModelMetrics();
};

class Metrics {
 public:
  void add_model(const std::string& name);
  // fn runs under the lock with the model's metrics.
  template <class F>
  void update(const std::string& model, F&& fn) {
    std::lock_guard lock(mu_);
    fn(models_.at(model));
  }
  ModelMetrics snapshot(const std::string& model) const;
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, ModelMetrics> models_;
};

}  // namespace met::serve
