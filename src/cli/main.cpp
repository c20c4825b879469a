// met: plan, emit, run and serve LLM inference on GPUs. This file only parses arguments (CLI11)
// and hands each subcommand to src/cli/circuit.cpp.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

#include "cli/circuit.hpp"
#include "cli/commands.hpp"
#include "cli/completion.hpp"
#include "cli/examples.hpp"
#include "cli/embedded_tree.hpp"
#include "cli/typos.hpp"
#include "cli/version.hpp"
#include "tree/disk_tree.hpp"

int main(int argc, char** argv) {
  CLI::App app{"met: plan, emit, run and serve LLM inference on GPUs"};
  app.require_subcommand(1);
  app.add_flag_callback(
      "--version",
      [] {
        std::fputs(met::cli::version_text().c_str(), stdout);
        throw CLI::Success();
      },
      "print the version, git commit, packet ABI and the GPU interpreters compiled in, then exit");
  std::string kernels;
  app.add_option("--kernels", kernels, "read the kernel tree from DIR instead of the one built into met");

  auto* circuit = app.add_subcommand("circuit", "plan model circuits on devices");
  circuit->fallthrough();  // `--kernels DIR` may follow the subcommands
  circuit->require_subcommand(1);
  auto* devices = circuit->add_subcommand("devices", "list the devices of the registry");
  std::string kernels_hw;
  auto* kernels_cmd = circuit->add_subcommand("kernels", "list the kernels a device's class defines, and why any is unavailable");
  kernels_cmd->add_option("--hardware", kernels_hw, "device id")->required();
  kernels_cmd->fallthrough();
  bool kernels_build = false;
  kernels_cmd->add_flag("--build", kernels_build,
                        "print the class build instead (arch, defines, sources) for compiling the class with nvcc");

  met::cli::PlanArgs args;
  args.model = met::cli::kDefaultModel;
  std::string matrix;
  auto* plan = circuit->add_subcommand("plan", "plan a model on a device: kernels, gaps, ports, ceilings, memory fit");
  plan->fallthrough();
  plan->add_option("--hardware", args.hardware, "device id or alias, any case (see `met circuit devices`)");
  auto* model_opt =
      plan->add_option("--model", args.model,
                       "golden instance id, or a Hugging Face id ORG/NAME: a golden instance's checkpoint, a config stored in the "
                       "kernel tree, or (with --hub or HF_ENDPOINT) any model on the Hub")
          ->capture_default_str();
  plan->add_option("--hub", args.hub,
                   "Hub endpoint for --model ORG/NAME (e.g. https://huggingface.co; default: $HF_ENDPOINT, else no network); "
                   "reads config.json, hf_quant_config.json and safetensors headers only, cached under ~/.cache/met/hub; sends $HF_TOKEN");
  plan->add_option("--revision", args.revision, "Hub revision (branch, tag or commit) for --model ORG/NAME; default main");
  auto* ckpt_opt = plan->add_option("--checkpoint", args.checkpoint, "Hugging Face checkpoint directory (config.json, safetensors)");
  model_opt->excludes(ckpt_opt);
  plan->add_option("--precision", args.precision, "recipe | declared");
  plan->add_option("--kv-dtype", args.kv_dtype,
                   "KV cache format: bf16 | fp8 (e4m3, per-tensor scale); default: the checkpoint's declared KV format, "
                   "else its activations'");
  plan->add_option("--mode", args.mode, "decode | batch | prefill | verify (K draft tokens against the cache)")
      ->capture_default_str();
  plan->add_option("--rows", args.rows, "sequences (batch) or prompt tokens (prefill)");
  plan->add_option("--context", args.context, "decode context in tokens (default: the model's serving default)");
  plan->add_option("--tp", args.tp, "tensor-parallel degree: 1, 2, 4, 8")->capture_default_str();
  plan->add_option("--basis", args.basis, "datasheet | measured (figures measured on our own device where the registry has them)")->capture_default_str();
  plan->add_option("--format", args.format, "report | plan | json | html")->capture_default_str();
  plan->add_option("--measured", args.measured,
                   "campaign record (met circuit run --campaign) or directory of them: cases that measured this plan's "
                   "programs are printed beside the ceiling and the prediction (repeatable)");
  plan->add_option("--out", args.out, "write to FILE (atomically) instead of stdout");
  plan->add_flag("--check", args.check, "compare with --out FILE (or the --matrix DIR) instead of writing");
  plan->add_option("--matrix", matrix, "render every golden instance x golden device into DIR");

  std::unique_ptr<met::KernelTree> tree;
  std::optional<met::planner::Library> library;
  bool library_failed = false;
  const met::cli::LibraryFn load = [&]() -> const met::planner::Library* {
    if (library) return &*library;
    if (library_failed) return nullptr;
    if (kernels.empty()) {
      tree = std::make_unique<met::MemTree>(met::cli::embedded_kernel_files(), "kernels/");
    } else {
      tree = std::make_unique<met::DiskTree>(kernels, kernels + "/");
    }
    auto lib = met::planner::load_library(*tree);
    if (!lib) {
      std::fprintf(stderr, "error: %s\n", lib.error().message.c_str());
      library_failed = true;
      return nullptr;
    }
    library = std::move(lib).value();
    return &*library;
  };
  std::vector<met::cli::Command> commands;
  auto* model = app.add_subcommand("model", "make and inspect model checkpoints");
  model->require_subcommand(1);
  met::cli::add_model_commands(*model, commands);
  met::cli::add_packet_commands(*circuit, commands);
  met::cli::add_run_commands(*circuit, load, commands);
  met::cli::add_probe_command(*circuit, load, commands);
  met::cli::add_calibrate_command(*circuit, load, &kernels, commands);
  met::cli::add_serve_command(app, commands);
  met::cli::add_completion_command(app, load, commands);
  met::cli::add_examples(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // An argument CLI11 could not place (a mistyped flag, or a mistyped subcommand that leaves
    // its parent without one) gets the nearest names instead of CLI11's generic message.
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr || dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
      if (const std::string hint = met::cli::explain_unexpected(app); !hint.empty()) {
        std::fputs(hint.c_str(), stderr);
        return static_cast<int>(e.get_exit_code());
      }
    }
    return app.exit(e);
  }

  for (const auto& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  const met::planner::Library* lib = load();
  if (!lib) return 1;
  if (*devices) return met::cli::run_devices(*lib);
  if (*kernels_cmd) return kernels_build ? met::cli::run_class_build(*lib, kernels_hw) : met::cli::run_kernels(*lib, kernels_hw);
  if (!matrix.empty()) {
    if (!args.hardware.empty()) {
      std::fprintf(stderr, "error: --matrix plans every golden device; drop --hardware\n");
      return 1;
    }
    return met::cli::run_matrix(*lib, matrix, args.check, args.basis);
  }
  if (args.hardware.empty()) {
    std::fprintf(stderr, "error: --hardware is required (see `met circuit devices`)\n");
    return 1;
  }
  return met::cli::run_plan(*lib, args);
}
