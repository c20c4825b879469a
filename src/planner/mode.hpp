// Planning modes: decode (1 row), batch (C rows, C sequences), prefill (T rows, one sequence).
#pragma once

#include <optional>
#include <string_view>

namespace met::planner {

enum class Mode { decode, batch, prefill };

std::string_view mode_name(Mode m);
std::optional<Mode> parse_mode(std::string_view s);

}  // namespace met::planner
