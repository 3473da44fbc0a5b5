// The one escaping rule (ggufkit/text.h): which characters are escaped, the display spelling, and the
// reversible spelling that reads back to the same bytes, for every byte value and the controls
// that take several bytes.
#include <gtest/gtest.h>

#include <string>

#include "ggufkit/json.h"
#include "ggufkit/text.h"

namespace {

using ggufkit::display_text;
using ggufkit::escape_text;
using ggufkit::needs_escape;
using ggufkit::unescape_text;

TEST(Text, DisplaySpelling) {
  EXPECT_EQ(display_text("plain é ✓ \\x"), "plain é ✓ \\x");
  EXPECT_EQ(display_text("a\nb\tc\rd\x1b[2J\x7f"), "a\\nb\\tc\\rd\\x1b[2J\\x7f");
  EXPECT_EQ(display_text("\xc2\x9b\xe2\x80\xae\xe2\x81\xa6\xd8\x9c\xe2\x80\x8e"), "\\u{009b}\\u{202e}\\u{2066}\\u{061c}\\u{200e}");
  EXPECT_EQ(display_text("\x9b\xff\xc0\x80\xed\xa0\x80"), "\\x9b\\xff\\xc0\\x80\\xed\\xa0\\x80");  // not UTF-8
  EXPECT_EQ(display_text("abcdef", 3), "abc…");
  EXPECT_EQ(display_text("ab", 2), "ab");
}

TEST(Text, NeedsEscape) {
  EXPECT_FALSE(needs_escape("blk.0.attn_q.weight é \\"));
  for (const std::string s : {"\n", "\x1b", "\x7f", "\xc2\x85", "\xe2\x80\xae", "\x9b", "\xff", "a\xe2\x80"}) {
    EXPECT_TRUE(needs_escape(s)) << display_text(s);
  }
}

// Every single byte, every two-byte string and the multi-byte controls read back exactly, and the
// escaped text needs no escape itself.
TEST(Text, EscapeReadsBackExactly) {
  std::vector<std::string> cases = {"", "a\\b", "\\x41", "\xe2\x80\xae\xe2\x81\xa9 é ✓", "\xc2\x9b\x9b"};
  for (int a = 0; a < 256; ++a) {
    cases.emplace_back(1, static_cast<char>(a));
    for (int b = 0; b < 256; b += 7) cases.push_back(std::string{static_cast<char>(a), static_cast<char>(b)});
  }
  for (const std::string& s : cases) {
    const std::string e = escape_text(s);
    EXPECT_FALSE(needs_escape(e)) << e;
    EXPECT_EQ(unescape_text(e), s) << e;
  }
  EXPECT_EQ(escape_text("a\\b\n\xe2\x80\xae"), "a\\\\b\\x0a\\xe2\\x80\\xae");
  EXPECT_EQ(unescape_text("\\q"), std::nullopt);
  EXPECT_EQ(unescape_text("\\x4"), std::nullopt);
  EXPECT_EQ(unescape_text("end\\"), std::nullopt);
  EXPECT_EQ(unescape_text("\\x4A\\x4a"), "JJ");
}

// JSON escapes the same controls: C0 as JSON requires, DEL, C1 and bidi as \u escapes.
TEST(Text, JsonEscapesEveryControl) {
  std::string out;
  EXPECT_TRUE(ggufkit::json::append_string(out, "a\x1b\x7f\xc2\x9b\xe2\x80\xae\xe2\x81\xa6 é"));
  EXPECT_EQ(out, "\"a\\u001b\\u007f\\u009b\\u202e\\u2066 é\"");
}

}  // namespace
