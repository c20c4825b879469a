// Shuffling the array-of-tables of a TOML file, for determinism tests: the planner's output must
// not depend on the order of [[device]], [[rule]], [[family]] or [[instance]] tables.
#pragma once

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "planner/real_tree.hpp"

namespace met::testing {

// A TOML file cut around its [[name]] tables: what comes before the first one, each [[name]] table
// with its sub-tables ([name.x]) and the comment lines that follow it, and what follows from the
// first other table header on.
struct TableBlocks {
  std::string head;
  std::vector<std::string> blocks;
  std::string tail;
};

// The name of a table header line ("[[device]]" -> "device", "[device.peaks]" -> "device.peaks"),
// or "" when the line is not a header.
inline std::string header_name(const std::string& line) {
  if (line.empty() || line[0] != '[') return "";
  std::size_t b = line.rfind('[', 1) == 1 ? 2 : 1;
  const std::size_t e = line.find(']', b);
  if (e == std::string::npos) return "";
  return line.substr(b, e - b);
}

inline TableBlocks split_tables(const std::string& text, const std::string& name) {
  TableBlocks out;
  enum { head, blocks, tail } state = head;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    end = end == std::string::npos ? text.size() : end + 1;
    std::string line = text.substr(pos, end - pos);
    if (line.back() != '\n') line += '\n';
    pos = end;
    const std::string h = header_name(line);
    const bool starts_block = line.rfind("[[" + name + "]]", 0) == 0;
    if (state != tail && starts_block) {
      state = blocks;
      out.blocks.push_back(line);
      continue;
    }
    if (state == blocks && !h.empty() && h != name && h.rfind(name + ".", 0) != 0) state = tail;
    if (state == head) out.head += line;
    else if (state == blocks) out.blocks.back() += line;
    else out.tail += line;
  }
  return out;
}

// The same file with its [[name]] tables in another order (fixed seed; never the identity when
// there are two or more).
inline std::string shuffle_tables(const std::string& text, const std::string& name, unsigned seed) {
  TableBlocks t = split_tables(text, name);
  std::vector<std::string> order = t.blocks;
  std::mt19937 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  if (order == t.blocks) std::reverse(order.begin(), order.end());
  std::string out = t.head;
  for (const auto& b : order) out += b;
  return out + t.tail;
}

// Every array-of-tables the planner reads, shuffled: devices, rules, families, instances.
inline MemTree shuffled_tree(unsigned seed) {
  MemTree tree = real_tree();
  int changed = 0;
  for (auto& file : tree.files()) {
    const std::string& path = file.first;
    std::string& bytes = file.second;
    std::string name;
    if (path == "DEVICES.toml") name = "device";
    else if (path == "circuits/INSTANCES.toml") name = "instance";
    else if (path.size() > 13 && path.substr(path.size() - 13) == "/FUSIONS.toml") name = "rule";
    else if (path.size() > 21 && path.substr(path.size() - 21) == "/KERNEL_FAMILIES.toml") name = "family";
    if (name.empty()) continue;
    const std::string before = bytes;
    bytes = shuffle_tables(bytes, name, seed);
    if (split_tables(before, name).blocks.size() > 1) {
      CHECK_MESSAGE(bytes != before, path);
      ++changed;
    }
    CHECK_MESSAGE(bytes.size() == before.size(), path);  // a permutation of lines, nothing lost
  }
  CHECK(changed >= 6);
  return tree;
}

}  // namespace met::testing
