#include "text.h"

#include <algorithm>
#include <charconv>  // to_chars
#include <cstdio>

namespace sweep {

void append_exact_double(std::string& out, double v) {
  // C++17 specifies to_chars with a precision as printf's conversion in the C locale: the
  // same digits, exponent and spelling of inf and nan (TextTest.ExactDoubleIsPrintfs...).
  char buf[32];  // "-1.2345678901234567e-308": 24 characters
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 17);
  out.append(buf, r.ptr);
}

std::string significant(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string exact_double(double v) {
  std::string out;
  append_exact_double(out, v);
  return out;
}

size_t utf8_length(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8 either.
  if ((n == 2 && c < 0xc2) || (n == 3 && c == 0xe0 && b(i + 1) < 0xa0) || (n == 3 && c == 0xed && b(i + 1) >= 0xa0) ||
      (n == 4 && c == 0xf0 && b(i + 1) < 0x90) || (n == 4 && (c > 0xf4 || (c == 0xf4 && b(i + 1) >= 0x90))))
    return 0;
  return n;
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0, n = 0; i < s.size(); i += n)
    if ((n = utf8_length(s, i)) == 0) return false;
  return true;
}

std::string json_quoted(const std::string& s) {
  std::string out = "\"";
  out.reserve(s.size() + 2);
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_length(s, i);
      out += n ? s.substr(i, n) : "\\ufffd";
      i += n ? n : 1;
      continue;
    }
    ++i;
    if (c == '"' || c == '\\') {
      out += '\\', out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string json_string_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + json_quoted(items[i]);
  return out + "]";
}

namespace {

/// Code point of the valid UTF-8 sequence of `n` bytes at s[i].
char32_t code_point(const std::string& s, size_t i, size_t n) {
  const auto b = [&](size_t k) { return char32_t(static_cast<unsigned char>(s[i + k])); };
  if (n == 1) return b(0);
  char32_t cp = b(0) & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (b(k) & 0x3f);
  return cp;
}

/// Characters a terminal shows as nothing (or that reorder the text around them), so a
/// quoted key holding one would look like a known key: C1 controls, soft hyphen,
/// zero-width and bidi marks, word joiners, the byte-order mark.
bool invisible(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0xad || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

// Cut and escaped so that an error stays one readable line in which every character shows.
namespace {

std::string escape(const std::string& s, size_t max_out, bool keep_lines) {
  std::string out;
  size_t i = 0;
  for (size_t n = 0; i < s.size() && out.size() < max_out; i += n) {
    n = utf8_length(s, i);
    const auto c = static_cast<unsigned char>(s[i]);
    char buf[16];
    if (keep_lines && (c == '\n' || c == '\t')) {
      out += char(c);
    } else if (n == 0 || c < 0x20 || c == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      n = 1;
    } else if (n > 1 && invisible(code_point(s, i, n))) {
      std::snprintf(buf, sizeof buf, "\\u{%x}", unsigned(code_point(s, i, n)));
      out += buf;
    } else {
      out.append(s, i, n);
    }
  }
  return i < s.size() ? out + "..." : out;
}

}  // namespace

std::string printable(const std::string& s) { return escape(s, 200, false); }

std::string printable_lines(const std::string& s) { return escape(s, std::string::npos, true); }

std::string source_location(const std::string& source, int line0, int column0) {
  return source + ":" + std::to_string(line0 + 1) + ":" + std::to_string(column0 + 1);
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? sep : "") + items[i];
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t at = 0;
  for (size_t end; (end = s.find(sep, at)) != std::string::npos; at = end + 1) out.push_back(s.substr(at, end - at));
  out.push_back(s.substr(at));
  return out;
}

std::string closest_key(const std::string& key, const std::vector<std::string>& known) {
  // A bare leaf name ("lr") is matched against the last segment of each key first.
  for (const auto& k : known) {
    auto dot = k.rfind('.');
    if (key.find('.') == std::string::npos && dot != std::string::npos && k.substr(dot + 1) == key) return k;
  }
  // A key under another section with the same name ("model.lr" for "train.lr").
  if (const auto dot = key.rfind('.'); dot != std::string::npos)
    for (const auto& k : known) {
      const auto kdot = k.rfind('.');
      if (kdot != std::string::npos && k.compare(kdot, std::string::npos, key, dot, std::string::npos) == 0) return k;
    }
  std::string best;
  size_t best_d = std::max<size_t>(2, key.size() / 3) + 1;
  for (const auto& k : known) {
    size_t d = edit_distance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  return best;
}

std::string did_you_mean(const std::string& key, const std::vector<std::string>& known, const std::string& prefix) {
  const std::string near = closest_key(key, known);
  return near.empty() ? "" : " (did you mean '" + prefix + near + "'?)";
}

}  // namespace sweep
