// Small string helpers shared by config, CLI and importers.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace topspin {

// Levenshtein distance (insert, delete, substitute each cost 1).
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is close enough to be a likely
// typo (distance <= max(1, |word| / 3)); nullopt otherwise. Ties go to the
// earlier candidate.
std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates);

// Splits on `sep`, keeping empty pieces.
std::vector<std::string> Split(std::string_view s, char sep);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
std::string_view Trim(std::string_view s);

}  // namespace topspin
