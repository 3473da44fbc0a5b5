#include "ggufkit/endian.h"
#include "ggufkit/edit.h"
#include "ggufkit/nearest.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "ggufkit/atomic_file.h"
#include "ggufkit/conventions.h"
#include "ggufkit/writer.h"

#include "format/checked_math.h"
#include "format/encoder.h"
#include "io/file_kind.h"

namespace ggufkit {
namespace {

// A write of at most one page never tears when the process dies: the kernel copies a page at a
// time and only checks for a fatal signal between pages.
constexpr uint64_t kAtomicWriteBytes = 4096;

struct Entry {
  std::string key;
  ValueType type;
  std::span<const std::byte> encoded;  // into the file or into `owned`
  std::shared_ptr<MetadataValue> owned;
};

Error edit_error(std::string subject, std::string message) {
  return make_error(ErrorCode::invalid_argument, std::nullopt, std::move(subject), std::move(message));
}

Error io_failure(const std::filesystem::path& path, const std::string& what) {
  return with_file(make_error(ErrorCode::io_error, std::nullopt, {}, fmt::format("{}: {}", what, std::strerror(errno))),
                   path.string());
}

// The alignment the new metadata asks for, checked as gguf.cpp checks it.
Expected<uint32_t> alignment_of(const std::vector<Entry>& entries) {
  for (const Entry& e : entries) {
    if (e.key != keys::kAlignment) continue;
    const auto v = ValueView(e.type, e.encoded).get<uint32_t>();
    if (!v || !checked::is_power_of_two(*v)) {
      return make_error(ErrorCode::bad_alignment, std::nullopt, e.key, "general.alignment must be a uint32 power of two");
    }
    return *v;
  }
  return kDefaultAlignment;
}

bool is_read_only(const struct stat& st) { return (st.st_mode & 0222) == 0; }

}  // namespace

std::string_view edit_mode_name(EditMode mode) {
  switch (mode) {
    case EditMode::unchanged: return "unchanged";
    case EditMode::in_place: return "in place";
    case EditMode::rewrite: return "rewrite";
  }
  return "?";
}

Expected<EditPlan> plan_metadata_edit(const GgufFile& file, std::span<const MetadataChange> changes,
                                      const EditOptions& options) {
  std::vector<Entry> entries;
  entries.reserve(file.metadata().size() + changes.size());
  for (const KeyValue& kv : file.metadata()) {
    entries.push_back({std::string(kv.key), kv.value.type(), kv.value.encoded(), nullptr});
  }
  auto find = [&](std::string_view key) {
    return std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.key == key; });
  };
  auto near_key = [&](std::string_view key) {
    std::vector<std::string_view> names;
    names.reserve(entries.size());
    for (const Entry& e : entries) names.emplace_back(e.key);
    return did_you_mean(nearest_name(key, names));
  };

  EditPlan plan;
  // What each touched key looked like before the first change to it.
  auto record = [&](const std::string& key) -> EditPlan::KeyChange& {
    for (auto& c : plan.changes) {
      if (c.key == key) return c;
    }
    EditPlan::KeyChange c;
    c.key = key;
    if (auto it = find(key); it != entries.end()) c.before = MetadataValue::copy_of(ValueView(it->type, it->encoded));
    plan.changes.push_back(std::move(c));
    return plan.changes.back();
  };

  for (const MetadataChange& change : changes) {
    if (change.key.empty()) return edit_error({}, "a metadata key cannot be empty");
    switch (change.kind) {
      case MetadataChange::Kind::set: {
        if (!change.value.well_formed()) return edit_error(change.key, "the new value is not a well-formed value");
        record(change.key);
        auto owned = std::make_shared<MetadataValue>(change.value);
        if (auto it = find(change.key); it != entries.end()) {
          *it = {change.key, owned->type(), owned->encoded(), owned};
        } else {
          entries.push_back({change.key, owned->type(), owned->encoded(), owned});
        }
        break;
      }
      case MetadataChange::Kind::remove: {
        auto it = find(change.key);
        if (it == entries.end()) return edit_error(change.key, "there is no such key to remove" + near_key(change.key));
        record(change.key);
        entries.erase(it);
        break;
      }
      case MetadataChange::Kind::rename: {
        if (change.new_key.empty()) return edit_error(change.key, "a metadata key cannot be empty");
        auto it = find(change.key);
        if (it == entries.end()) return edit_error(change.key, "there is no such key to rename" + near_key(change.key));
        if (change.new_key == change.key) break;
        if (find(change.new_key) != entries.end()) {
          return edit_error(change.new_key, fmt::format("cannot rename '{}': the key exists", change.key));
        }
        EditPlan::KeyChange& old_entry = record(change.key);
        const std::optional<MetadataValue> moved = MetadataValue::copy_of(ValueView(it->type, it->encoded));
        it->key = change.new_key;  // the renamed key keeps its place
        // Reported as the new key coming from the old one (the old key reads as removed).
        EditPlan::KeyChange& new_entry = record(change.new_key);
        new_entry.before.reset();
        new_entry.renamed_from = change.key;
        new_entry.after = moved;
        (void)old_entry;
        break;
      }
    }
  }
  // The final value of every touched key, and the report in the new file's order.
  for (auto& c : plan.changes) {
    if (auto it = find(c.key); it != entries.end()) {
      c.after = MetadataValue::copy_of(ValueView(it->type, it->encoded));
    } else {
      c.after.reset();
    }
  }
  auto position = [&](const EditPlan::KeyChange& c) {
    auto it = find(c.key);
    return it == entries.end() ? entries.size() : static_cast<size_t>(it - entries.begin());
  };
  std::stable_sort(plan.changes.begin(), plan.changes.end(),
                   [&](const auto& a, const auto& b) { return position(a) < position(b); });

  auto alignment = alignment_of(entries);
  if (!alignment) return std::move(alignment).error();

  // The new header: the same prefix layout, the new key/value records, the tensor infos verbatim,
  // all in the file's byte order (the infos are copied from the file as stored).
  std::vector<std::byte>& h = plan.header;
  format::Encoder encoder(h, file.byte_order());
  encoder.preamble(file.version(), file.tensors().size(), entries.size());
  for (const Entry& e : entries) encoder.kv(e.key, e.type, e.encoded);
  const auto bytes = file.bytes();
  if (!file.tensors().empty()) {
    const uint64_t infos = file.tensors().front().info_offset;
    encoder.bytes(bytes.subspan(infos, file.header_size() - infos));
  }
  const uint64_t new_header_size = h.size();

  // Where the data section starts, before and after. A file without tensors ends with its header,
  // padded or not: keep that choice.
  const bool has_tensors = !file.tensors().empty();
  plan.old_data_offset = has_tensors ? file.data_offset() : file.file_size();
  const auto original = file.bytes().first(static_cast<size_t>(plan.old_data_offset));
  plan.original_header.assign(original.begin(), original.end());
  const auto new_data_offset = file.header_padded() ? checked::align_up(new_header_size, *alignment) : new_header_size;
  if (!new_data_offset) return edit_error({}, "the new header's size overflows");
  plan.new_data_offset = *new_data_offset;
  h.resize(plan.new_data_offset, std::byte{0});
  plan.realign = has_tensors && *alignment != file.alignment();
  // Nothing the reader refuses (a value nested too deep, a string too long...): no verb could
  // open such a file again, not even to undo the edit. So the header is read back first, as the
  // reader reads a metadata-only file (gguf check would report the problem as structure.*).
  // (A new alignment lays the tensor data out again: the old offsets in these infos do not count.)
  OpenOptions reread;
  reread.allow_metadata_only = true;
  reread.on_problem = [&](const Error& e) { return plan.realign && e.code == ErrorCode::bad_tensor_offset; };
  if (auto back = GgufFile::parse(h, reread); !back) {
    Error e = std::move(back).error();
    e.offset.reset();  // an offset in a file that does not exist
    e.message = "after this edit the file would not open: " + e.message;
    return e;
  }

  const std::span<const std::byte> old_header = bytes.first(plan.old_data_offset);
  if (!plan.realign && std::ranges::equal(std::span<const std::byte>(h), old_header)) {
    plan.mode = EditMode::unchanged;
    plan.reason = "the metadata is already as asked";
    return plan;
  }
  if (plan.realign) {
    for (const Entry& e : entries) plan.realigned_metadata.emplace_back(e.key, MetadataValue::copy_of(ValueView(e.type, e.encoded)));
    plan.mode = EditMode::rewrite;
    plan.reason = fmt::format("general.alignment changes from {} to {}: the tensor data is laid out again",
                              file.alignment(), *alignment);
    return plan;
  }
  if (plan.new_data_offset != plan.old_data_offset) {
    plan.mode = EditMode::rewrite;
    plan.reason = fmt::format("the header grows from {} to {} bytes, past the {} bytes before the data section",
                              file.header_size(), new_header_size, plan.old_data_offset);
    if (new_header_size < file.header_size()) {
      plan.reason = fmt::format("the header shrinks from {} to {} bytes: the data section would move",
                                file.header_size(), new_header_size);
    }
    return plan;
  }
  // Same place: only the bytes that differ need writing.
  uint64_t first = 0, last = plan.new_data_offset;
  while (first < last && h[first] == old_header[first]) ++first;
  while (last > first && h[last - 1] == old_header[last - 1]) --last;
  plan.write_offset = first;
  plan.write_length = last - first;
  if (options.force_rewrite) {
    plan.mode = EditMode::rewrite;
    plan.reason = "a rewrite was asked for";
  } else if (first / kAtomicWriteBytes != (last - 1) / kAtomicWriteBytes) {
    plan.mode = EditMode::rewrite;
    plan.reason = fmt::format(
        "the {} changed bytes span more than one 4 KiB page: a write that large could be torn if the process died",
        plan.write_length);
  } else {
    plan.mode = EditMode::in_place;
    plan.reason = fmt::format("{} bytes at offset {} change; the data section stays at {}", plan.write_length,
                              plan.write_offset, plan.new_data_offset);
  }
  return plan;
}

