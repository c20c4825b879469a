// BPE: a word starts as one symbol per character (or <0xNN> bytes / the unknown token for
// characters outside the vocabulary) and adjacent symbols merge by rank through a min-heap;
// stale heap entries are recognised by re-checking the pair they were made for.
#include "text/tokenizer_bpe.hpp"

#include <cstdio>
#include <queue>

#include <nlohmann/json.hpp>

#include "text/unicode.hpp"

namespace met::text {

namespace {

Expected<void> check_keys(const nlohmann::json& obj, std::initializer_list<std::string_view> keys, const std::string& where) {
  for (const auto& [k, v] : obj.items()) {
    bool known = false;
    for (auto key : keys) known = known || key == k;
    if (!known) return fail(where + ": unknown key '" + k + "'");
  }
  return {};
}

// An optional string field: absent, null and "" all mean "none".
Expected<std::string> opt_string(const nlohmann::json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return fail(where + "." + key + ": expected a string or null");
  return it->get<std::string>();
}

Expected<bool> opt_bool(const nlohmann::json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return false;
  if (!it->is_boolean()) return fail(where + "." + key + ": expected a boolean");
  return it->get<bool>();
}

}  // namespace

Expected<BpeModel> BpeModel::from_json(const nlohmann::json& m, const std::string& where) {
  MET_CHECK(check_keys(m,
                       {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
                        "byte_fallback", "ignore_merges", "vocab", "merges"},
                       where));
  if (auto d = m.find("dropout"); d != m.end() && !d->is_null() && !(d->is_number() && d->get<double>() == 0.0))
    return fail(where + ".dropout: bpe dropout is not supported (tokenization would be random)");
  BpeModel b;
  MET_TRY(b.prefix_, opt_string(m, "continuing_subword_prefix", where));
  MET_TRY(b.suffix_, opt_string(m, "end_of_word_suffix", where));
  MET_TRY(b.fuse_unk_, opt_bool(m, "fuse_unk", where));
  MET_TRY(b.byte_fallback_, opt_bool(m, "byte_fallback", where));
  MET_TRY(b.ignore_merges_, opt_bool(m, "ignore_merges", where));

  auto vocab = m.find("vocab");
  if (vocab == m.end() || !vocab->is_object()) return fail(where + ".vocab: expected an object of token -> id");
  b.vocab_.reserve(vocab->size());
  std::int64_t max_id = -1;
  for (const auto& [tok, idv] : vocab->items()) {
    if (!idv.is_number_integer() || idv.get<std::int64_t>() < 0 || idv.get<std::int64_t>() > INT32_MAX)
      return fail(where + ".vocab['" + tok + "']: expected a non-negative integer id");
    const auto id = idv.get<std::int64_t>();
    b.vocab_.emplace(tok, static_cast<std::int32_t>(id));
    max_id = std::max(max_id, id);
  }
  b.id_to_token_.resize(static_cast<std::size_t>(max_id + 1));
  b.has_id_.assign(static_cast<std::size_t>(max_id + 1), false);
  for (const auto& [tok, id] : b.vocab_) {
    b.id_to_token_[static_cast<std::size_t>(id)] = tok;
    b.has_id_[static_cast<std::size_t>(id)] = true;
  }

  MET_TRY(std::string unk, opt_string(m, "unk_token", where));
  if (!unk.empty()) {
    auto it = b.vocab_.find(unk);
    if (it == b.vocab_.end()) return fail(where + ".unk_token: '" + unk + "' is not in the vocabulary");
    b.unk_id_ = it->second;
  }
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    auto it = b.vocab_.find(name);
    b.byte_ids_[static_cast<std::size_t>(byte)] = it == b.vocab_.end() ? -1 : it->second;
  }

