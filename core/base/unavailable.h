#pragma once

#include <stdexcept>

namespace parasync {

// A failure of the world, not of what the user typed (that is InputError,
// base/error.h): a server that does not answer, a peer that went.
// Command-line tools exit 1 for it and 2 for an InputError, so that a script
// can tell "fix the command" from "try again".
class Unavailable : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

} // namespace parasync