namespace {

// Rewrites with the alignment changed: the builder lays the tensors out again.
Expected<void> write_realigned(const GgufFile& file, const EditPlan& plan, const ApplyOptions& options, ByteSink& out) {
  GgufBuilder builder = GgufBuilder::from_file(file);
  // The new key order: every old key removed, then each key set again in order.
  for (const KeyValue& kv : file.metadata()) builder.remove(kv.key);
  for (const auto& [key, value] : plan.realigned_metadata) {
    if (auto r = builder.set(key, value); !r) return r;
  }
  WriteOptions write_options = builder.suggested_options();
  write_options.cancel = options.cancel;
  return builder.write(out, write_options);
}

}  // namespace

namespace {

// flock(fd, LOCK_EX), or with `cancelled` a poll (LOCK_NB every 10 ms, `cancelled` asked in
// between): 0, or -1 with errno (ECANCELED once `cancelled` returned true).
int lock_exclusive(int fd, const std::function<bool()>& cancelled) {
  int r = 0;
  if (!cancelled) {
    do {
      r = ::flock(fd, LOCK_EX);
    } while (r != 0 && errno == EINTR);
    return r;
  }
  while ((r = ::flock(fd, LOCK_EX | LOCK_NB)) != 0 && (errno == EWOULDBLOCK || errno == EINTR)) {
    if (cancelled()) {
      errno = ECANCELED;
      return -1;
    }
    ::usleep(10000);
  }
  return r;
}

}  // namespace

