// `sweep keys`: every run-config key with its type, default, range, when it applies and
// what it means, from the key table itself; `--markdown` writes docs/config.md.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli.h"
#include "key_docs.h"
#include "model_schema.h"    // kDecoderKind, model_kinds
#include "trainer_models.h"  // load_trainer_models

namespace sweep {
namespace {

struct KeysOptions {
  bool markdown = false;
  std::string kind = kDecoderKind;
  std::string trainer;
};

int run_keys(const KeysOptions& o) {
  if (!o.trainer.empty()) (void)load_trainer_models(o.trainer, "--trainer '" + printable(o.trainer) + "'");
  const std::vector<std::string> kinds = model_kinds();
  if (std::find(kinds.begin(), kinds.end(), o.kind) == kinds.end())
    throw ConfigError("--model-kind: unknown model kind '" + printable(o.kind) + "'" + did_you_mean(o.kind, kinds) +
                      "; known: " + join(kinds) +
                      (o.trainer.empty() ? " (a program's own kind: name the program with --trainer)" : ""));
  const std::vector<KeyDoc> keys = describe_keys(o.kind);
  const std::string text = o.markdown ? render_keys_markdown(keys, o.kind) : render_keys_text(keys);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

CliAction setup_keys(CLI::App& app) {
  auto o = std::make_shared<KeysOptions>();
  auto* cmd = app.add_subcommand("keys", "every run-config key: type, default, range, when it applies, meaning");
  cmd->add_flag("--markdown", o->markdown, "Markdown tables (the content of docs/config.md)");
  cmd->add_option("--model-kind", o->kind, "the keys of this model kind (default: decoder)");
  cmd->add_option("--trainer", o->trainer, "a training program whose model kinds --model-kind may name");
  return [o, cmd] { return cmd->parsed() ? run_keys(*o) : -1; };
}

}  // namespace sweep
