// text/text.h: the one UTF-8 validator, printable text, locations, join, did-you-mean.
#include "text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using sweep::closest_key;
using sweep::did_you_mean;
using sweep::join;
using sweep::printable;
using sweep::printable_lines;
using sweep::source_location;
using sweep::split;
using sweep::utf8_length;
using sweep::valid_utf8;

TEST(Utf8, AcceptsEveryWellFormedLength) {
  EXPECT_EQ(utf8_length("a", 0), 1u);
  EXPECT_EQ(utf8_length("\u00e9", 0), 2u);      // é
  EXPECT_EQ(utf8_length("\u4e2d", 0), 3u);      // 中
  EXPECT_EQ(utf8_length("\U0001F600", 0), 4u);  // emoji
  EXPECT_EQ(utf8_length("\U0010FFFF", 0), 4u);  // the last code point
  EXPECT_TRUE(valid_utf8("caf\u00e9 \u4e2d \U0001F600"));
  EXPECT_TRUE(valid_utf8(""));
}

TEST(Utf8, RejectsOverlongSurrogatesTooLargeAndTruncated) {
  EXPECT_EQ(utf8_length("\xc0\xaf", 0), 0u);          // overlong '/'
  EXPECT_EQ(utf8_length("\xc1\xbf", 0), 0u);          // overlong 2-byte
  EXPECT_EQ(utf8_length("\xe0\x80\xaf", 0), 0u);      // overlong 3-byte
  EXPECT_EQ(utf8_length("\xf0\x80\x80\xaf", 0), 0u);  // overlong 4-byte
  EXPECT_EQ(utf8_length("\xed\xa0\x80", 0), 0u);      // U+D800, a UTF-16 surrogate
  EXPECT_EQ(utf8_length("\xed\xbf\xbf", 0), 0u);      // U+DFFF
  EXPECT_EQ(utf8_length("\xf4\x90\x80\x80", 0), 0u);  // U+110000
  EXPECT_EQ(utf8_length("\xf5\x80\x80\x80", 0), 0u);
  EXPECT_EQ(utf8_length("\xe4\xb8", 0), 0u);  // 中 cut short
  EXPECT_EQ(utf8_length("\x80", 0), 0u);      // a lone continuation byte
  EXPECT_EQ(utf8_length("\xc3\x28", 0), 0u);  // continuation byte missing
  EXPECT_FALSE(valid_utf8("ok\xff"));
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));
}

TEST(Printable, EscapesWhatATerminalWouldHideAndCutsLongText) {
  EXPECT_EQ(printable("a\tb\x7f"), "a\\x09b\\x7f");
  EXPECT_EQ(printable("bad\xff"), "bad\\xff");
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate is bytes, not a character
  EXPECT_EQ(printable("a\u200bb\ufeff"), "a\\u{200b}b\\u{feff}");
  EXPECT_EQ(printable("caf\u00e9"), "caf\u00e9");
  const std::string cut = printable(std::string(1000, 'x'));
  EXPECT_EQ(cut, std::string(200, 'x') + "...");
  EXPECT_EQ(printable(std::string(200, 'x')), std::string(200, 'x'));
}

TEST(Printable, LinesKeepTheirBreaksAndLengthButNoControlActs) {
  // A program's log tail: an OSC title sequence, a bidi override, a bell; lines and tabs stay.
  EXPECT_EQ(printable_lines("ok\tline\n\x1b]0;pwned\x07 \u202eevil\n"), "ok\tline\n\\x1b]0;pwned\\x07 \\u{202e}evil\n");
  EXPECT_EQ(printable_lines(std::string(1000, 'x')), std::string(1000, 'x'));  // not cut
  EXPECT_EQ(printable_lines("\r"), "\\x0d");
}

TEST(SourceLocation, CountsFromOneAsEditorsDo) {
  EXPECT_EQ(source_location("grid.yaml", 0, 0), "grid.yaml:1:1");
  EXPECT_EQ(source_location("a/b.yaml", 11, 4), "a/b.yaml:12:5");
}

TEST(Split, KeepsEmptyPiecesAndGivesNothingForNothing) {
  EXPECT_EQ(split("", ','), std::vector<std::string>{});
  EXPECT_EQ(split("a", ','), std::vector<std::string>{"a"});
  EXPECT_EQ(split("a,b,,c", ','), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(split("a,", ','), (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(join(split("x,y,z", ','), ","), "x,y,z");
}

TEST(Join, SeparatesItemsOnly) {
  EXPECT_EQ(join({}), "");
  EXPECT_EQ(join({"a"}), "a");
  EXPECT_EQ(join({"a", "b", "c"}), "a, b, c");
  EXPECT_EQ(join({"x", "y"}, " | "), "x | y");
}

TEST(DidYouMean, NamesTheClosestKeyOrNothing) {
  const std::vector<std::string> keys = {"train.lr", "train.steps", "model.layers"};
  EXPECT_EQ(closest_key("train.stesp", keys), "train.steps");
  EXPECT_EQ(closest_key("lr", keys), "train.lr");  // a bare leaf matches its dotted key
  EXPECT_EQ(closest_key("totally.different", keys), "");
  EXPECT_EQ(did_you_mean("train.stesp", keys), " (did you mean 'train.steps'?)");
  EXPECT_EQ(did_you_mean("layrs", {"layers"}, "model."), " (did you mean 'model.layers'?)");
  EXPECT_EQ(did_you_mean("totally.different", keys), "");
}
