// The model kinds of a training program: `sweep` asks a train_main program (sweep-train, or
// a user's own, named by launch.trainer or --trainer) which kinds it offers and their keys,
// so a grid of that program's model is checked like any grid before anything starts.
#pragma once

#include <string>
#include <vector>

namespace sweep {

/// Runs `trainer --describe-models` (no shell, 60 s at most), registers the schemas it
/// prints in this process (model_schema.h) and returns the kinds it offers; runs it once
/// per path. Throws ConfigError starting with `what` (e.g. "launch.trainer 'bin/x'") when
/// the program is missing, not executable, fails, or prints no valid description.
std::vector<std::string> load_trainer_models(const std::string& trainer, const std::string& what);

}  // namespace sweep
