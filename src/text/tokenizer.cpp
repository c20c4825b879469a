// Loads tokenizer.json into a TokenizerPipeline and runs it: added tokens split off the raw text,
// each remaining segment normalised, pre-tokenized and BPE-encoded, then the post-processor's
// ids around the result. Decoding maps ids to tokens and runs the decoder chain.
#include "text/tokenizer.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "text/tokenizer_pipeline.hpp"
#include "text/unicode.hpp"

namespace met::text {

using nlohmann::json;

Tokenizer::Tokenizer() : p_(std::make_unique<TokenizerPipeline>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace {

Expected<bool> flag(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) return false;
  if (!it->is_boolean()) return fail(where + "." + key + ": expected a boolean");
  return it->get<bool>();
}

bool has_byte_fallback(const json& decoder) {
  if (decoder.value("type", "") == "ByteFallback") return true;
  if (auto it = decoder.find("decoders"); it != decoder.end() && it->is_array())
    for (const json& d : *it)
      if (has_byte_fallback(d)) return true;
  return false;
}

}  // namespace

Expected<Tokenizer> Tokenizer::from_json(std::string_view text, const std::string& display) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return fail(display + ": invalid json at byte " + std::to_string(e.byte));
  }
  if (!j.is_object()) return fail(display + ": expected a json object");
  for (const auto& [k, v] : j.items()) {
    static constexpr std::string_view kKeys[] = {"version",       "truncation", "padding",        "added_tokens", "normalizer",
                                                 "pre_tokenizer", "model",      "post_processor", "decoder"};
    if (std::find(std::begin(kKeys), std::end(kKeys), k) == std::end(kKeys)) return fail(display + ": unknown key '" + k + "'");
  }
  Tokenizer t;
  TokenizerPipeline& p = *t.p_;

  auto model = j.find("model");
  if (model == j.end() || !model->is_object()) return fail(display + ": model: expected an object");
  if (auto type = model->find("type"); type != model->end() && *type != "BPE")
    return fail(display + ": model.type: unsupported model '" + type->dump() + "' (only BPE is)");
  MET_TRY(BpeModel bpe, BpeModel::from_json(*model, display + ": model"));
  p.model.emplace(std::move(bpe));
  p.id_end = p.model->id_end();

  if (auto n = j.find("normalizer"); n != j.end() && !n->is_null()) {
    MET_TRY(p.normalizer, make_normalizer(*n, display + ": normalizer"));
  }
  if (auto n = j.find("pre_tokenizer"); n != j.end() && !n->is_null()) {
    MET_TRY(p.pre_tokenizer, make_pre_tokenizer(*n, display + ": pre_tokenizer"));
  }
  if (auto n = j.find("post_processor"); n != j.end() && !n->is_null()) {
    MET_CHECK(make_post_processor(*n, display + ": post_processor", p.prefix, p.suffix));
  }
  if (auto n = j.find("decoder"); n != j.end() && !n->is_null()) {
    MET_TRY(p.decoder, make_decoder(*n, display + ": decoder"));
    p.byte_fallback_decoder = has_byte_fallback(*n);
  }

  auto added = j.find("added_tokens");
  if (added != j.end() && !added->is_null()) {
    if (!added->is_array()) return fail(display + ": added_tokens: expected an array");
    for (std::size_t i = 0; i < added->size(); ++i) {
      const json& a = (*added)[i];
      const std::string where = display + ": added_tokens[" + std::to_string(i) + "]";
      if (!a.is_object()) return fail(where + ": expected an object");
      for (const auto& [k, v] : a.items()) {
        static constexpr std::string_view kKeys[] = {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"};
        if (std::find(std::begin(kKeys), std::end(kKeys), k) == std::end(kKeys)) return fail(where + ": unknown key '" + k + "'");
      }
      auto tok = std::make_unique<AddedToken>();
      if (!a.contains("content") || !a["content"].is_string()) return fail(where + ".content: expected a string");
      if (!a.contains("id") || !a["id"].is_number_integer() || a["id"].get<std::int64_t>() < 0 ||
          a["id"].get<std::int64_t>() > INT32_MAX)
        return fail(where + ".id: expected a non-negative integer");
      tok->content = a["content"].get<std::string>();
      if (!unicode::is_valid_utf8(tok->content)) return fail(where + ".content: invalid utf-8");
      MET_TRY(tok->special, flag(a, "special", where));
      MET_TRY(tok->single_word, flag(a, "single_word", where));
      MET_TRY(tok->lstrip, flag(a, "lstrip", where));
      MET_TRY(tok->rstrip, flag(a, "rstrip", where));
      MET_TRY(tok->normalized, flag(a, "normalized", where));
      // A token the model already knows keeps the model's id (as tokenizers assigns it).
      tok->id = p.model->token_id(tok->content).value_or(a["id"].get<std::int32_t>());
      if (p.added_by_content.count(tok->content) != 0) continue;  // a repeated token: the first wins
      p.id_end = std::max(p.id_end, tok->id + 1);
      p.added_by_content.emplace(tok->content, tok->id);
      p.added_by_id.emplace(tok->id, tok.get());
      p.added.push_back(std::move(tok));
    }
    // Special tokens first, then the others, as tokenizers builds its automata.
    for (int pass = 0; pass < 2; ++pass) {
      for (const auto& tok : p.added) {
        if (tok->special != (pass == 0)) continue;
        if (!tok->normalized) {
          p.raw_matcher.add(*tok, tok->content);
        } else {
          std::string content = tok->content;
          if (p.normalizer) p.normalizer->apply(content);
          p.normalized_matcher.add(*tok, std::move(content));
        }
      }
    }
  }
  return t;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view input, bool add_special_tokens, bool parse_special_tokens) const {
  const TokenizerPipeline& p = *p_;
  std::string repaired;
  if (!unicode::is_valid_utf8(input)) {
    repaired = unicode::lossy(input);
    input = repaired;
  }
  std::vector<std::int32_t> ids;
  if (add_special_tokens) ids = p.prefix;
  for (const auto& seg : p.raw_matcher.split(input, parse_special_tokens)) {
    if (seg.token != nullptr) {
      ids.push_back(seg.token->id);
      continue;
    }
    std::string text(input.substr(seg.begin, seg.end - seg.begin));
    if (p.normalizer) p.normalizer->apply(text);
    for (const auto& sub : p.normalized_matcher.split(text, parse_special_tokens)) {
      if (sub.token != nullptr) {
        ids.push_back(sub.token->id);
        continue;
      }
      std::vector<TextPiece> pieces{TextPiece{text.substr(sub.begin, sub.end - sub.begin), seg.begin == 0 && sub.begin == 0}};
      if (p.pre_tokenizer) p.pre_tokenizer->apply(pieces);
      for (const TextPiece& piece : pieces) p.model->tokenize(piece.text, ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), p.suffix.begin(), p.suffix.end());
  return ids;
}

std::string Tokenizer::decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const {
  const TokenizerPipeline& p = *p_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::int32_t id : ids) {
    const std::string* text = nullptr;
    if (auto it = p.added_by_id.find(id); it != p.added_by_id.end())
      text = &it->second->content;
    else
      text = p.model->token(id);
    if (text == nullptr) continue;
    if (skip_special_tokens) {
      auto a = p.added_by_content.find(*text);
      if (a != p.added_by_content.end() && p.added_by_id.at(a->second)->special) continue;
    }
    tokens.push_back(*text);
  }
  if (!p.decoder) {
    std::string out;
    for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  p.decoder->apply(tokens);
  std::string out;
  for (const auto& s : tokens) out += s;
  return out;
}

std::optional<std::int32_t> Tokenizer::token_id(std::string_view token) const {
  if (auto it = p_->added_by_content.find(std::string(token)); it != p_->added_by_content.end()) return it->second;
  return p_->model->token_id(token);
}

std::optional<std::string> Tokenizer::token(std::int32_t id) const {
  if (auto it = p_->added_by_id.find(id); it != p_->added_by_id.end()) return it->second->content;
  if (const std::string* t = p_->model->token(id)) return *t;
  return std::nullopt;
}

bool Tokenizer::is_special(std::int32_t id) const {
  auto it = p_->added_by_id.find(id);
  return it != p_->added_by_id.end() && it->second->special;
}

std::optional<bool> Tokenizer::pending_in_stream(std::int32_t id, bool skip_special_tokens) const {
  const auto t = token(id);
  if (!t) return std::nullopt;
  if (skip_special_tokens) {
    auto a = p_->added_by_content.find(*t);
    if (a != p_->added_by_content.end() && p_->added_by_id.at(a->second)->special) return std::nullopt;
  }
  return p_->byte_fallback_decoder && t->size() == 6 && t->compare(0, 3, "<0x") == 0 && (*t)[5] == '>';
}

std::int32_t Tokenizer::vocab_size() const { return p_->id_end; }
const std::vector<std::int32_t>& Tokenizer::special_prefix() const { return p_->prefix; }
const std::vector<std::int32_t>& Tokenizer::special_suffix() const { return p_->suffix; }

}  // namespace met::text
