#include "output.h"

#include "ggufkit/nearest.h"

#include "ggufkit/json.h"
#include "ggufkit/remote.h"
#include "ggufkit/text.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <utility>

namespace gguf_cli {

void report_error(std::string_view file, const ggufkit::Error& error) {
  // The library's file when it names one (a shard of a split model, a checkpoint's JSON file).
  const std::string_view shown = error.file.empty() ? file : std::string_view(error.file);
  // A verb that reads files as local paths was given an address: say what reads addresses.
  if (ggufkit::is_remote_address(shown) && error.code == ggufkit::ErrorCode::io_error) {
    fmt::print(stderr,
               "gguf: {}: this command needs the file's tensor data, which is not read from remote addresses "
               "(info, dump, get and check read their headers, extract single tensors); download the file first "
               "[invalid_argument]\n",
               terminal_safe(shown));
    return;
  }
  fmt::print(stderr, "gguf: {}: {} [{}]\n", terminal_safe(shown), terminal_safe(error.describe()),
             ggufkit::error_code_name(error.code));
}

ggufkit::OpenOptions metadata_only_ok() {
  ggufkit::OpenOptions options;
  options.allow_metadata_only = true;
  return options;
}

std::optional<ggufkit::GgufFile> open_or_report(const std::string& path, const ggufkit::OpenOptions& options) {
  if (ggufkit::is_remote_address(path)) return open_remote_or_report(path, options);
  auto f = ggufkit::GgufFile::open(path, options);
  if (!f) {
    report_error(path, f.error());
    return std::nullopt;
  }
  return std::move(f).value();
}

std::atomic<bool>& interrupt_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {
extern "C" void on_interrupt(int) { interrupt_flag().store(true); }
}  // namespace

void watch_interrupts() {
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
}

Progress::Progress() : start_(std::chrono::steady_clock::now()), terminal_(::isatty(STDERR_FILENO) == 1) {}

void Progress::show(const std::string& counter, double fraction, std::string_view what, bool last) const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // No estimate until it means something: a second of work and 2% of it (the first items carry
  // the start-up and say little about the rest).
  const bool estimate = !last && elapsed >= 1.0 && fraction >= 0.02;
  const std::string left =
      estimate ? fmt::format("{:>6.1f}s left", elapsed * (1 - fraction) / fraction) : std::string(12, ' ');
  const std::string line = fmt::format("{} {:5.1f}%  {}  {}", counter, 100 * fraction, left, terminal_safe(what));
  if (terminal_) {
    fmt::print(stderr, "\r\033[K{}{}", line, last ? "\n" : "");
  } else {
    fmt::print(stderr, "{}\n", line);
  }
}

double Progress::share(uint64_t done, uint64_t all, uint64_t done_weight, uint64_t all_weight) {
  return all_weight != 0 ? static_cast<double>(done_weight) / static_cast<double>(all_weight)
         : all != 0      ? static_cast<double>(done) / static_cast<double>(all)
                         : 1.0;
}

void Progress::item(uint64_t done, uint64_t all, uint64_t done_weight, uint64_t all_weight, std::string_view what) const {
  if (!progress_enabled()) return;
  const double fraction = share(done, all, done_weight, all_weight);
  const auto now = std::chrono::steady_clock::now();
  const bool last = done >= all;
  // A terminal line is rewritten at most ten times a second; a log gets every item.
  if (terminal_ && !last && now - last_shown_ < std::chrono::milliseconds(100)) return;
  last_shown_ = now;
  show(fmt::format("[{:>4}/{}]", done, all), fraction, what, last);
}

void Progress::moving(uint64_t current, uint64_t all, uint64_t done_weight, uint64_t all_weight,
                      std::string_view what) const {
  if (!progress_enabled()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < std::chrono::seconds(1)) return;
  if (now - last_shown_ < (terminal_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000))) return;
  last_shown_ = now;
  const uint64_t done = current > 0 ? current - 1 : 0;
  show(fmt::format("[{:>4}/{}]", current, all), share(done, all, done_weight, all_weight), what, false);
}

