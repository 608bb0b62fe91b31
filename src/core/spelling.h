// "Did you mean …?" for misspelt configuration keys.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zt {

// Levenshtein distance (insert, delete, substitute; a swap of two neighbours counts 1) between
// `a` and `b`, in bytes.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is within max(2, |word| / 4) edits, else "".
// Ties go to the first candidate.
std::string closest_match(std::string_view word, const std::vector<std::string_view>& candidates);

// `s` with the ASCII letters A-Z lowered (other bytes, UTF-8 included, as they are).
std::string ascii_lower(std::string s);

// " (did you mean 'x'?)" for closest_match's answer, or "" when there is none.
std::string did_you_mean(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace zt
