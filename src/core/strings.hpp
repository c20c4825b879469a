// Small string helpers shared by every layer: joining id lists for error messages, trimming,
// HTML escaping.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace met {

std::string join(const std::vector<std::string>& parts, std::string_view sep);
std::string_view trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);
// "a,,b" -> {"a", "", "b"}; every piece is kept, so "" gives {""} and "1," ends with "".
std::vector<std::string> split(std::string_view s, char sep);
// & < > " ' as entities, as markupsafe (jinja2's escape filter) writes them: &amp; &lt; &gt;
// &#34; &#39;. Safe in HTML text and quoted attribute values, and in SVG.
std::string html_escape(std::string_view s);

}  // namespace met
