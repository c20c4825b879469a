#include "hub/hub.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "hub/http.hpp"
#include "tree/disk_tree.hpp"

namespace met::hub {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kConfig = "config.json";
constexpr const char* kQuant = "hf_quant_config.json";
constexpr const char* kIndex = "model.safetensors.index.json";
constexpr const char* kSingle = "model.safetensors";
constexpr const char* kSizes = "met-shards.json";   // shard -> size on the Hub
constexpr const char* kComplete = "met-complete";   // written last: the directory is whole
constexpr const char* kHeaderSuffix = ".header";    // a shard's first 8 + N bytes
constexpr std::uint64_t kLengthBytes = 8;           // safetensors: u64 little-endian header length
constexpr std::uint64_t kMaxHeader = 100u << 20;    // the model layer's limit too
constexpr std::uint64_t kMaxSmallFile = 16u << 20;  // config, index, API answers

bool valid_part(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 96) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
  });
}

// A revision becomes one URL path segment: branch names, tags and commit shas.
bool valid_revision(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 128) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
  });
}

bool is_commit(const std::string& s) {
  return s.size() == 40 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string dir_name(const std::string& repo) {
  std::string s = repo;
  s.replace(s.find('/'), 1, "--");
  return s;
}

struct Client {
  const HubOptions& o;
  std::string repo;

  std::vector<std::string> headers() const {
    std::vector<std::string> h;
    if (!o.token.empty()) h.push_back("Authorization: Bearer " + o.token);
    return h;
  }

  // The status as a sentence a user can act on; "" for 2xx.
  std::string explain(long status, const std::string& url) const {
    if (status >= 200 && status < 300) return "";
    if (status == 401 || status == 403) {
      return fmt::format("{}: {} {}: the model is gated or private; {}", url, status,
                         status == 401 ? "unauthorized" : "forbidden",
                         o.token.empty() ? "set HF_TOKEN to a token with access to it"
                                         : "the token in HF_TOKEN was sent and refused (does it have access to this model?)");
    }
    if (status == 404) {
      return fmt::format("{}: 404 not found: no model '{}' at revision '{}' on {} (check the id and --revision)", url, repo,
                         o.revision, o.endpoint);
    }
    return fmt::format("{}: http status {}", url, status);
  }

  Expected<std::string> get_small(const std::string& url) const {
    HttpRequest req{url, headers(), std::nullopt, kMaxSmallFile};
    MET_TRY(HttpResponse r, http_get(req));
    if (const std::string why = explain(r.status, url); !why.empty()) return fail("hub: " + why);
    return std::move(r.body);
  }

  // Bytes [first, last] of a file, and the file's total size from Content-Range.
  Expected<std::pair<std::string, std::uint64_t>> get_range(const std::string& url, std::uint64_t first,
                                                            std::uint64_t last) const {
    HttpRequest req{url, headers(), std::make_pair(first, last), last - first + 1};
    auto r = http_get(req);
    if (!r) return fail("hub: " + r.error().message);
    if (const std::string why = explain(r->status, url); !why.empty()) return fail("hub: " + why);
    if (r->status != 206)
      return fail(fmt::format("hub: {}: answered {} to a range request; expected 206 partial content", url, r->status));
    if (r->body.size() != last - first + 1) {
      return fail(fmt::format("hub: {}: asked for bytes {}-{}, received {} bytes", url, first, last, r->body.size()));
    }
    // "bytes 0-7/16063276032"
    const auto slash = r->content_range.rfind('/');
    std::uint64_t total = 0;
    if (slash == std::string::npos || slash + 1 >= r->content_range.size() ||
        r->content_range.find_first_not_of("0123456789", slash + 1) != std::string::npos) {
      return fail(fmt::format("hub: {}: range answer without a file size (Content-Range '{}')", url, r->content_range));
    }
    total = std::stoull(r->content_range.substr(slash + 1));
    return std::make_pair(std::move(r->body), total);
  }

  std::string file_url(const std::string& commit, const std::string& file) const {
    return fmt::format("{}/{}/resolve/{}/{}", o.endpoint, repo, commit, file);
  }
};

Expected<void> write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  if (!f || !f.write(bytes.data(), static_cast<std::streamsize>(bytes.size())) || !f.flush()) {
    return fail(fmt::format("{}: cannot write the hub cache", p.string()));
  }
  return {};
}

