// text/text.h: the one UTF-8 validator, printable text, locations, join, did-you-mean,
// exact numbers.
#include "text.h"

#include <gtest/gtest.h>

#include <cmath>    // ldexp, isnan, INFINITY, NAN
#include <cstdint>  // uint64_t
#include <cstdio>   // snprintf
#include <cstdlib>  // strtod
#include <cstring>  // memcpy, memcmp
#include <limits>
#include <random>  // mt19937_64: a fixed sequence of bit patterns
#include <string>
#include <vector>

#include "hex.h"

using sweep::append_exact_double;
using sweep::closest_key;
using sweep::did_you_mean;
using sweep::exact_double;
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

// Every exact number sweep writes (CSV, JSON, export, compare's verdicts, the record's
// header) is spelled as "%.17g" spelled it before: the same text for the same double,
// files unchanged byte for byte, and each reads back as the double it was.
TEST(ExactDouble, IsPrintfsSpellingAndReadsBackAsTheSameDouble) {
  const auto printf17 = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  std::vector<double> values = {0.0,
                                -0.0,
                                1.0,
                                0.1,
                                1.0 / 3,
                                1e16,
                                1e17,
                                123456789012345678.0,
                                -2.5e-300,
                                std::numeric_limits<double>::denorm_min(),
                                -std::numeric_limits<double>::denorm_min(),
                                std::numeric_limits<double>::min(),
                                std::numeric_limits<double>::max(),
                                -std::numeric_limits<double>::max(),
                                INFINITY,
                                -INFINITY,
                                NAN,
                                -NAN};
  std::mt19937_64 bits(7);  // any bit pattern: NaN payloads, subnormals, both signs
  for (int i = 0; i < 200000; ++i) {
    const uint64_t x = bits();
    double v;
    std::memcpy(&v, &x, sizeof v);
    values.push_back(v);
    values.push_back(std::ldexp(double(x >> 11) / double(uint64_t(1) << 53), int(x % 200) - 100));
  }
  for (const double v : values) {
    const std::string s = exact_double(v);
    ASSERT_EQ(s, printf17(v));
    std::string appended = "x,";
    append_exact_double(appended, v);
    ASSERT_EQ(appended, "x," + s);
    const double back = std::strtod(s.c_str(), nullptr);
    if (std::isnan(v)) {
      ASSERT_TRUE(std::isnan(back)) << s;
    } else {
      ASSERT_EQ(std::memcmp(&back, &v, sizeof v), 0) << s;
    }
  }
}

// One spelling of a 64-bit value everywhere (digests, checksums, a double's bits): the
// one printf gives with "%016llx", checked over edge values and a fixed random sequence.
TEST(Hex16, SpellsSixteenDigitsAsPrintfDoes) {
  EXPECT_EQ(sweep::hex16(0), "0000000000000000");
  EXPECT_EQ(sweep::hex16(0xdeadbeefULL), "00000000deadbeef");
  EXPECT_EQ(sweep::hex16(~uint64_t(0)), "ffffffffffffffff");
  std::mt19937_64 gen(7);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t v = gen();
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    ASSERT_EQ(sweep::hex16(v), buf);
  }
  EXPECT_EQ(sweep::double_bits(1.0), "3ff0000000000000");
  EXPECT_EQ(sweep::double_bits(-0.0), "8000000000000000");
  EXPECT_NE(sweep::double_bits(0.0), sweep::double_bits(-0.0));  // equal values, other bits
}
