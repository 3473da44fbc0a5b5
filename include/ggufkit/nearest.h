// "Did you mean": the nearest of a set of names to a misspelt one (a verb, an option, a type or
// preset name, a key, a tensor), for messages that suggest the fix.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ggufkit {

// Optimal string alignment distance: insertions, deletions, substitutions and transpositions of
// two adjacent characters each count 1 ("lenght" is 1 from "length").
size_t edit_distance(std::string_view a, std::string_view b);

struct NearestOptions {
  // Compare case-insensitively, ignoring '_', '-' and ' ' ("q4km" and "Q4KM" are Q4_K_M).
  bool fold = false;
};
// The candidate nearest to `word`, when it is close enough to be a misspelling of it: within a
// quarter of the word's length (at least 1, at most 3 edits). Ties go to the earlier candidate. An
// exact match is returned too (a caller that looks up first never gets one).
std::optional<std::string> nearest_name(std::string_view word, std::span<const std::string> candidates,
                                        NearestOptions options = {});
std::optional<std::string> nearest_name(std::string_view word, std::span<const std::string_view> candidates,
                                        NearestOptions options = {});
// " (did you mean X?)", or empty when there is no suggestion.
std::string did_you_mean(const std::optional<std::string>& suggestion);

}  // namespace ggufkit
