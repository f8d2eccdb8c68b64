#pragma once

#include <stdexcept>
#include <string>

namespace parasync {

// Bad input from a user: flags, cluster files, data files, checkpoints. The
// message says what is wrong and what to do; callers print it and exit (a
// command-line tool) or show it (the app). Never thrown for programming errors.
class InputError : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

// A failure of the world, not of what the user typed: a server that does
// not answer, a peer that went. Command-line tools exit 1 for it and 2 for
// an InputError, so that a script can tell "fix the command" from "try
// again".
class Unavailable : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

} // namespace parasync