// The shard files named by an index's weight_map, each once, sorted.
Expected<std::vector<std::string>> shards_of(const std::string& index, const std::string& display) {
  const json j = json::parse(index, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    return fail(fmt::format("{}: expected a json object with a 'weight_map' object", display));
  }
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : j["weight_map"].items()) {
    if (!shard.is_string()) return fail(fmt::format("{}: weight_map '{}' is not a string", display, tensor));
    const std::string s = shard.get<std::string>();
    if (!valid_part(s))
      return fail(fmt::format("{}: weight_map '{}' names '{}', not a file of the repository's root", display, tensor, s));
    shards.insert(s);
  }
  return std::vector<std::string>(shards.begin(), shards.end());
}

}  // namespace

bool valid_repo_id(const std::string& repo) {
  const auto slash = repo.find('/');
  if (slash == std::string::npos || repo.find('/', slash + 1) != std::string::npos) return false;
  return valid_part(repo.substr(0, slash)) && valid_part(repo.substr(slash + 1));
}

Expected<std::string> fetch_model(const HubOptions& o, const std::string& repo) {
  if (!valid_repo_id(repo)) return fail(fmt::format("hub: '{}' is not a model id (ORG/NAME)", repo));
  if (!valid_revision(o.revision))
    return fail(fmt::format("hub: --revision '{}': letters, digits, '-', '_' and '.' only", o.revision));
  if (o.cache_root.empty()) return fail("hub: no cache directory (set XDG_CACHE_HOME or HOME)");
  const Client client{o, repo};
  const fs::path model_dir = fs::path(o.cache_root) / "met" / "hub" / dir_name(repo);

  // A commit sha already cached needs no network at all.
  if (is_commit(o.revision) && fs::exists(model_dir / o.revision / kComplete)) return (model_dir / o.revision).string();

  const std::string api = fmt::format("{}/api/models/{}/revision/{}", o.endpoint, repo, o.revision);
  MET_TRY(std::string info_text, client.get_small(api));
  const json info = json::parse(info_text, nullptr, /*allow_exceptions=*/false);
  if (info.is_discarded() || !info.is_object() || !info.contains("sha") || !info["sha"].is_string() ||
      !is_commit(info["sha"].get<std::string>())) {
    return fail(fmt::format("hub: {}: the answer has no commit 'sha'", api));
  }
  const std::string commit = info["sha"].get<std::string>();
  std::set<std::string> files;
  if (info.contains("siblings") && info["siblings"].is_array()) {
    for (const auto& s : info["siblings"]) {
      if (s.is_object() && s.contains("rfilename") && s["rfilename"].is_string()) files.insert(s["rfilename"].get<std::string>());
    }
  }
  const fs::path dir = model_dir / commit;
  if (fs::exists(dir / kComplete)) return dir.string();
  if (!files.count(kConfig)) return fail(fmt::format("hub: {} at {}: the repository has no {}", repo, commit, kConfig));

  std::error_code ec;
  const fs::path partial = model_dir / (commit + ".partial");
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) return fail(fmt::format("{}: cannot create the hub cache: {}", partial.string(), ec.message()));

  std::vector<std::string> shards;
  for (const char* small : {kConfig, kQuant, kIndex}) {
    if (!files.count(small)) continue;
    MET_TRY(std::string text, client.get_small(client.file_url(commit, small)));
    if (std::string(small) == kIndex) {
      MET_TRY(shards, shards_of(text, client.file_url(commit, small)));
    }
    MET_CHECK(write_file(partial / small, text));
  }
  if (!files.count(kIndex) && files.count(kSingle)) shards.push_back(kSingle);

  json sizes = json::object();
  for (const std::string& shard : shards) {
    const std::string url = client.file_url(commit, shard);
    MET_TRY(auto length_part, client.get_range(url, 0, kLengthBytes - 1));
    const auto& [prefix, total] = length_part;
    std::uint64_t n = 0;
    for (int k = 7; k >= 0; --k) n = (n << 8) | static_cast<unsigned char>(prefix[static_cast<std::size_t>(k)]);
    if (total < kLengthBytes || n < 2 || n > kMaxHeader || n > total - kLengthBytes) {
      return fail(fmt::format("hub: {}: header length {} does not fit a {} byte file (limit {})", url, n, total, kMaxHeader));
    }
    MET_TRY(auto header_part, client.get_range(url, kLengthBytes, kLengthBytes + n - 1));
    MET_CHECK(write_file(partial / (shard + kHeaderSuffix), prefix + header_part.first));
    sizes[shard] = total;
  }
  MET_CHECK(write_file(partial / kSizes, sizes.dump(2) + "\n"));
  MET_CHECK(write_file(partial / kComplete, commit + "\n"));
  fs::remove_all(dir, ec);
  fs::rename(partial, dir, ec);
  if (ec) return fail(fmt::format("{}: cannot move the fetched files into place: {}", dir.string(), ec.message()));
  return dir.string();
}

