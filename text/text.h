// Small text helpers every library uses for its messages: UTF-8 checks, one-line
// printable forms of untrusted text, "file:line:col" locations, lists, did-you-mean
// hints and exact numbers. No dependencies beyond the standard library.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace sweep {

/// `v` with 17 significant digits, spelled exactly as printf's "%.17g" spells it in the C
/// locale ("0.10000000000000001", "1e+300", "-inf", "nan"), so that it reads back as the
/// same double; appended to `out`. Several times faster than snprintf (std::to_chars).
void append_exact_double(std::string& out, double v);

/// append_exact_double as a string of its own.
std::string exact_double(double v);

/// `v` to `digits` significant digits, as printf's "%.<digits>g" spells it ("0.00105",
/// "3e-04", "1.5e+06", "inf", "nan"): the one spelling of a figure shown to a reader (the
/// report's 6 digits, a plot's 4, a bin's 3), and of a value a search draws.
std::string significant(double v, int digits);

/// Length (1 to 4) of the valid UTF-8 sequence at s[i], or 0 when the bytes there are
/// not one: overlong forms, UTF-16 surrogates and code points past U+10FFFF are invalid.
size_t utf8_length(const std::string& s, size_t i);

/// True when all of `s` is valid UTF-8 (by utf8_length's rules).
bool valid_utf8(const std::string& s);

/// `s` as a JSON string, quotes included: `"` and `\` escaped, \n \r \t by name and every
/// other control character as \u00NN; valid UTF-8 kept as it is, and each byte that starts
/// no valid sequence replaced by \ufffd (JSON text is UTF-8). The one JSON string writer:
/// the report's JSON, the program declarations, the serve endpoints.
std::string json_quoted(const std::string& s);
/// json_quoted of each item, as a JSON array: ["a", "b"].
std::string json_string_array(const std::vector<std::string>& items);

/// `s` as it may appear in a one-line message: control characters and bytes that are not
/// UTF-8 become \xNN, characters a terminal shows as nothing (zero-width, bidi marks, the
/// byte-order mark, soft hyphen, C1 controls) become \u{NNNN}, and long text is cut.
std::string printable(const std::string& s);

/// `s` as printable() escapes it, but whole (no cut) and keeping its line breaks and tabs:
/// for text of unknown origin (a program's log tail, its last line) shown on a terminal
/// or in Markdown, where an ESC sequence or a bidi override must not act.
std::string printable_lines(const std::string& s);

/// "source:line:col" from a 0-based line and column (as YAML parsers count), printed
/// 1-based as editors count.
std::string source_location(const std::string& source, int line0, int column0);

/// The items separated by `sep`: join({"a", "b"}) is "a, b".
std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");

/// The pieces of `s` between each `sep`: split("a,b", ',') is {"a", "b"}; split("", ',') is {}.
std::vector<std::string> split(const std::string& s, char sep);

/// Closest known key to `key` by edit distance, or "" when nothing is close. A bare leaf
/// name ("lr") matches a dotted key by its last part ("train.lr").
std::string closest_key(const std::string& key, const std::vector<std::string>& known);

/// " (did you mean 'PREFIXnear'?)" for the closest known key, or "" when none is close.
std::string did_you_mean(const std::string& key, const std::vector<std::string>& known, const std::string& prefix = "");

}  // namespace sweep
