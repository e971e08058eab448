// The one error type of bad configuration: a grid, a run config, a launch section, a key.
// Its own header, so that code which only throws or catches it does not parse the schema.
#pragma once

#include <stdexcept>

namespace sweep {

/// A bad key or value; the message names the source, the line when known, and the key.
/// Every executable maps it to exit code 2.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace sweep
