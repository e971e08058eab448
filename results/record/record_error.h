// The one error type of records and run files that cannot be written or read. Its own
// header, so that run_files.h (which the record writer uses) need not include record.h.
#pragma once

#include <stdexcept>

namespace sweep {

/// A record that cannot be written or read; the message names the path and what to do.
class RecordError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace sweep
