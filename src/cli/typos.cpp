#include "cli/typos.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/suggest.hpp"

namespace met::cli {

namespace {

// The innermost subcommand CLI11 entered, and the chain of apps from the root to it.
std::vector<CLI::App*> parsed_chain(CLI::App& app) {
  std::vector<CLI::App*> chain{&app};
  for (bool deeper = true; deeper;) {
    deeper = false;
    for (CLI::App* sub : chain.back()->get_subcommands([](CLI::App*) { return true; })) {
      if (sub->parsed()) {
        chain.push_back(sub);
        deeper = true;
        break;
      }
    }
  }
  return chain;
}

std::string command_name(const std::vector<CLI::App*>& chain) {
  std::string s = "met";
  for (std::size_t k = 1; k < chain.size(); ++k) s += " " + chain[k]->get_name();
  return s;
}

}  // namespace

std::string explain_unexpected(CLI::App& app) {
  const auto chain = parsed_chain(app);
  std::vector<std::string> flags, subcommands;
  // The innermost subcommand's flags first, then those of the parents it falls through to.
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    for (const CLI::Option* o : (*it)->get_options()) {
      for (const auto& l : o->get_lnames()) {
        const std::string flag = "--" + l;
        if (flag == "--version" && chain.size() > 1) continue;  // only `met --version`
        if (std::find(flags.begin(), flags.end(), flag) == flags.end()) flags.push_back(flag);
      }
    }
  }
  for (CLI::App* sub : chain.back()->get_subcommands([](CLI::App*) { return true; })) subcommands.push_back(sub->get_name());
  std::string out;
  for (const std::string& arg : app.remaining(true)) {
    const bool is_flag = arg.size() > 2 && arg.compare(0, 2, "--") == 0;
    const std::string word = is_flag ? arg.substr(0, arg.find('=')) : arg;
    const auto near = near_names(word, is_flag ? flags : subcommands);
    if (near.empty()) continue;
    out += fmt::format("error: {} '{}' is not known to `{}`: {}\n", is_flag ? "flag" : "subcommand", word, command_name(chain),
                       suggest(word, is_flag ? flags : subcommands));
  }
  return out;
}

}  // namespace met::cli