void Progress::bytes(uint64_t done, uint64_t all, std::string_view what) const {
  if (!progress_enabled()) return;
  const auto now = std::chrono::steady_clock::now();
  const bool last = done >= all;
  // Quiet for work that ends within a second; then at most one line a second, and the last.
  if (now - start_ < std::chrono::seconds(1) && (!last || last_shown_ == std::chrono::steady_clock::time_point{})) return;
  if (!last && now - last_shown_ < std::chrono::seconds(1)) return;
  last_shown_ = now;
  const double fraction = all != 0 ? static_cast<double>(done) / static_cast<double>(all) : 1.0;
  show(fmt::format("[{}/{}]", human_bytes(done), human_bytes(all)), fraction, what, last);
}

LongRun::LongRun(std::string verb, std::vector<uint64_t> tensor_bytes) : verb_(std::move(verb)) {
  cumulative_.reserve(tensor_bytes.size());
  for (uint64_t b : tensor_bytes) cumulative_.push_back(total_ += b);
  watch_interrupts();
}

namespace {
ProgressMode g_progress_mode = ProgressMode::automatic;
}  // namespace

void set_progress_mode(ProgressMode mode) { g_progress_mode = mode; }

bool progress_enabled() {
  if (g_progress_mode != ProgressMode::automatic) return g_progress_mode == ProgressMode::always;
  static const bool enabled = [] {
    const char* env = std::getenv("GGUFKIT_PROGRESS");
    const std::string_view setting = env != nullptr ? env : "";
    if (setting == "always") return true;
    if (setting == "never") return false;
    return ::isatty(STDERR_FILENO) == 1;
  }();
  return enabled;
}

void add_progress_flags(CLI::App& cmd, bool* quiet) {
  CLI::Option* progress = cmd.add_flag_callback(
      "--progress", [] { set_progress_mode(ProgressMode::always); },
      "Progress on stderr even when it is not a terminal (default: only on a terminal)");
  cmd.add_flag_callback(
         "--quiet,-q",
         [quiet] {
           set_progress_mode(ProgressMode::never);
           if (quiet != nullptr) *quiet = true;
         },
         quiet != nullptr ? "No progress and no closing figures on stderr" : "No progress on stderr")
      ->excludes(progress);
}

void LongRun::tensor_done(size_t done, size_t all, std::string_view name, std::string_view type) const {
  const uint64_t weight = done >= 1 && done <= cumulative_.size() ? cumulative_[done - 1] : total_;
  progress_.item(done, all, weight, total_, fmt::format("{} -> {}", name, type));
}

void LongRun::tensor_moving(size_t index, size_t all, uint64_t done, uint64_t size, std::string_view name,
                            std::string_view type) const {
  if (!progress_enabled()) return;
  const uint64_t before = index >= 1 && index <= cumulative_.size() ? cumulative_[index - 1] : 0;
  const uint64_t weight = index < cumulative_.size() ? cumulative_[index] - before : 0;
  // The tensor's weight shared out by the part of its output written.
  const uint64_t inside =
      size != 0 ? static_cast<uint64_t>(static_cast<double>(weight) * static_cast<double>(std::min(done, size)) /
                                        static_cast<double>(size))
                : 0;
  progress_.moving(index + 1, all, before + inside, total_, fmt::format("{} -> {}", name, type));
}

int LongRun::finish(const ggufkit::Expected<void>& result, std::string_view output, std::string_view error_file) const {
  return write_status(verb_, result, output, error_file);
}

int write_status(std::string_view verb, const ggufkit::Expected<void>& result, std::string_view output,
                 std::string_view error_file, bool wrote) {
  if (result) {
    // A signal after the rename changes nothing: the output is there, complete.
    if (wrote) note_written(verb, output);
    return kOk;
  }
  if (result.error().code == ggufkit::ErrorCode::cancelled || interrupt_flag().load()) {
    fmt::print(stderr, "gguf: {}: interrupted; {} was not written\n", verb, terminal_safe(output));
    return kInterrupted;
  }
  report_error(error_file, result.error());
  return kUsageOrIoError;
}

std::string value_type_text(const ggufkit::ValueView& v) {
  if (const auto arr = v.as_array()) return fmt::format("{}[{}]", ggufkit::value_type_name(arr->element_type()), arr->size());
  return std::string(ggufkit::value_type_name(v.type()));
}