Expected<EditLock> EditLock::acquire(const std::filesystem::path& path) { return acquire(path, {}); }

Expected<EditLock> EditLock::acquire(const std::filesystem::path& path, const std::function<bool()>& cancelled) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    // Only a regular file is opened at all (a device or a FIFO could act or block on the open).
    const io::OpenedFile opened = io::open_regular(path.c_str(), O_RDONLY);
    if (opened.fd < 0 && opened.error == 0) {
      return with_file(make_error(ErrorCode::io_error, std::nullopt, {},
                                  fmt::format("{}, not a regular file", io::file_kind(opened.mode))),
                       path.string());
    }
    errno = opened.error;
    const int fd = opened.fd;
    if (fd < 0) return io_failure(path, "cannot open");
    const int r = lock_exclusive(fd, cancelled);
    if (r != 0 && errno == ECANCELED) {
      ::close(fd);
      return with_file(make_error(ErrorCode::cancelled, std::nullopt, {},
                                  "cancelled while waiting for another edit of the file to finish: nothing changed"),
                       path.string());
    }
    if (r != 0) {
      const Error e = io_failure(path, "cannot lock");
      ::close(fd);
      return e;
    }
    // Locked: but a rewrite may have renamed a new file over the one opened while we waited.
    struct stat held {}, named {};
    if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino) {
      return EditLock(fd);
    }
    ::close(fd);
  }
  return with_file(make_error(ErrorCode::io_error, std::nullopt, {}, "the file keeps being replaced: cannot lock it"),
                   path.string());
}

EditLock::~EditLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

