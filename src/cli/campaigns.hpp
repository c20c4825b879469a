// Campaign records (`met circuit run --campaign`, schema met-campaign/1) named on the command line,
// read for `plan --measured` and `calibrate`: a file must be a record; a directory is searched
// recursively, in sorted order, for *.json records (other JSON files there are skipped).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "core/expected.hpp"
#include "estimate/calibrate.hpp"

namespace met::cli {

// (path, record) of every campaign under `paths`; `what` names the flag or argument in errors.
Expected<std::vector<std::pair<std::string, nlohmann::json>>> read_campaigns(const std::vector<std::string>& paths, const std::string& what);

// The cases of one record, with their family times; `path` as named. A record without "model"
// gives its cases model "" (`plan --measured` matches by plan digest alone).
Expected<std::vector<estimate::CampaignCase>> campaign_cases(const std::string& path, const nlohmann::json& record);

}  // namespace met::cli
