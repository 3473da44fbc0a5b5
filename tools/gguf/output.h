// Shared pieces of the gguf tool: exit codes, error reporting, number formatting.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ggufkit/error.h"
#include "ggufkit/reader.h"

namespace gguf_cli {

// The CLI's exit codes (same for every verb).
enum ExitCode : int { kOk = 0, kProblemFound = 1, kUsageOrIoError = 2 };

// "gguf: FILE: offset N: 'key': message" on stderr.
void report_error(std::string_view file, const ggufkit::Error& error);

// Opens a file, reporting any error; nullopt when it could not be read.
std::optional<ggufkit::GgufFile> open_or_report(const std::string& path);

// Writes a verb's whole result to stdout and flushes it: kOk, or kUsageOrIoError with one line on
// stderr when stdout cannot take it (a full disk, a closed pipe).
int write_result(std::string_view text);

// Long verbs (quantize, convert): SIGINT and SIGTERM set interrupt_flag() instead of killing the
// process, so that the library can stop and remove its temporary file; the verb then exits 130.
std::atomic<bool>& interrupt_flag();
void watch_interrupts();
inline constexpr int kInterrupted = 130;

// A value's type as dump and diff print it: "uint32", "string[512]".
std::string value_type_text(const ggufkit::ValueView& v);

// 1536 -> "1.50 KiB"
std::string human_bytes(uint64_t bytes);
// 5123456 -> "5.12M"
std::string human_count(uint64_t n);
// Shortens s to at most max characters (UTF-8 aware enough for display), escaping control bytes.
std::string shorten_for_display(std::string_view s, size_t max);

}  // namespace gguf_cli
