#include "run_status.h"

#include <array>

namespace sweep {
namespace {

constexpr std::array<const char*, 9> kWords = {"pending", "running",     "completed", "diverged", "stopped",
                                               "failed",  "interrupted", "damaged",   "stale"};

}  // namespace

const char* status_name(RunStatus s) { return kWords[static_cast<size_t>(s)]; }

std::optional<RunStatus> parse_status(std::string_view word) {
  for (size_t i = 0; i < kWords.size(); ++i)
    if (word == kWords[i]) return static_cast<RunStatus>(i);
  return std::nullopt;
}

RunStatus status_or(std::string_view word, RunStatus otherwise) { return parse_status(word).value_or(otherwise); }

bool status_is(std::string_view word, RunStatus s) { return word == status_name(s); }

bool is_finished(RunStatus s) {
  return s == RunStatus::completed || s == RunStatus::diverged || s == RunStatus::stopped;
}

}  // namespace sweep
