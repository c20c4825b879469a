// Loading a served model. EOS ids are the union of generation_config.json's and config.json's
// eos_token_id (an int or a list) and tokenizer_config.json's eos_token, as vLLM stops on any.
#include "serve/server_model.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "interp/backend_factory.hpp"
#include "text/chat_template.hpp"

namespace met::serve {
namespace {

namespace fs = std::filesystem;

Expected<std::string> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return fail(p.string() + ": cannot read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A json object from an optional file: nullopt when the file is absent.
Expected<std::optional<nlohmann::json>> optional_json(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::optional<nlohmann::json>{};
  MET_TRY(std::string text, slurp(p));
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return fail(p.string() + ": not a json object");
  return std::optional<nlohmann::json>{std::move(j)};
}

void add_eos_ids(const nlohmann::json& v, std::set<std::int32_t>& out) {
  if (v.is_number_integer()) out.insert(v.get<std::int32_t>());
  if (v.is_array())
    for (const auto& e : v)
      if (e.is_number_integer()) out.insert(e.get<std::int32_t>());
}

}  // namespace

Expected<std::unique_ptr<ServedModel>> load_served_model(const std::string& dir, const std::string& backend_name) {
  auto m = std::make_unique<ServedModel>();
  MET_TRY(m->assets, interp::load_assets(dir));
  const auto build = nlohmann::json::parse(m->assets.build_json, nullptr, /*allow_exceptions=*/false);
  if (build.is_object() && build.contains("network") && build["network"].is_string())
    m->id = build["network"].get<std::string>();
  if (m->id.empty()) m->id = m->assets.weights.network;
  if (m->id.empty()) return fail(dir + "/build.json: no network slug to name the model by");
  m->max_ctx = m->assets.build.max_ctx;
  for (const auto& t : m->assets.packet.tensors)
    if (t.source == MET_SOURCE_IO && t.ref == static_cast<std::uint64_t>(emit::IoField::logits) && t.shape.size() == 2)
      m->vocab = static_cast<std::int64_t>(t.shape[1]);

  const fs::path ckpt(m->assets.checkpoint_dir);
  fs::path tok_path = fs::path(dir) / "tokenizer.json";
  std::error_code ec;
  if (!fs::exists(tok_path, ec)) tok_path = ckpt / "tokenizer.json";
  MET_TRY(std::string tok_text, slurp(tok_path));
  MET_TRY(text::Tokenizer tok, text::Tokenizer::from_json(tok_text, tok_path.string()));
  m->tokenizer.emplace(std::move(tok));

  MET_TRY(auto tcfg, optional_json(ckpt / "tokenizer_config.json"));
  MET_TRY(auto cfg, optional_json(ckpt / "config.json"));
  MET_TRY(auto gen, optional_json(ckpt / "generation_config.json"));
  if (gen && gen->contains("eos_token_id")) add_eos_ids((*gen)["eos_token_id"], m->eos);
  if (cfg && cfg->contains("eos_token_id")) add_eos_ids((*cfg)["eos_token_id"], m->eos);
  if (tcfg) {
    const auto special = special_tokens_of(*tcfg);
    if (special.contains("eos_token"))
      if (auto id = m->tokenizer->token_id(special["eos_token"].get<std::string>())) m->eos.insert(*id);
  }

  auto src = load_chat_template(ckpt);
  if (src) {
    auto t = Template::parse(src->source, src->display);
    if (t) {
      m->chat_template.emplace(std::move(*t));
      m->tool_format = tool_format_of(src->source);
      m->template_extra = nlohmann::ordered_json::object();
      for (const auto& [k, v] : src->special_tokens.items()) m->template_extra[k] = v;
    } else {
      m->chat_template_error = t.error().message;
    }
  } else {
    m->chat_template_error = src.error().message;
  }

  // cpu-oracle serves a GPU emit's packets on the cpu bodies (scripts/h200_serve_check.sh serves it
  // beside cuda and compares); tokens (argmax and sampled) come from the backend, never the logits.
  if (auto known = interp::check_backend_name(backend_name); !known) return fail("serve: " + known.error().message);
  MET_TRY(m->backend, interp::make_backend(backend_name, m->assets, {.threads = 0, .fetch_logits = false}));
  m->created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return m;
}

}  // namespace met::serve
