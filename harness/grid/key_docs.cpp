#include "key_docs.h"

#include <algorithm>

namespace sweep {
namespace {

/// The default as a reader should take it: "" for empty text, "-" for none (an input-only key).
std::string shown_default(const KeyDoc& k) {
  if (!k.default_value.empty()) return k.default_value;
  return k.type == "text" ? "\"\"" : "-";
}

/// A Markdown table cell: '|' would end it.
std::string cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string render_keys_text(const std::vector<KeyDoc>& keys) {
  const std::vector<std::string> head = {"key", "type", "default", "range", "applies when", "meaning"};
  std::vector<std::vector<std::string>> rows = {head};
  for (const KeyDoc& k : keys)
    rows.push_back({k.key, k.type, shown_default(k), k.range, k.applies.empty() ? "always" : k.applies, k.help});
  std::vector<size_t> width(head.size(), 0);
  for (const auto& r : rows)
    for (size_t j = 0; j < r.size(); ++j) width[j] = std::max(width[j], r[j].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t j = 0; j < r.size(); ++j) {
      line += r[j];
      if (j + 1 < r.size()) line.append(width[j] - r[j].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string render_keys_markdown(const std::vector<KeyDoc>& keys, const std::string& kind) {
  std::string out =
      "# Run-config keys\n"
      "\n"
      "<!-- Generated from the key table (`visit_fields` in config/run_config.cpp); do not edit.\n"
      "Regenerate: build/bin/sweep keys --markdown > docs/config.md (a unit test fails while it differs). -->\n"
      "\n"
      "Every key of a run config of model kind `" +
      kind +
      "`, in canonical order (`sweep keys`\n"
      "prints the same as a table). A grid's `base` spells them as YAML sections (`train: {lr: 1.0e-3}`),\n"
      "its `grid`, `zip`, `include` and `exclude` as dotted keys (`train.lr`). Ranges are inclusive\n"
      "unless written with `(`; every value is checked before anything runs, and an unknown key gets\n"
      "a \"did you mean\".\n"
      "A registered model kind has `model.kind`, `model.vocab`, `model.seq_len` and its own keys\n"
      "instead of the decoder's: `sweep keys --trainer PROGRAM --model-kind KIND` lists them.\n"
      "\n"
      "**Applies when.** A key with a condition has no effect outside it (`data.seed` with\n"
      "`data.kind: text`). Set to anything but its default there, `sweep plan` and `sweep run` warn\n"
      "with the file and line, the key is put back to its default, and it does not change the run id:\n"
      "two points that differ only in such a key are one run. (`data.eval_path` and\n"
      "`train.eval_every` outside theirs are errors: they ask for an evaluation that cannot happen.)\n"
      "\n"
      "**Input only.** `train.min_lr_ratio` is not part of any run's config: it sets `train.min_lr`\n"
      "to the ratio times each point's `train.lr`, so a run id is the same as with that `train.min_lr`.\n"
      "\n"
      "The `fault.*` keys inject faults for the project's own tests; never set them in a real sweep.\n";
  std::string section;
  for (const KeyDoc& k : keys) {
    const std::string sec = k.key.substr(0, k.key.find('.'));
    if (sec != section) {
      section = sec;
      out += "\n## " + sec + "\n\n";
      out += "| Key | Type | Default | Range | Applies when | Meaning |\n";
      out += "|---|---|---|---|---|---|\n";
    }
    out += "| `" + k.key + "` | " + k.type + " | `" + cell(shown_default(k)) + "` | " + cell(k.range) + " | " +
           cell(k.applies.empty() ? "always" : k.applies) + " | " + cell(k.help) + " |\n";
  }
  return out;
}

}  // namespace sweep