Expected<HubCheckpoint> HubCheckpoint::open(const std::string& repo, const std::string& dir) {
  HubCheckpoint c;
  c.repo_ = repo;
  c.dir_ = dir;
  const fs::path sizes_path = fs::path(dir) / kSizes;
  MET_TRY(std::string text, read_file(sizes_path.string()));
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return fail(fmt::format("{}: not a json object (remove the directory to fetch again)", sizes_path.string()));
  for (const auto& [shard, size] : j.items()) {
    if (!size.is_number_unsigned()) return fail(fmt::format("{}: '{}' is not a size", sizes_path.string(), shard));
    c.shard_sizes_[shard] = size.get<std::uint64_t>();
  }
  return c;
}

std::string HubCheckpoint::name() const { return dir_name(repo_); }

bool HubCheckpoint::exists(const std::string& file) const {
  if (shard_sizes_.count(file)) return true;
  if (file == kSizes || file == kComplete || !valid_part(file)) return false;
  return fs::is_regular_file(fs::path(dir_) / file);
}

Expected<std::string> HubCheckpoint::read(const std::string& file) const {
  if (shard_sizes_.count(file)) return fail(fmt::format("{}: only the header of a shard is fetched", display(file)));
  if (!exists(file)) return fail(fmt::format("{}: no such file", display(file)));
  return read_file((fs::path(dir_) / file).string());
}

Expected<std::string> HubCheckpoint::read_prefix(const std::string& file, std::uint64_t n) const {
  if (!shard_sizes_.count(file)) {
    MET_TRY(std::string all, read(file));
    if (all.size() > n) all.resize(static_cast<std::size_t>(n));
    return all;
  }
  MET_TRY(std::string header, read_file((fs::path(dir_) / (file + kHeaderSuffix)).string()));
  if (n > header.size() && header.size() < shard_sizes_.at(file)) {
    return fail(fmt::format("{}: {} bytes asked for, but only the {} header bytes are fetched", display(file), n, header.size()));
  }
  if (header.size() > n) header.resize(static_cast<std::size_t>(n));
  return header;
}

Expected<std::uint64_t> HubCheckpoint::size(const std::string& file) const {
  if (auto it = shard_sizes_.find(file); it != shard_sizes_.end()) return it->second;
  MET_TRY(std::string all, read(file));
  return static_cast<std::uint64_t>(all.size());
}

std::string HubCheckpoint::display(const std::string& file) const { return fmt::format("hub:{}/{}", repo_, file); }

}  // namespace met::hub