std::string value_text(const ggufkit::ValueView& v, const ValueTextLimits& limits) {
  if (v.type() == ggufkit::ValueType::String) {
    return fmt::format("\"{}\"", shorten_for_display(v.as_string().value_or(""), limits.string_chars));
  }
  if (const auto arr = v.as_array()) {
    if (limits.elements == 0) return fmt::format("[{} {}]", arr->size(), ggufkit::value_type_name(arr->element_type()));
    const ValueTextLimits inner{limits.element_string_chars, limits.elements, limits.element_string_chars};
    std::string out = "[";
    uint64_t shown = 0;
    for (const ggufkit::ValueView e : arr->values()) {
      if (shown == limits.elements) {
        out += fmt::format(", … {} more", arr->size() - shown);
        break;
      }
      if (shown++ > 0) out += ", ";
      out += value_text(e, inner);
    }
    return out + "]";
  }
  std::string out;
  ggufkit::json::append_value(out, v);
  return out;
}

bool outputs_allowed(const std::vector<std::filesystem::path>& outputs, const ggufkit::OutputPolicy& policy) {
  for (const auto& out : outputs) {
    if (auto r = ggufkit::AtomicFile::check(out, policy); !r) {
      report_error(out.string(), r.error());
      return false;
    }
  }
  return true;
}

namespace {
// What note_written was told: the verb and its output, once the output is committed.
std::optional<std::pair<std::string, std::string>> g_written;
}  // namespace

void note_written(std::string_view verb, std::string_view output) {
  g_written.emplace(std::string(verb), std::string(output));
}

int output_failed(int err, int status_when_written) {
  const char* reason = err != 0 ? std::strerror(err) : "write error";
  // A reader that went away (`| head`) has all it wanted: no message.
  if (g_written) {
    if (err != EPIPE) {
      fmt::print(stderr, "gguf: {}: warning: {} was written, but stdout failed: {}\n", g_written->first,
                 terminal_safe(g_written->second), reason);
    }
    std::clearerr(stdout);
    return status_when_written;
  }
  if (err != EPIPE) fmt::print(stderr, "gguf: cannot write the output: {}\n", reason);
  std::clearerr(stdout);  // reported once: finish_output does not report it again
  return kUsageOrIoError;
}

int write_result(std::string_view text) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0) return kOk;
  return output_failed(errno);
}

int finish_output(int status) {
  // What is still buffered is written now, and the reason of a failure is the errno of this flush.
  errno = 0;
  std::cout.flush();
  int err = errno;
  if (std::fflush(stdout) != 0 && err == 0) err = errno;
  if (!std::ferror(stdout) && std::cout.good()) return status;
  return output_failed(err, status);
}

std::string plural(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string human_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, kUnits[unit]);
}

std::string human_count(uint64_t n) {
  if (n < 1000) return fmt::format("{}", n);
  static constexpr const char* kUnits[] = {"K", "M", "B", "T"};
  double v = static_cast<double>(n);
  int unit = -1;
  while (v >= 1000.0 && unit < 3) {
    v /= 1000.0;
    ++unit;
  }
  return fmt::format("{:.2f}{}", v, kUnits[unit]);
}

std::string shorten_for_display(std::string_view s, size_t max) { return ggufkit::display_text(s, max); }

std::string terminal_safe(std::string_view s) { return ggufkit::display_text(s); }

std::optional<std::string> nearest_key(const ggufkit::GgufFile& file, std::string_view key) {
  std::vector<std::string_view> names;
  names.reserve(file.metadata().size());
  for (const ggufkit::KeyValue& kv : file.metadata()) names.push_back(kv.key);
  return ggufkit::nearest_name(key, names);
}

std::optional<std::string> nearest_tensor(const ggufkit::SplitModel& model, std::string_view name) {
  std::vector<std::string_view> names;
  names.reserve(model.tensors().size());
  for (const ggufkit::ModelTensor& t : model.tensors()) names.push_back(t.info->name);
  return ggufkit::nearest_name(name, names);
}

std::string suggestion_or(const std::optional<std::string>& suggestion, std::string_view fallback) {
  return suggestion ? ggufkit::did_you_mean(suggestion) : std::string(fallback);
}

}  // namespace gguf_cli
