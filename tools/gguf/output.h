// Shared pieces of the gguf tool: exit codes, error reporting, number formatting.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "ggufkit/atomic_file.h"
#include "ggufkit/error.h"
#include "ggufkit/nearest.h"
#include "ggufkit/reader.h"
#include "ggufkit/split.h"

namespace gguf_cli {

// The CLI's exit codes (same for every verb).
enum ExitCode : int { kOk = 0, kProblemFound = 1, kUsageOrIoError = 2 };

// "gguf: FILE: offset N: 'key': message [code]" on stderr; FILE is the error's own file when it
// has one, and "offset N: " is there when the error has a place in the file.
void report_error(std::string_view file, const ggufkit::Error& error);

// Opens a file, reporting any error; nullopt when it could not be read. A remote address
// (http://, https://, hf://) gives its header as a header view (remote_input.cpp).
std::optional<ggufkit::GgufFile> open_or_report(const std::string& path, const ggufkit::OpenOptions& options = {});
// A local model (SplitModel::open) or a remote file's header as a model of one shard.
ggufkit::Expected<ggufkit::SplitModel> open_model(const std::string& path, const ggufkit::OpenOptions& options);
// --token, --timeout and --max-header of the verbs that read remote headers.
void add_remote_options(CLI::App& verb);
std::optional<ggufkit::GgufFile> open_remote_or_report(const std::string& address, const ggufkit::OpenOptions& options);
// One tensor of a remote file, fetched alone (ggufkit::fetch_remote_tensor), reporting any error.
std::optional<ggufkit::GgufFile> fetch_remote_tensor_or_report(const std::string& address, const ggufkit::GgufFile& header,
                                                               const ggufkit::TensorInfo& tensor);

// The reading options of the verbs that show metadata (info, dump, get): a metadata-only file
// (tensor infos without data) opens, and they say the data is absent. The verbs that need the data
// open with the defaults, which refuse such a file.
ggufkit::OpenOptions metadata_only_ok();
// What the text output appends for a file without tensor data.
inline constexpr std::string_view kNoTensorData = " · tensor data absent (a metadata-only file)";
// kNoTensorData for a metadata-only file; nothing for a file with its data, or a remote header
// view (the data is on the server; its text reads as the local file's).
inline std::string_view no_tensor_data_note(const ggufkit::GgufFile& f) {
  return f.has_tensor_data() || f.header_only() ? std::string_view() : kNoTensorData;
}

// Whether every output may be written under `policy` (AtomicFile::check); reports the first that
// may not. Verbs call it before any work, dry runs included, so that a refusal comes first.
bool outputs_allowed(const std::vector<std::filesystem::path>& outputs, const ggufkit::OutputPolicy& policy);

// Writes a verb's whole result to stdout and flushes it: kOk, or kUsageOrIoError with one line on
// stderr when stdout cannot take it (a full disk, a closed pipe).
int write_result(std::string_view text);
// The verb's exit status once everything it printed has reached stdout: `status`, or kUsageOrIoError
// with one line on stderr when some output could not be written (main calls it after every verb).
int finish_output(int status);
// Reports that stdout failed with `err` (nothing for a closed pipe) and returns kUsageOrIoError; once
// the verb has written its output (note_written), a warning instead, and `status_when_written`.
int output_failed(int err, int status_when_written = kOk);
// After a verb has committed its output: from then on a failure of stdout (printing the output's
// path to a full disk, a closed stdout) no longer makes the exit status 2, which scripts read as
// "nothing written"; the status stays the verb's, with one line on stderr:
// "gguf: VERB: warning: OUTPUT was written, but stdout failed: REASON" (nothing for a closed pipe).
void note_written(std::string_view verb, std::string_view output);

// Whether progress goes to stderr: as --progress / --quiet say (add_progress_flags), else always /
// never as the environment variable GGUFKIT_PROGRESS says ("always", "never"), else when stderr is
// a terminal. Results never depend on it.
bool progress_enabled();
enum class ProgressMode : uint8_t { automatic, always, never };
void set_progress_mode(ProgressMode mode);
// --progress (progress on stderr even when it is not a terminal: a CI log) and --quiet/-q (none)
// for a verb that shows progress; `quiet`, when given, is also set by --quiet (quantize's closing
// figures).
void add_progress_flags(CLI::App& cmd, bool* quiet = nullptr);

// Long verbs (quantize, convert): SIGINT and SIGTERM set interrupt_flag() instead of killing the
// process, so that the library can stop and remove its temporary file; the verb then exits 130.
std::atomic<bool>& interrupt_flag();
void watch_interrupts();
inline constexpr int kInterrupted = 130;

// The exit status of a verb that wrote `output`: 0 (and note_written, unless `wrote` is false: the
// library found nothing to write); 130 and "gguf: VERB: interrupted; OUTPUT was not written" when
// SIGINT/SIGTERM stopped it before the output was committed (watch_interrupts, the library's cancel
// flag interrupt_flag(), which the library reads up to the rename); else 2 with the error, reported
// against `error_file` unless it names its own.
int write_status(std::string_view verb, const ggufkit::Expected<void>& result, std::string_view output,
                 std::string_view error_file, bool wrote = true);

// The one progress display of every long verb: "[DONE/ALL] PCT%  ESTIMATE  WHAT", on stderr when
// progress_enabled(). The fraction is `done_weight / all_weight` (bytes when the caller has them,
// else items); the estimate of the time left appears after a second and 2% of the work. On a
// terminal the line is rewritten in place (and ended when the work is done); elsewhere (--progress
// into a log) one line per item, or for byte-level updates at most one a second. Nothing is shown
// for work that ends within a second when the updates are byte-level.
class Progress {
 public:
  Progress();
  // An item finished: item `done` of `all` (1-based), weighing `done_weight` of `all_weight` so far.
  void item(uint64_t done, uint64_t all, uint64_t done_weight, uint64_t all_weight, std::string_view what) const;
  // Movement inside item `current` of `all` (1-based; the item is not finished): on a terminal at
  // most ten times a second, into a log at most once a second; nothing in the first second.
  void moving(uint64_t current, uint64_t all, uint64_t done_weight, uint64_t all_weight, std::string_view what) const;
  // Byte-level movement (inside a long copy): shown at most once a second, and the last update.
  void bytes(uint64_t done, uint64_t all, std::string_view what) const;

