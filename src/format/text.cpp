#include "ggufkit/text.h"

#include <fmt/format.h>

namespace ggufkit {

size_t utf8_sequence(std::string_view s, size_t i, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const size_t n = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool is_terminal_control(char32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

namespace {

// Calls on(piece, cp, escape) for each character of s: a valid UTF-8 sequence with its code point,
// or one byte that is not UTF-8 (escape true, cp 0). Stops when on returns false.
template <typename F>
void each_char(std::string_view s, F&& on) {
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const size_t n = utf8_sequence(s, i, cp);
    const bool escape = n == 0 || is_terminal_control(cp);
    if (!on(s.substr(i, n == 0 ? 1 : n), cp, escape, n == 0)) return;
    i += n == 0 ? 1 : n;
  }
}

}  // namespace

bool needs_escape(std::string_view s) {
  bool found = false;
  each_char(s, [&](std::string_view, char32_t, bool escape, bool) { return !(found = escape); });
  return found;
}

std::string display_text(std::string_view s, size_t max_chars) {
  std::string out;
  size_t shown = 0;
  each_char(s, [&](std::string_view piece, char32_t cp, bool escape, bool invalid) {
    if (shown++ >= max_chars) {
      out += "…";
      return false;
    }
    if (!escape) {
      out += piece;
    } else if (invalid) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(piece[0]));  // not UTF-8: the byte
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x80) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else {
      out += fmt::format("\\u{{{:04x}}}", static_cast<unsigned>(cp));
    }
    return true;
  });
  return out;
}

std::string escape_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  each_char(s, [&](std::string_view piece, char32_t, bool escape, bool) {
    if (piece == "\\") {
      out += "\\\\";
    } else if (escape) {
      for (const char c : piece) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += piece;
    }
    return true;
  });
  return out;
}

std::optional<std::string> unescape_text(std::string_view text) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out += text[i];
    } else if (i + 1 < text.size() && text[i + 1] == '\\') {
      out += '\\';
      ++i;
    } else if (i + 3 < text.size() && text[i + 1] == 'x' && hex(text[i + 2]) >= 0 && hex(text[i + 3]) >= 0) {
      out += static_cast<char>(hex(text[i + 2]) * 16 + hex(text[i + 3]));
      i += 3;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace ggufkit
