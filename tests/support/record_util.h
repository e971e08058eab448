// Shared by the record tests: the reader's error for a file, as text.
#pragma once

#include <filesystem>
#include <string>

#include "record.h"  // read_record, RecordError

namespace sweep_test {

/// The message of the RecordError read_record(path) throws; "" when it reads fine.
inline std::string read_error(const std::filesystem::path& p) {
  try {
    sweep::read_record(p.string());
  } catch (const sweep::RecordError& e) {
    return e.what();
  }
  return "";
}

}  // namespace sweep_test
