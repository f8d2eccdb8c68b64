#pragma once

// "Did you mean --learning_rate?": the known name nearest a mistyped one,
// for both programs' unknown-flag errors.

#include <string>
#include <vector>

namespace parasync {

// The name of `known` fewest single-character edits from `unknown`, when
// it is near enough to be a typo (at most a third of the word, at least 2
// edits allowed); empty otherwise.
std::string nearestName(const std::string &unknown, const std::vector<std::string> &known);

} // namespace parasync
