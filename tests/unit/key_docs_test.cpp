// docs/config.md is what `sweep keys --markdown` prints from the key table today, and the
// text table has a row per key.
#include "key_docs.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "test_util.h"  // EXPECT_CONTAINS

namespace sweep {
namespace {

TEST(KeyDocs, TheCheckedInConfigDocIsWhatTheKeyTableGenerates) {
  const std::string path = std::string(SWEEP_SOURCE_DIR) + "/docs/config.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string have = ss.str(), want = render_keys_markdown(describe_keys("decoder"), "decoder");
  if (have == want) return;
  // Name the first line that differs: the whole files would drown it.
  std::istringstream a(have), b(want);
  std::string la, lb;
  int line = 0;
  while (true) {
    ++line;
    const bool more_a = bool(std::getline(a, la)), more_b = bool(std::getline(b, lb));
    if (!more_a && !more_b) break;
    if (!more_a || !more_b || la != lb) break;
  }
  FAIL() << "docs/config.md differs from the key table (config/run_config.cpp) at line " << line
         << ";\n  in the file:      " << la << "\n  generated:        " << lb
         << "\nregenerate it: build/bin/sweep keys --markdown > docs/config.md";
}

TEST(KeyDocs, TheTextTableHasAHeaderAndOneAlignedRowPerKey) {
  const std::vector<KeyDoc> keys = describe_keys("decoder");
  const std::string text = render_keys_text(keys);
  std::istringstream in(text);
  std::string header, row;
  std::getline(in, header);
  EXPECT_EQ(header.rfind("key ", 0), 0u) << header;
  const size_t type_col = header.find("type");
  size_t rows = 0;
  while (std::getline(in, row)) {
    ASSERT_EQ(row.rfind(keys[rows].key, 0), 0u) << row;
    EXPECT_EQ(row.substr(type_col, keys[rows].type.size()), keys[rows].type) << row;
    ++rows;
  }
  EXPECT_EQ(rows, keys.size());
  EXPECT_CONTAINS(text, "data.kind synthetic");
  EXPECT_CONTAINS(text, "always");
}

TEST(KeyDocs, MarkdownCellsEscapeTheirPipes) {
  const std::string md = render_keys_markdown({{"a.b", "choice", "x", "x | y", "", "one | two"}}, "decoder");
  EXPECT_CONTAINS(md, "| `a.b` | choice | `x` | x \\| y | always | one \\| two |\n");
}

}  // namespace
}  // namespace sweep
