// Planning modes: decode (1 row), batch (C rows, C sequences), prefill (T rows, one sequence),
// verify (speculative verification: K draft tokens of one sequence checked against its cache of
// `context` tokens; the layers planned as a prefill chunk of K rows after the cache, the head on
// every one of the K rows). Rules list decode, batch and prefill only; verify plans with them.
#pragma once

#include <optional>
#include <string_view>

namespace met::planner {

enum class Mode { decode, batch, prefill, verify };

std::string_view mode_name(Mode m);
std::optional<Mode> parse_mode(std::string_view s);

}  // namespace met::planner
