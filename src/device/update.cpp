#include "device/update.hpp"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "core/numfmt.hpp"
#include "core/strings.hpp"
#include "device/identity.hpp"
#include "device/registry.hpp"
#include "tree/kernel_tree.hpp"

namespace met::device {

namespace {

constexpr std::size_t kCommentColumn = 38;  // where DEVICES.toml aligns trailing comments

using Lines = std::vector<std::string>;

Lines split_lines(const std::string& text) {
  Lines out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) {
      out.push_back(text.substr(at));
      break;
    }
    out.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return out;
}

std::string join_lines(const Lines& lines, bool trailing_newline) {
  std::string s;
  for (std::size_t i = 0; i < lines.size(); ++i) s += lines[i] + (i + 1 < lines.size() || trailing_newline ? "\n" : "");
  return s;
}

std::string_view stripped(const std::string& line) { return trim(line); }
bool is_header(const std::string& line) { return stripped(line).substr(0, 1) == "["; }
// A line that ends a table's key lines: blank, a comment, or the next header.
bool ends_table(const std::string& line) {
  const std::string_view t = stripped(line);
  return t.empty() || t.front() == '#' || t.front() == '[';
}
std::string key_of(const std::string& line) {
  const std::size_t eq = line.find('=');
  return eq == std::string::npos ? "" : std::string(trim(std::string_view(line).substr(0, eq)));
}
std::string value_of(const std::string& line) {
  const std::size_t eq = line.find('=');
  return eq == std::string::npos ? "" : std::string(trim(std::string_view(line).substr(eq + 1)));
}
// First index >= from whose line ends the table (or lines.size()).
std::size_t table_end(const Lines& lines, std::size_t from) {
  while (from < lines.size() && !ends_table(lines[from])) ++from;
  return from;
}

std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string with_comment(const std::string& line, const std::string& comment) {
  const std::size_t pad = line.size() < kCommentColumn ? kCommentColumn - line.size() : 1;
  return line + std::string(pad, ' ') + "# " + comment;
}

Expected<void> check_identity(const Device& d, const ProbedFigures& p) {
  const std::string at = d.location + ": device '" + d.id + "'";
  const GpuIdentity gpu{"the probe's GPU", p.sm_count, p.compute_major, p.compute_minor, p.memory_gib};
  if (auto same = check_gpu(d, gpu); !same) return fail(same.error().message + ": these figures are another device's");
  if (!(p.read_gbs > 0 && p.copy_gbs > 0 && p.bf16_tflops > 0)) return fail(at + ": the probe's figures must be positive");
  if (p.source_title.empty() || p.source_url.empty()) return fail(at + ": the probe's citation needs a title and a url");
  return {};
}

Expected<Registry> load_text(const std::string& text, const std::string& file) {
  const std::size_t slash = file.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : file.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? file : file.substr(slash + 1);
  MemTree tree({{base, text}}, dir);
  return load_registry(tree, base);
}

}  // namespace

std::string probe_source_key(const std::string& device_id) { return "met-" + device_id + "-probe"; }