Expected<void> apply_metadata_edit(const GgufFile& file, const std::filesystem::path& source, const EditPlan& plan,
                                   const std::filesystem::path& target, const ApplyOptions& options) {
  const auto changed = [&] {
    return with_file(make_error(ErrorCode::io_error, std::nullopt, {}, "the file changed since it was read: not modified"),
                     source.string());
  };
  // The file the plan was made from is the open file it was read through; `source` must still
  // name it, at the size it had (another writer may have renamed a new file over it).
  struct stat read_stat {};
  if (file.fd() >= 0 ? ::fstat(file.fd(), &read_stat) != 0 : ::stat(source.c_str(), &read_stat) != 0) {
    return io_failure(source, "cannot read");
  }
  const auto still_the_file_read = [&]() -> bool {
    struct stat now {};
    return ::stat(source.c_str(), &now) == 0 && now.st_dev == read_stat.st_dev && now.st_ino == read_stat.st_ino &&
           static_cast<uint64_t>(now.st_size) == file.file_size();
  };
  // Its header as the plan saw it (a copy taken then, not the mapping, which shows later writes).
  const auto header_unchanged = [&](int fd) -> bool {
    std::vector<std::byte> current(plan.original_header.size());
    const ssize_t got = ::pread(fd, current.data(), current.size(), 0);
    return got == static_cast<ssize_t>(current.size()) && current == plan.original_header;
  };
  if (!still_the_file_read()) return changed();
  struct stat target_stat {};
  const bool target_exists = ::stat(target.c_str(), &target_stat) == 0;
  const bool same_file = target_exists && target_stat.st_dev == read_stat.st_dev && target_stat.st_ino == read_stat.st_ino;
  if (same_file && is_read_only(read_stat)) {
    return with_file(make_error(ErrorCode::io_error, std::nullopt, {}, "the file is read-only: not modified"), source.string());
  }
  if (same_file && plan.mode == EditMode::unchanged) return {};

  if (same_file && plan.mode == EditMode::in_place) {
    const io::OpenedFile writable = io::open_regular(source.c_str(), O_RDWR);
    if (writable.fd < 0 && writable.error == 0) return changed();
    errno = writable.error;
    const int fd = writable.fd;
    if (fd < 0) return io_failure(source, "cannot open for writing");
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    // The write changes only part of the header: another writer's change elsewhere in it would
    // otherwise be mixed with ours.
    struct stat opened {};
    if (::fstat(fd, &opened) != 0 || opened.st_ino != read_stat.st_ino || opened.st_dev != read_stat.st_dev ||
        !header_unchanged(fd)) {
      return changed();
    }
    const ssize_t put = ::pwrite(fd, plan.header.data() + plan.write_offset, plan.write_length,
                                 static_cast<off_t>(plan.write_offset));
    if (put != static_cast<ssize_t>(plan.write_length)) return io_failure(source, "cannot write");
    if (options.sync && ::fsync(fd) != 0) return io_failure(source, "cannot sync");
    // A writer that does not take the lock may have renamed another file over the path between the
    // checks and the write: then the write went to the file it replaced, and the path's file is
    // untouched. Said, not hidden.
    struct stat written {}, named {};
    if (::fstat(fd, &written) == 0 && (::stat(source.c_str(), &named) != 0 || named.st_dev != written.st_dev ||
                                       named.st_ino != written.st_ino)) {
      return with_file(
          make_error(ErrorCode::io_error, std::nullopt, {},
                     fmt::format("the file was replaced during the edit (by a writer that does not take the edit "
                                 "lock): the edit went to the replaced file, {}; the file now under this name is "
                                 "not modified",
                                 written.st_nlink == 0 ? "which is deleted"
                                                       : fmt::format("inode {}, which has other names", written.st_ino))),
          source.string());
    }
    return {};
  }

  // The source replaced by its rewrite, or another file, which may not be the source.
  OutputPolicy policy;
  if (!same_file) {
    policy = options.output;
    policy.inputs.push_back(source);
  }
  auto out = AtomicFile::create(target, policy);  // a replaced file keeps its mode, owner and group
  if (!out) return std::move(out).error();
  // The data comes from the file the header was validated with, never from the path again.
  int fd = file.fd();
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } closer{-1};
  if (fd < 0) {
    fd = closer.fd = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return io_failure(source, "cannot open");
  }
  if (plan.realign) {
    // The tensors laid out again (from the mapping of the same file).
    if (auto r = write_realigned(file, plan, options, **out); !r) return r;
  } else {
    if (auto r = (*out)->write(plan.header); !r) return r;
    const uint64_t length = file.file_size() - plan.old_data_offset;
    std::function<void(uint64_t)> progress;
    if (options.progress) progress = [&](uint64_t done) { options.progress(done, length); };
    if (auto r = (*out)->copy_from(fd, plan.old_data_offset, length, progress, options.cancel); !r) return r;
  }
  if (options.cancel != nullptr && options.cancel->load()) {
    return make_error(ErrorCode::cancelled, std::nullopt, {}, "cancelled");
  }
  // A writer that does not take the edit lock may have changed the file meanwhile: then ours is
  // not renamed over its work.
  if (same_file && (!still_the_file_read() || !header_unchanged(fd))) return changed();
  return (*out)->commit(options.sync, options.cancel);
}

