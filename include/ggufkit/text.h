// Text from a file shown to people or written into a line-based format: the one rule for which
// characters are escaped (terminal controls and bytes that are not UTF-8) and its two spellings,
// one for display and one that reads back to the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ggufkit {

// The length of the valid UTF-8 sequence at s[i] and its code point; 0 when the bytes there are
// not one (a stray continuation byte, a truncated or overlong sequence, a surrogate, past U+10FFFF).
size_t utf8_sequence(std::string_view s, size_t i, char32_t& cp);

// Characters a terminal acts on instead of showing: C0 controls, DEL, C1 controls (U+0080-U+009F)
// and the bidirectional controls that reorder what follows (U+061C, U+200E/F, U+202A-E,
// U+2066-9): a name could otherwise move the cursor, forge a line or hide text.
bool is_terminal_control(char32_t cp);

// Whether `s` has a terminal control or a byte that is not UTF-8 (what both spellings escape).
bool needs_escape(std::string_view s);

// For people, shortened to at most `max_chars` characters ("…" after): newline, tab and CR as \n
// \t \r, other C0 controls and DEL as \xNN, C1 and bidirectional controls as \u{NNNN}, bytes that
// are not UTF-8 as \xNN. Not reversible (a backslash stays as it is).
std::string display_text(std::string_view s, size_t max_chars = SIZE_MAX);

// For a line-based file format (hash manifests): '\' as \\ and every byte of a terminal control or
// of invalid UTF-8 as \xNN; unescape_text reads it back to the same bytes (nullopt on a backslash
// that is neither \\ nor \xNN).
std::string escape_text(std::string_view s);
std::optional<std::string> unescape_text(std::string_view s);

}  // namespace ggufkit
