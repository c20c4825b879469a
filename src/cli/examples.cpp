#include "cli/examples.hpp"

#include <map>
#include <string>
#include <vector>

namespace met::cli {

namespace {

// Subcommand path -> examples, each a command a newcomer can paste (tests/cli/help_examples.sh
// runs every one that needs no checkpoint, assets or network).
const std::map<std::string, std::vector<std::string>>& examples() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"", {"met --version", "met circuit plan --hardware h200 --model Qwen/Qwen3-8B", "source <(met completion bash)"}},
      {"circuit", {"met circuit devices", "met circuit plan --hardware h200-sxm --model qwen3-8b"}},
      {"circuit devices", {"met circuit devices"}},
      {"circuit kernels", {"met circuit kernels --hardware h200", "met circuit kernels --hardware mi355 --build"}},
      {"circuit plan",
       {"met circuit plan --hardware h200 --model Qwen/Qwen3-8B",
        "met circuit plan --hardware b200 --model llama-3.1-70b-instruct --mode prefill --rows 4096 --tp 2",
        "met circuit plan --hardware h100 --model mistralai/Mistral-7B-Instruct-v0.3 --format json --out plan.json",
        "HF_TOKEN=... met circuit plan --hardware h200 --model meta-llama/Llama-3.3-70B-Instruct --hub https://huggingface.co"}},
      {"circuit emit",
       {"met model synth --config kernels/circuits/configs/Qwen--Qwen3-0.6B/config.json --seed 1 --out ckpt",
        "met circuit emit --hardware host-cpu --checkpoint ckpt --out assets --threads 2 --max-ctx 512"}},
      {"circuit run",
       {"met circuit run --assets assets --prompt-ids 1,2,3 --max-tokens 8",
        "met circuit run --assets assets --backend cuda --campaign decode:1,8,32"}},
      {"circuit optest",
       {"met circuit optest --assets assets --backend cuda", "met circuit optest --assets assets --backend cpu --filter gemv"}},
      {"circuit probe",
       {"met circuit probe --hardware h200 --json probe.json",
        "met circuit probe --from-json perf-data/h200-sxm/probe/20261201T101500Z.json --hardware h200 --update-devices kernels/DEVICES.toml"}},
      {"circuit calibrate",
       {"met circuit calibrate perf-data/h200-sxm --configs bench/configs --hardware h200-sxm --held-out",
        "met circuit calibrate perf-data/h200-sxm --configs bench/configs --hardware h200-sxm --update"}},
      {"circuit disasm", {"met circuit disasm assets --program decode_1"}},
      {"circuit verify", {"met circuit verify assets"}},
      {"circuit abi", {"met circuit abi", "met circuit abi --update docs/arch/packet-abi.md"}},
      {"model", {"met model synth --config kernels/circuits/configs/Qwen--Qwen3-0.6B/config.json --seed 1 --out ckpt"}},
      {"model synth",
       {"met model synth --config kernels/circuits/configs/Qwen--Qwen3-0.6B/config.json --seed 1 --out ckpt",
        "met model synth --config kernels/circuits/configs/Qwen--Qwen3-8B/config.json --seed 7 --dtype fp8-e4m3 --out ckpt-fp8"}},
      {"serve",
       {"met serve --assets assets --port 8000", "met serve --assets assets --backend cuda --host 0.0.0.0 --api-key SECRET"}},
      {"completion", {"source <(met completion bash)", "met completion fish | source", "met completion zsh > ~/.zfunc/_met"}},
  };
  return table;
}

void visit(CLI::App* app, const std::string& path) {
  const auto& table = examples();
  if (auto it = table.find(path); it != table.end()) {
    std::string footer = "\nExamples:\n";
    for (const auto& e : it->second) footer += "  " + e + "\n";
    app->footer(footer);
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    visit(sub, path.empty() ? sub->get_name() : path + " " + sub->get_name());
  }
}

}  // namespace

void add_examples(CLI::App& app) { visit(&app, ""); }

}  // namespace met::cli