Expected<MetadataValue> parse_scalar_value(std::string_view text, ValueType type) {
  auto bad = [&](std::string_view what) {
    return edit_error({}, fmt::format("'{}' is not {}", text, what));
  };
  auto parse_int = [&]<class T>(T) -> Expected<MetadataValue> {
    T v{};
    std::string_view digits = text;
    if constexpr (std::is_unsigned_v<T>) {
      if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
    }
    int base = 10;
    if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
      digits.remove_prefix(2);
      base = 16;
    }
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
    if (ec == std::errc::result_out_of_range) {
      return bad(fmt::format("in the range of {} ({}..{})", value_type_name(type), std::numeric_limits<T>::min(),
                             std::numeric_limits<T>::max()));
    }
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) {
      return bad(fmt::format("an integer ({})", value_type_name(type)));
    }
    return MetadataValue::of(v);
  };
  auto parse_float = [&]() -> std::optional<double> {
    const std::string s(text);
    if (s.empty() || std::isspace(static_cast<unsigned char>(s.front()))) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) return std::nullopt;
    return v;
  };
  switch (type) {
    case ValueType::UInt8: return parse_int(uint8_t{});
    case ValueType::Int8: return parse_int(int8_t{});
    case ValueType::UInt16: return parse_int(uint16_t{});
    case ValueType::Int16: return parse_int(int16_t{});
    case ValueType::UInt32: return parse_int(uint32_t{});
    case ValueType::Int32: return parse_int(int32_t{});
    case ValueType::UInt64: return parse_int(uint64_t{});
    case ValueType::Int64: return parse_int(int64_t{});
    case ValueType::Float32: {
      const auto v = parse_float();
      if (!v) return bad("a number");
      if (std::isfinite(*v) && std::abs(*v) > std::numeric_limits<float>::max()) return bad("in the range of float32");
      return MetadataValue::of(static_cast<float>(*v));
    }
    case ValueType::Float64: {
      const auto v = parse_float();
      if (!v) return bad("a number");
      return MetadataValue::of(*v);
    }
    case ValueType::Bool:
      if (text == "true" || text == "1") return MetadataValue::of(true);
      if (text == "false" || text == "0") return MetadataValue::of(false);
      return bad("a boolean (true, false, 1 or 0)");
    case ValueType::String: return MetadataValue::string(text);
    case ValueType::Array: return edit_error({}, "an array value needs JSON (--json)");
  }
  return edit_error({}, "unknown value type");
}

ValueType infer_value_type(std::string_view key, std::string_view text) {
  // Keys whose convention is a string stay strings, whatever they look like ("1.0", "true").
  static constexpr std::string_view kStringKeys[] = {
      keys::kArchitecture, keys::kType,    keys::kName,      keys::kAuthor,      keys::kVersion,
      keys::kOrganization, keys::kBasename, keys::kFinetune, keys::kDescription, keys::kQuantizedBy,
      keys::kSizeLabel,    keys::kLicense, keys::kUrl,       keys::kRepoUrl,     keys::kTokenizerModel,
      keys::kTokenizerPre};
  if (std::ranges::find(kStringKeys, key) != std::end(kStringKeys) || key.starts_with(keys::kChatTemplate) ||
      key.starts_with("general.license.") || key.starts_with("general.source.")) {
    return ValueType::String;
  }
  if (text == "true" || text == "false") return ValueType::Bool;
  if (!text.empty()) {
    if (parse_scalar_value(text, ValueType::UInt32)) return ValueType::UInt32;
    if (parse_scalar_value(text, ValueType::Int32)) return ValueType::Int32;
    if (parse_scalar_value(text, ValueType::UInt64)) return ValueType::UInt64;
    if (parse_scalar_value(text, ValueType::Int64)) return ValueType::Int64;
    const bool numeric_look = text.find_first_of(".eE") != std::string_view::npos || text == "inf" ||
                              text == "-inf" || text == "nan";
    if (numeric_look && text.find_first_not_of("0123456789+-.eEinfa") == std::string_view::npos &&
        parse_scalar_value(text, ValueType::Float32)) {
      return ValueType::Float32;
    }
  }
  return ValueType::String;
}

}  // namespace ggufkit
