#pragma once
// Typed errors. Every failure a user can cause (bad config, bad layout, bad wire data, a
// library call that failed) ends as one of these, caught at the top of each program and
// printed as one line.
#include <stdexcept>
#include <string>

namespace astraflow {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A config file that cannot be used: the message names the file, line, key path, what was
// given and what is allowed.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// The rank-role layout does not fit the MPI world it was started in.
class LayoutError : public Error {
 public:
  using Error::Error;
};

// "host <h> rank <r>" of the calling process, for error messages from library wrappers.
// Before MPI is initialised the rank is taken from the launcher's environment, if any.
std::string processLocation();

}  // namespace astraflow
