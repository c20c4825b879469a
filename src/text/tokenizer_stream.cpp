// IncrementalDecoder: decodes a window of ids that starts at the last emitted text, and emits
// the part past what that text already covered, unless it ends in U+FFFD (bytes of a character
// still incomplete) or in a byte-fallback token (a later invalid byte would turn the whole run of
// byte tokens into U+FFFDs, as a full decode does). The window keeps the previous ids so decoders that look at neighbours agree
// with a full decode.
#include "text/tokenizer.hpp"
#include "text/unicode.hpp"

namespace met::text {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tok_(&tokenizer), skip_special_(skip_special_tokens) {}

std::string IncrementalDecoder::push(std::int32_t id) {
  ids_.push_back(id);
  return emit(/*final=*/false);
}

std::string IncrementalDecoder::finish() { return emit(/*final=*/true); }

std::string IncrementalDecoder::emit(bool final) {
  const std::vector<std::int32_t> done(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(read_));
  const std::string before = tok_->decode(done, skip_special_);
  const std::string now = tok_->decode(ids_, skip_special_);
  const bool held = now.size() >= unicode::kReplacement.size() &&
                    now.compare(now.size() - unicode::kReplacement.size(), std::string::npos, unicode::kReplacement) == 0;
  bool byte_run = false;  // the last id that decodes to anything is a byte-fallback token
  for (auto it = ids_.rbegin(); it != ids_.rend(); ++it) {
    if (auto pending = tok_->pending_in_stream(*it, skip_special_)) {
      byte_run = *pending;
      break;
    }
  }
  if (now.size() <= before.size() || ((held || byte_run) && !final) || now.compare(0, before.size(), before) != 0) {
    if (final) ids_.clear(), read_ = 0;
    return {};
  }
  std::string out = now.substr(before.size());
  // The ids just decoded become the window's prefix.
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(read_));
  read_ = ids_.size();
  return out;
}

}  // namespace met::text
