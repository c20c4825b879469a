#include "cli/campaigns.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "tree/disk_tree.hpp"

namespace met::cli {

Expected<std::vector<std::pair<std::string, nlohmann::json>>> read_campaigns(const std::vector<std::string>& paths, const std::string& what) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, nlohmann::json>> out;
  for (const auto& p : paths) {
    std::error_code ec;
    std::vector<std::string> files;
    const bool dir = fs::is_directory(p, ec);
    if (dir) {
      for (fs::recursive_directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file() && it->path().extension() == ".json") files.push_back(it->path().string());
      if (ec) return fail(fmt::format("{} {}: {}", what, p, ec.message()));
      std::sort(files.begin(), files.end());
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      return fail(fmt::format("{} {}: no such file or directory", what, p));
    }
    for (const auto& f : files) {
      MET_TRY(auto text, read_file(f));
      auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      const bool campaign = !j.is_discarded() && j.is_object() && j.value("schema", "") == "met-campaign/1";
      if (!campaign) {
        if (dir) continue;
        return fail(fmt::format("{} {}: not a campaign record (schema met-campaign/1, from met circuit run --campaign)", what, f));
      }
      out.emplace_back(f, std::move(j));
    }
  }
  return out;
}

Expected<std::vector<estimate::CampaignCase>> campaign_cases(const std::string& path, const nlohmann::json& j) {
  std::vector<estimate::CampaignCase> out;
  try {
    const std::string hardware = j.at("hardware").get<std::string>();
    const std::string model = j.value("model", "");  // calibrate needs it; --measured matches by digest alone
    const std::string stamp = j.value("stamp", "");
    for (const auto& c : j.at("cases")) {
      estimate::CampaignCase m;
      m.source = path;
      m.stamp = stamp;
      m.model = model;
      m.hardware = hardware;
      m.plan_digest = c.value("plan_digest", "");  // "" in campaigns before the digest was recorded
      m.kind = c.at("kind").get<std::string>();
      m.rows = c.at("rows").get<std::int64_t>();
      if (m.kind == "decode") m.context = c.at("ctx").get<std::int64_t>();
      m.median_ms = c.at("ms").at("median").get<double>();
      if (c.contains("family_ms")) {
        for (const auto& [family, ms] : c.at("family_ms").items()) m.family_ms[family] = ms.get<double>();
      }
      out.push_back(std::move(m));
    }
  } catch (const nlohmann::json::exception& e) {
    return fail(fmt::format("{}: not a usable campaign record: {}", path, e.what()));
  }
  return out;
}

}  // namespace met::cli
