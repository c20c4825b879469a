// "Did you mean ...": the nearest names to an unknown one by edit distance, for error messages of
// every layer. Deterministic: candidates are ranked by distance, then by name.
#pragma once

#include <string>
#include <vector>

namespace met {

// Optimal string alignment distance (insert, delete, substitute, swap two neighbours), ASCII
// case-insensitive, so "H200" is one edit from nothing and "hardwre" one from "hardware".
int edit_distance(const std::string& a, const std::string& b);

// The candidates close enough to `word` to be what was meant: distance at most max(1, len/3) of
// the longer name, or one a prefix of the other (ranked between one and two edits); only those
// at the best rank, by name, at most three.
std::vector<std::string> near_names(const std::string& word, const std::vector<std::string>& candidates);

// "did you mean 'a' or 'b'? (known: ...)" when something is near, else "(known: ...)". The list
// is `listed` when given (device ids, while aliases are suggested too), else the candidates.
std::string suggest(const std::string& word, const std::vector<std::string>& candidates,
                    const std::vector<std::string>& listed = {});
// The same sentence for names already chosen (ids that near aliases stand for).
std::string did_you_mean(const std::vector<std::string>& near, const std::vector<std::string>& listed);

}  // namespace met
