// The run-config keys as `sweep keys` prints them: a text table for the terminal, and the
// Markdown that is docs/config.md (a unit test fails when the checked-in file differs).
#pragma once

#include <string>
#include <vector>

#include "run_config.h"  // KeyDoc, describe_keys

namespace sweep {

/// One row per key: key, type, default, range, when it applies, meaning; columns aligned.
std::string render_keys_text(const std::vector<KeyDoc>& keys);

/// docs/config.md: a table per section, with what "applies when" means for run ids.
/// `kind` names the model kind the keys are of.
std::string render_keys_markdown(const std::vector<KeyDoc>& keys, const std::string& kind);

}  // namespace sweep
