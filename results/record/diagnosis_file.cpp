#include "diagnosis_file.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace fs = std::filesystem;

namespace sweep {

std::string newest_diagnosis(const std::string& run_dir) {
  std::error_code ec;
  int newest = 0;
  for (fs::directory_iterator it(fs::path(run_dir) / "diagnose", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos || name.size() > 9) continue;
    if (fs::exists(it->path() / "verdict.txt", ec)) newest = std::max(newest, std::stoi(name));
  }
  if (newest == 0) return "";
  const std::string path = (fs::path(run_dir) / "diagnose" / std::to_string(newest) / "verdict.txt").string();
  // Never a FIFO or a device someone planted there (opening one could block, reading it
  // never end): file_size answers only for a regular file (a link followed to one), and
  // only a file of sane size is read, only its head.
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > (1u << 20)) return "";
  std::ifstream in(path, std::ios::binary);
  std::string text;
  if (!std::getline(in, text) || text != kVerdictMagic) return "";
  for (int lines = 0; lines < 8 && std::getline(in, text); ++lines)
    if (text.rfind("line ", 0) == 0) return text.substr(5) + " (" + path + ")";
  return "";
}

}  // namespace sweep
