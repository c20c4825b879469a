#include "planner/mode.hpp"

namespace met::planner {

std::string_view mode_name(Mode m) {
  switch (m) {
    case Mode::decode: return "decode";
    case Mode::batch: return "batch";
    case Mode::prefill: return "prefill";
    case Mode::verify:
      return "verify";
  }
  return "?";
}

std::optional<Mode> parse_mode(std::string_view s) {
  if (s == "decode") return Mode::decode;
  if (s == "batch") return Mode::batch;
  if (s == "prefill") return Mode::prefill;
  if (s == "verify") return Mode::verify;
  return std::nullopt;
}

}  // namespace met::planner
