// Nearest names for "did you mean" suggestions.
#include "ggufkit/nearest.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace ggufkit {

size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: two back for transpositions.
  const size_t n = b.size();
  std::vector<size_t> prev2(n + 1), prev(n + 1), cur(n + 1);
  for (size_t j = 0; j <= n; ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= n; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[n];
}

namespace {

std::string folded(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    if (c == '_' || c == '-' || c == ' ') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

template <typename Name>
std::optional<std::string> nearest(std::string_view word, std::span<const Name> candidates, NearestOptions options) {
  const std::string w = options.fold ? folded(word) : std::string(word);
  const size_t limit = std::clamp<size_t>(w.size() / 4, 1, 3);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const Name& c : candidates) {
    const std::string_view name(c);
    // Cheap bound first: the length difference alone.
    const size_t length_gap = name.size() > word.size() ? name.size() - word.size() : word.size() - name.size();
    if (!options.fold && length_gap >= best_distance) continue;
    const size_t d = edit_distance(w, options.fold ? folded(name) : std::string(name));
    if (d < best_distance) {
      best_distance = d;
      best = std::string(name);
    }
  }
  return best;
}

}  // namespace

std::optional<std::string> nearest_name(std::string_view word, std::span<const std::string> candidates,
                                        NearestOptions options) {
  return nearest(word, candidates, options);
}

std::optional<std::string> nearest_name(std::string_view word, std::span<const std::string_view> candidates,
                                        NearestOptions options) {
  return nearest(word, candidates, options);
}

std::string did_you_mean(const std::optional<std::string>& suggestion) {
  return suggestion ? " (did you mean " + *suggestion + "?)" : std::string();
}

}  // namespace ggufkit