 private:
  void show(const std::string& counter, double fraction, std::string_view what, bool last) const;
  static double share(uint64_t done, uint64_t all, uint64_t done_weight, uint64_t all_weight);
  std::chrono::steady_clock::time_point start_;
  mutable std::chrono::steady_clock::time_point last_shown_{};
  bool terminal_ = false;
};

// The one helper behind the long-running verbs that write a model tensor by tensor (quantize,
// convert): progress on stderr after each tensor (its place, the share of the bytes done, the time
// left), cancellation by SIGINT/SIGTERM (watched from construction; the library's cancel flag is
// interrupt_flag()), and the exit status of the result: 0, 130 "interrupted; OUTPUT was not written",
// or 2 with the error.
class LongRun {
 public:
  // `tensor_bytes`: each tensor's share of the work, in the order the library reports them.
  LongRun(std::string verb, std::vector<uint64_t> tensor_bytes);

  // After tensor `done` (1-based) of `all`: "[   3/12]  25.0%     1.2s left  NAME -> TYPE".
  void tensor_done(size_t done, size_t all, std::string_view name, std::string_view type) const;
  // While tensor `index` (from 0) of `all` is written: `done` of its `size` output bytes.
  void tensor_moving(size_t index, size_t all, uint64_t done, uint64_t size, std::string_view name,
                     std::string_view type) const;
  // The exit status for the library's result; `error_file` is the file an error is reported for.
  int finish(const ggufkit::Expected<void>& result, std::string_view output, std::string_view error_file) const;

 private:
  std::string verb_;
  std::vector<uint64_t> cumulative_;
  uint64_t total_ = 0;
  Progress progress_;
};

// A value's type as dump and diff print it: "uint32", "string[512]".
std::string value_type_text(const ggufkit::ValueView& v);

// How much of a value value_text shows.
struct ValueTextLimits {
  size_t string_chars = SIZE_MAX;          // a string value (shortened past that, control bytes escaped)
  size_t elements = SIZE_MAX;              // an array's first elements, then "… N more"; 0: "[N type]"
  size_t element_string_chars = SIZE_MAX;  // a string inside an array (and every limit of nested arrays)
};
// The one value formatter for people (dump, diff): numbers as JSON prints them (exact integers,
// shortest round-trip floats), strings quoted, arrays as "[a, b, … N more]".
std::string value_text(const ggufkit::ValueView& v, const ValueTextLimits& limits = {});

// 1 -> "1 error", 2 -> "2 errors"
std::string plural(uint64_t n, std::string_view one, std::string_view many);

// 1536 -> "1.50 KiB"
std::string human_bytes(uint64_t bytes);
// 5123456 -> "5.12M"
std::string human_count(uint64_t n);
// Text from a file made safe for a terminal, shortened to at most `max` characters ("…" after):
// newline, tab and CR as \n \t \r, other C0 controls and DEL as \xNN, C1 controls and the
// bidirectional controls (U+061C, U+200E/F, U+202A-E, U+2066-9) as \u{NNNN}, and bytes that are
// not UTF-8 as \xNN. Every human-readable output passes file contents through it.
std::string shorten_for_display(std::string_view s, size_t max);
// shorten_for_display without a limit.
std::string terminal_safe(std::string_view s);

// "Did you mean": the file's key or the model's tensor nearest to a misspelt name.
std::optional<std::string> nearest_key(const ggufkit::GgufFile& file, std::string_view key);
std::optional<std::string> nearest_tensor(const ggufkit::SplitModel& model, std::string_view name);
// " (did you mean X?)" for a suggestion, else `fallback` (a hint at what is expected).
std::string suggestion_or(const std::optional<std::string>& suggestion, std::string_view fallback);

}  // namespace gguf_cli