  auto merges = m.find("merges");
  if (merges == m.end() || !merges->is_array()) return fail(where + ".merges: expected an array");
  b.merges_.reserve(merges->size());
  std::uint32_t rank = 0;
  for (const auto& mv : *merges) {
    const std::string at = where + ".merges[" + std::to_string(rank) + "]";
    std::string left, right;
    if (mv.is_string()) {
      const auto s = mv.get<std::string>();
      const auto sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return fail(at + ": expected \"left right\" with exactly one space");
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (mv.is_array() && mv.size() == 2 && mv[0].is_string() && mv[1].is_string()) {
      left = mv[0].get<std::string>();
      right = mv[1].get<std::string>();
    } else {
      return fail(at + ": expected a \"left right\" string or a [left, right] pair");
    }
    auto l = b.vocab_.find(left), r = b.vocab_.find(right);
    if (l == b.vocab_.end()) return fail(at + ": '" + left + "' is not in the vocabulary");
    if (r == b.vocab_.end()) return fail(at + ": '" + right + "' is not in the vocabulary");
    if (!b.prefix_.empty() && right.compare(0, b.prefix_.size(), b.prefix_) != 0)
      return fail(at + ": '" + right + "' lacks the continuing subword prefix '" + b.prefix_ + "'");
    const std::string merged = left + right.substr(b.prefix_.size());
    auto n = b.vocab_.find(merged);
    if (n == b.vocab_.end()) return fail(at + ": merged token '" + merged + "' is not in the vocabulary");
    b.merges_[pair_key(l->second, r->second)] = Merge{rank, n->second};  // a repeated pair keeps its last rank
    ++rank;
  }
  return b;
}

std::optional<std::int32_t> BpeModel::token_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::token(std::int32_t id) const {
  if (id < 0 || id >= id_end() || !has_id_[static_cast<std::size_t>(id)]) return nullptr;
  return &id_to_token_[static_cast<std::size_t>(id)];
}

void BpeModel::tokenize(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto it = vocab_.find(std::string(word)); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (auto it = cache_->map.find(std::string(word)); it != cache_->map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::int32_t> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (cache_->map.size() < kCacheEntries) cache_->map.emplace(std::string(word), std::move(ids));
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<std::int32_t>& out) const {
  struct Symbol {
    std::int32_t id;
    std::int32_t prev;
    std::int32_t next;
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  auto add = [&](std::int32_t id) {
    const auto n = static_cast<std::int32_t>(sym.size());
    sym.push_back(Symbol{id, n - 1, n + 1, true});
  };
  // Unknown characters: with fuse_unk, consecutive ones become one unknown token.
  constexpr std::int32_t kNone = -1;
  std::int32_t pending_unk = kNone;
  for (std::size_t i = 0; i < word.size();) {
    const std::size_t n = unicode::char_len(word, i);
    const bool first = i == 0, last = i + n >= word.size();
    std::string piece;
    if (!first) piece += prefix_;
    piece.append(word.substr(i, n));
    if (last) piece += suffix_;
    i += n;
    if (auto it = vocab_.find(piece); it != vocab_.end()) {
      if (pending_unk != kNone) {
        add(pending_unk);
        pending_unk = kNone;
      }
      add(it->second);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char c : piece) all = all && byte_ids_[c] >= 0;
      if (all) {
        for (unsigned char c : piece) add(byte_ids_[c]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk != kNone && !fuse_unk_) add(pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk != kNone) add(pending_unk);
  if (sym.empty()) return;
  sym.back().next = -1;

  struct Entry {
    std::uint32_t rank;
    std::int32_t pos;
    std::int32_t id;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto lookup = [&](std::int32_t a, std::int32_t b) -> const Merge* {
    auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  for (std::size_t k = 0; k + 1 < sym.size(); ++k)
    if (const Merge* m = lookup(sym[k].id, sym[k + 1].id)) heap.push(Entry{m->rank, static_cast<std::int32_t>(k), m->id});

  while (!heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    Symbol& cur = sym[static_cast<std::size_t>(top.pos)];
    if (!cur.alive || cur.next < 0) continue;
    Symbol& right = sym[static_cast<std::size_t>(cur.next)];
    const Merge* m = lookup(cur.id, right.id);
    if (m == nullptr || m->id != top.id) continue;  // stale: the pair changed since it was queued
    cur.id = top.id;
    right.alive = false;
    cur.next = right.next;
    if (cur.next >= 0) sym[static_cast<std::size_t>(cur.next)].prev = top.pos;
    if (cur.prev >= 0) {
      if (const Merge* pm = lookup(sym[static_cast<std::size_t>(cur.prev)].id, cur.id))
        heap.push(Entry{pm->rank, cur.prev, pm->id});
    }
    if (cur.next >= 0) {
      if (const Merge* nm = lookup(cur.id, sym[static_cast<std::size_t>(cur.next)].id))
        heap.push(Entry{nm->rank, top.pos, nm->id});
    }
  }
  for (const Symbol& s : sym)
    if (s.alive) out.push_back(s.id);
}

}  // namespace met::text
