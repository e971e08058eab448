#include "trainer_models.h"

#include <unistd.h>

#include <map>
#include <stdexcept>

#include "config_error.h"  // ConfigError
#include "model_schema.h"  // parse_models_yaml, register_model_schema
#include "process.h"       // capture
#include "text.h"          // printable

namespace sweep {

std::vector<std::string> load_trainer_models(const std::string& trainer, const std::string& what) {
  static std::map<std::string, std::vector<std::string>> loaded;  // path -> the kinds it offers
  if (auto it = loaded.find(trainer); it != loaded.end()) return it->second;
  if (::access(trainer.c_str(), X_OK) != 0)
    throw ConfigError(what +
                      ": not found or not executable; expected a training program (sweep-train, or one "
                      "built on sweep::train_main)");
  // A schema is a few KB: the output is bounded, so a program that prints for ever costs
  // 4 MiB and the timeout, never the driver's memory.
  constexpr size_t kMaxDescription = size_t(4) << 20;
  CaptureOptions options;
  options.timeout_s = 60;
  options.max_output_bytes = kMaxDescription;
  Captured c;
  try {
    c = capture({trainer, "--describe-models"}, options);
  } catch (const std::exception& e) {
    throw ConfigError(what + ": cannot start it: " + e.what());
  }
  if (c.truncated)
    throw ConfigError(what + ": --describe-models printed more than 4 MiB" +
                      (c.timed_out ? " and was stopped after 60 s" : "") +
                      " (a description of model kinds is a few KB); is it a program built on sweep::train_main?");
  if (c.timed_out)
    throw ConfigError(what +
                      ": --describe-models did not finish within 60 s and was stopped; is it a program built "
                      "on sweep::train_main?");
  if (!c.status.ok()) {
    std::string out = c.output;
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    const size_t nl = out.rfind('\n');
    throw ConfigError(what + ": --describe-models failed (" + c.status.describe() + ")" +
                      (out.empty() ? "" : ": " + printable(nl == std::string::npos ? out : out.substr(nl + 1))) +
                      "; is it a program built on sweep::train_main?");
  }
  ModelsDescription d;
  try {
    d = parse_models_yaml(c.output, what + " --describe-models");
    for (const ModelSchema& s : d.models) register_model_schema(s);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(what + ": " + e.what());
  }
  return loaded.emplace(trainer, d.offers).first->second;
}

}  // namespace sweep
