#include "core/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

#include "core/strings.hpp"

namespace met {

namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// At most this many names follow "did you mean"; the full list is printed after them anyway.
constexpr std::size_t kMaxSuggestions = 3;

}  // namespace

int edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const int cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::vector<std::string> near_names(const std::string& word, const std::vector<std::string>& candidates) {
  std::vector<std::pair<int, std::string>> ranked;
  std::string lw(word.size(), ' ');
  std::transform(word.begin(), word.end(), lw.begin(), lower);
  for (const std::string& c : candidates) {
    const int dist = edit_distance(word, c);
    const int limit = std::max<int>(1, static_cast<int>(std::max(word.size(), c.size()) / 3));
    std::string lc(c.size(), ' ');
    std::transform(c.begin(), c.end(), lc.begin(), lower);
    // "h2" -> "h200-sxm"; "b200-sxm" -> "b200" (a name the user extended with a suffix).
    const bool prefix = (lw.size() >= 2 && starts_with(lc, lw)) || (lc.size() >= 3 && starts_with(lw, lc));
    // Rank in half edits: one edit (2) beats a prefix (3), which beats two edits (4).
    if (dist <= limit)
      ranked.emplace_back(std::min(2 * dist, prefix ? 3 : 2 * dist), c);
    else if (prefix)
      ranked.emplace_back(3, c);
  }
  std::sort(ranked.begin(), ranked.end());
  ranked.erase(std::unique(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.second == y.second; }),
               ranked.end());
  std::vector<std::string> out;
  for (const auto& [dist, name] : ranked) {
    // Only the best: "h200-sx" means h200-sxm, not also h100-sxm two edits away.
    if (out.size() == kMaxSuggestions || dist > ranked.front().first) break;
    out.push_back(name);
  }
  return out;
}

std::string suggest(const std::string& word, const std::vector<std::string>& candidates, const std::vector<std::string>& listed) {
  return did_you_mean(near_names(word, candidates), listed.empty() ? candidates : listed);
}

std::string did_you_mean(const std::vector<std::string>& near, const std::vector<std::string>& listed) {
  const std::string known = "(known: " + join(listed, ", ") + ")";
  if (near.empty()) return known;
  std::string s = "did you mean ";
  for (std::size_t k = 0; k < near.size(); ++k) {
    if (k) s += k + 1 == near.size() ? " or " : ", ";
    s += "'" + near[k] + "'";
  }
  return s + "? " + known;
}

}  // namespace met