Expected<std::string> update_measured(const std::string& text, const std::string& file, const ProbedFigures& p) {
  MET_TRY(Registry reg, load_text(text, file));
  const Device* d = reg.resolve(p.device);
  if (!d) return fail(fmt::format("{}: no device '{}' (see `met circuit devices`)", file, p.device));
  MET_CHECK(check_identity(*d, p));
  const std::string key = probe_source_key(d->id);
  const std::string read = fmt_fixed(p.read_gbs, 1), copy = fmt_fixed(p.copy_gbs, 1), bf16 = fmt_fixed(p.bf16_tflops, 1);
  const Lines figures = {
      with_comment("read_gbs = " + read, "streaming read (met circuit probe)"),
      with_comment("copy_gbs = " + copy, "device-to-device copy, bytes read + written"),
      with_comment("bf16 = " + bf16, "wgmma from shared memory, fp32 accumulate"),
      "cite = " + toml_string(key),
  };

  Lines lines = split_lines(text);
  const bool trailing_newline = !text.empty() && text.back() == '\n';
  // The device's tables: from its [[device]] header to the next header that is not [device.*].
  std::size_t begin = lines.size();
  for (std::size_t i = 0; i < lines.size() && begin == lines.size(); ++i) {
    if (stripped(lines[i]) != "[[device]]") continue;
    for (std::size_t j = i + 1; j < lines.size() && !is_header(lines[j]); ++j)
      if (key_of(lines[j]) == "id" && value_of(lines[j]) == toml_string(d->id)) begin = i;
  }
  if (begin == lines.size()) return fail(fmt::format("{}: cannot find the [[device]] table of '{}' as text", file, d->id));
  std::size_t end = begin + 1;
  while (end < lines.size() && !(is_header(lines[end]) && stripped(lines[end]).rfind("[device.", 0) != 0)) ++end;
  std::size_t measured = end;
  for (std::size_t i = begin + 1; i < end; ++i)
    if (stripped(lines[i]).rfind("[device.measured]", 0) == 0) measured = i;
  if (measured < end) {
    const std::size_t stop = table_end(lines, measured + 1);
    for (std::size_t i = measured + 1; i < stop; ++i) {
      const std::string k = key_of(lines[i]);
      if (k != "read_gbs" && k != "copy_gbs" && k != "bf16" && k != "cite")
        return fail(fmt::format("{}:{}: [device.measured] of '{}' holds '{}', which the probe does not measure; its cite would "
                                "become the probe's: move that figure elsewhere or remove it first",
                                file, i + 1, d->id, k));
    }
    lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(measured + 1), lines.begin() + static_cast<std::ptrdiff_t>(stop));
    lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(measured + 1), figures.begin(), figures.end());
  } else {
    std::size_t last = end - 1;  // the device's last key line: trailing blanks and comments belong to what follows
    while (last > begin && (stripped(lines[last]).empty() || stripped(lines[last]).front() == '#')) --last;
    Lines table = {"", "[device.measured]"};
    table.insert(table.end(), figures.begin(), figures.end());
    lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(last + 1), table.begin(), table.end());
  }

  const std::string header = "[source." + key + "]";
  const Lines source = {"title = " + toml_string(p.source_title), "url = " + toml_string(p.source_url)};
  std::size_t found = lines.size(), last_source = lines.size();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (stripped(lines[i]) == header) found = i;
    if (stripped(lines[i]).rfind("[source.", 0) == 0) last_source = i;
  }
  if (found < lines.size()) {
    const std::size_t stop = table_end(lines, found + 1);
    lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(found + 1), lines.begin() + static_cast<std::ptrdiff_t>(stop));
    lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(found + 1), source.begin(), source.end());
  } else {
    if (last_source == lines.size()) return fail(file + ": no [source.*] table to add the probe's source after");
    Lines table = {"", header};
    table.insert(table.end(), source.begin(), source.end());
    const std::size_t at = table_end(lines, last_source + 1);
    lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(at), table.begin(), table.end());
  }

  std::string out = join_lines(lines, trailing_newline);
  // What was written must load and say what was measured.
  auto after = load_text(out, file);
  if (!after) return fail("the updated registry does not load: " + after.error().message);
  const Device* u = after->find(d->id);
  if (!u || !u->measured || !u->measured->read_gbs || !u->measured->copy_gbs || u->measured->cite != key ||
      fmt_fixed(*u->measured->read_gbs, 1) != read || fmt_fixed(*u->measured->copy_gbs, 1) != copy ||
      !u->measured->peaks.count("bf16") || fmt_fixed(u->measured->peaks.at("bf16"), 1) != bf16)
    return fail(fmt::format("{}: the updated registry does not hold the probe's figures for '{}'", file, d->id));
  return out;
}

}  // namespace met::device
