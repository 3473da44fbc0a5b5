#include "ggufkit/atomic_file.h"
#include "ggufkit/endian.h"
#include "ggufkit/split.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <fmt/format.h>

#include "format/checked_math.h"

namespace ggufkit {
namespace {

// llama-gguf-split pads every tensor to GGUF_DEFAULT_ALIGNMENT when it counts --split-max-size.
constexpr uint64_t kSizeCountingAlignment = 32;

bool is_split_key(std::string_view key) {
  return key == keys::kSplitNo || key == keys::kSplitCount || key == keys::kSplitTensorsCount;
}

Error split_error(std::string subject, std::string message) {
  return make_error(ErrorCode::invalid_argument, std::nullopt, std::move(subject), std::move(message));
}

// Reads a split key of exactly type T (llama.cpp's loader rejects any other type).
template <class T>
Expected<std::optional<T>> split_key(const GgufFile& file, std::string_view key, const std::string& path) {
  const KeyValue* kv = file.find(key);
  if (kv == nullptr) return std::optional<T>();
  const auto v = kv->value.get<T>();
  if (!v) {
    return with_file(make_error(ErrorCode::invalid_argument, kv->offset, std::string(key),
                                fmt::format("the key is a {}; llama.cpp requires a {}", value_type_name(kv->value.type()),
                                            value_type_name(value_type_of<T>::value))),
                     path);
  }
  return std::optional<T>(*v);
}

Expected<void> copy_metadata(const GgufFile& from, GgufBuilder& to) {
  for (const KeyValue& kv : from.metadata()) {
    if (is_split_key(kv.key)) continue;
    if (auto r = to.set(kv.key, MetadataValue::copy_of(kv.value)); !r) return r;
  }
  return {};
}

}  // namespace

std::string split_path(std::string_view prefix, uint32_t index, uint32_t count) {
  return fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, index + 1, count);
}

std::optional<std::string> split_prefix(std::string_view path, uint32_t index, uint32_t count) {
  const std::string postfix = fmt::format("-{:05d}-of-{:05d}.gguf", index + 1, count);
  if (path.size() <= postfix.size() || !path.ends_with(postfix)) return std::nullopt;
  return std::string(path.substr(0, path.size() - postfix.size()));
}

Expected<uint64_t> parse_size(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return split_error(std::string(text), fmt::format("'{}' is not a size ({}); write 2G, 500M, 1GiB or a byte count",
                                                      text, why));
  };
  size_t digits = 0;
  uint64_t number = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) {
    const auto n = checked::mul(number, 10);
    const auto m = n ? checked::add(*n, static_cast<uint64_t>(text[digits] - '0')) : std::nullopt;
    if (!m) return bad("too large");
    number = *m;
    ++digits;
  }
  if (digits == 0) return bad("no number");
  std::string unit;
  for (char c : text.substr(digits)) unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("B") && unit.size() > 1) unit.pop_back();  // "GB" is "G", "GIB" is "GI"
  uint64_t scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K") scale = 1000;
  else if (unit == "M") scale = 1000'000;
  else if (unit == "G") scale = 1000'000'000;
  else if (unit == "T") scale = 1000'000'000'000;
  else if (unit == "KI") scale = uint64_t{1} << 10;
  else if (unit == "MI") scale = uint64_t{1} << 20;
  else if (unit == "GI") scale = uint64_t{1} << 30;
  else if (unit == "TI") scale = uint64_t{1} << 40;
  else return bad("unknown unit");
  const auto bytes = checked::mul(number, scale);
  if (!bytes) return bad("too large");
  if (*bytes == 0) return bad("it must be positive");
  return *bytes;
}

uint64_t SplitPlan::total_file_bytes() const {
  uint64_t total = 0;
  for (const ShardPlan& s : shards) total += s.file_bytes;
  return total;
}

Expected<std::vector<size_t>> plan_shard_starts(std::span<const uint64_t> tensor_sizes, const SplitLimits& limits) {
  std::vector<size_t> starts{0};
  uint64_t shard_bytes = 0;
  uint64_t shard_tensors = 0;
  for (size_t i = 0; i < tensor_sizes.size(); ++i) {
    const uint64_t padded = checked::align_up(tensor_sizes[i], kSizeCountingAlignment).value_or(UINT64_MAX);
    const uint64_t with_it = checked::add(shard_bytes, padded).value_or(UINT64_MAX);
    // A shard always takes its first tensor, however large: no shard is ever empty.
    const bool full = shard_tensors > 0 && ((limits.max_tensors != 0 && shard_tensors >= limits.max_tensors) ||
                                            (limits.max_bytes != 0 && with_it > limits.max_bytes));
    if (full) {
      starts.push_back(i);
      shard_bytes = padded;
      shard_tensors = 1;
    } else {
      shard_bytes = with_it;
      ++shard_tensors;
    }
  }
  if (starts.size() > kMaxShards) {
    return split_error({}, fmt::format("the limits make {} shards; split.count (a uint16) allows at most {}",
                                       starts.size(), kMaxShards));
  }
  return starts;
}

Expected<SplitPlan> plan_split(const GgufFile& input, std::string_view prefix, const SplitLimits& limits) {
  const auto tensors = input.tensors();
  if (tensors.size() > static_cast<size_t>(INT32_MAX)) {
    return split_error({}, "split.tensors.count is an int32; the file has too many tensors");
  }
  std::vector<uint64_t> sizes;
  sizes.reserve(tensors.size());
  for (const TensorInfo& t : tensors) sizes.push_back(t.size);
  auto starts = plan_shard_starts(sizes, limits);
  if (!starts) return std::move(starts).error();

  SplitPlan plan;
  const auto count = static_cast<uint32_t>(starts->size());
  for (uint32_t i = 0; i < count; ++i) {
    ShardPlan s;
    s.path = split_path(prefix, i, count);
    s.first_tensor = (*starts)[i];
    s.tensor_count = (i + 1 < count ? (*starts)[i + 1] : tensors.size()) - s.first_tensor;
    for (size_t t = s.first_tensor; t < s.first_tensor + s.tensor_count; ++t) s.tensor_bytes += tensors[t].size;
    plan.shards.push_back(std::move(s));
  }
  for (size_t i = 0; i < plan.shards.size(); ++i) {
    auto b = shard_builder(input, plan, i);
    if (!b) return std::move(b).error();
    WriteOptions options;
    options.pad_header_without_tensors = input.header_padded();
    options.byte_order = input.byte_order();
    plan.shards[i].file_bytes = b->file_bytes(options);
  }
  return plan;
}

Expected<GgufBuilder> shard_builder(const GgufFile& input, const SplitPlan& plan, size_t index) {
  if (index >= plan.shards.size()) return split_error({}, fmt::format("no shard {} in a plan of {}", index, plan.shards.size()));
  const ShardPlan& shard = plan.shards[index];
  GgufBuilder b;
  if (auto r = b.set_version(input.version()); !r) return r.error();
  if (index == 0) {
    if (auto r = copy_metadata(input, b); !r) return r.error();
  }
  // llama-gguf-split sets split.count last (its first value is a placeholder it replaces, which
  // moves the key to the end): this order is the one its shards have.
  auto r = b.set(keys::kSplitNo, MetadataValue::of(static_cast<uint16_t>(index)));
  if (r) r = b.set(keys::kSplitTensorsCount, MetadataValue::of(static_cast<int32_t>(input.tensors().size())));
  if (r) r = b.set(keys::kSplitCount, MetadataValue::of(static_cast<uint16_t>(plan.shards.size())));
  if (!r) return r.error();
  const auto tensors = input.tensors();
  if (shard.first_tensor + shard.tensor_count > tensors.size()) {
    return split_error({}, "the plan does not belong to this file");
  }
  for (size_t t = shard.first_tensor; t < shard.first_tensor + shard.tensor_count; ++t) {
    const TensorInfo& info = tensors[t];
    if (auto a = b.add_tensor(info.name, info.type, info.shape(), input.tensor_data(info)); !a) return a.error();
  }
  return b;
}

Expected<void> write_split(const GgufFile& input, const SplitPlan& plan, const SplitWriteOptions& options) {
  OutputPolicy policy = options.output;
  if (!options.input_path.empty()) policy.inputs.push_back(options.input_path);
  if (!input.path().empty()) policy.inputs.push_back(input.path());
  // Every shard is refused or accepted before any is written.
  for (const ShardPlan& s : plan.shards) {
    if (auto r = AtomicFile::check(s.path, policy); !r) return r;
  }
  WriteOptions write_options;
  write_options.sync = options.sync;
  write_options.pad_header_without_tensors = input.header_padded();
  // Shard headers in the input's byte order: the tensor bytes are copied as stored.
  write_options.byte_order = input.byte_order();
  write_options.cancel = options.cancel;
  // The shards are a set: each is written under a temporary name, and the final names appear only
  // when every shard is complete (an interruption or failure before leaves none of them).
  std::vector<std::unique_ptr<AtomicFile>> files;
  for (size_t i = 0; i < plan.shards.size(); ++i) {
    auto b = shard_builder(input, plan, i);
    if (!b) return std::move(b).error();
    auto file = AtomicFile::create(plan.shards[i].path, policy);
    if (!file) return std::move(file).error();
    if (auto r = b->write(**file, write_options); !r) return with_file(std::move(r).error(), plan.shards[i].path);
    files.push_back(std::move(file).value());
    if (options.progress) options.progress(i + 1, plan.shards.size(), plan.shards[i].path);
  }
  // Every shard synced, then all renamed together (a cancel is heard until the renames).
  return AtomicFile::commit_all(files, options.sync, options.cancel);
}

void SplitModel::index_tensors() {
  for (uint32_t s = 0; s < shards_.size(); ++s) {
    const GgufFile& f = shards_[s];
    for (const TensorInfo& t : f.tensors()) tensors_.push_back(ModelTensor{&t, s, f.tensor_data(t)});
  }
  tensor_by_name_.resize(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) tensor_by_name_[i] = i;
  std::ranges::sort(tensor_by_name_,
                    [&](size_t a, size_t b) { return tensors_[a].info->name < tensors_[b].info->name; });
}

SplitModel SplitModel::of_file(GgufFile file, std::filesystem::path name) {
  SplitModel model;
  model.shards_.push_back(std::move(file));
  model.paths_.push_back(std::move(name));
  model.index_tensors();
  return model;
}

Expected<SplitModel> SplitModel::open(const std::filesystem::path& path, const OpenOptions& options) {
  auto first = GgufFile::open(path, options);
  if (!first) return std::move(first).error();
  SplitModel model;
  const std::string first_path = path.string();
  auto count = split_key<uint16_t>(*first, keys::kSplitCount, first_path);
  if (!count) return std::move(count).error();
  const uint32_t n = count->value_or(0);
  model.shards_.reserve(std::max<uint32_t>(n, 1));  // `head` below stays valid
  model.shards_.push_back(std::move(first).value());
  model.paths_.push_back(path);

  if (n > 1) {
    const GgufFile& head = model.shards_.front();
    auto no = split_key<uint16_t>(head, keys::kSplitNo, first_path);
    if (!no) return std::move(no).error();
    if (!*no) return with_file(split_error(std::string(keys::kSplitNo), "a shard without split.no"), first_path);
    if (**no != 0) {
      return with_file(split_error(std::string(keys::kSplitNo),
                                   fmt::format("this is shard {} of {}; open the first one, {}", **no + 1, n,
                                               split_path(split_prefix(first_path, **no, n).value_or("PREFIX"), 0, n))),
                       first_path);
    }
    const auto prefix = split_prefix(first_path, 0, n);
    if (!prefix) {
      return with_file(split_error({}, fmt::format("the first of {} shards must be named PREFIX-00001-of-{:05d}.gguf", n, n)),
                       first_path);
    }
    for (uint32_t i = 1; i < n; ++i) {
      const std::string p = split_path(*prefix, i, n);
      auto shard = GgufFile::open(p, options);
      if (!shard) {
        Error e = std::move(shard).error();
        if (e.code == ErrorCode::io_error) e.message = fmt::format("shard {} of {}: {}", i + 1, n, e.message);
        return with_file(std::move(e), p);
      }
      auto shard_no = split_key<uint16_t>(*shard, keys::kSplitNo, p);
      if (!shard_no) return std::move(shard_no).error();
      if (*shard_no != std::optional<uint16_t>(static_cast<uint16_t>(i))) {
        return with_file(split_error(std::string(keys::kSplitNo),
                                     *shard_no ? fmt::format("split.no is {}, the name says {}", **shard_no, i)
                                               : std::string("the shard has no split.no")),
                         p);
      }
      auto shard_count = split_key<uint16_t>(*shard, keys::kSplitCount, p);
      if (!shard_count) return std::move(shard_count).error();
      if (*shard_count != std::optional<uint16_t>(static_cast<uint16_t>(n))) {
        return with_file(split_error(std::string(keys::kSplitCount),
                                     fmt::format("split.count is {}, the first shard says {}",
                                                 *shard_count ? fmt::format("{}", **shard_count) : "missing", n)),
                         p);
      }
      // Metadata outside the first shard is ignored by llama.cpp: it must agree with the first.
      for (const KeyValue& kv : shard->metadata()) {
        if (kv.key == keys::kSplitNo || kv.key == keys::kSplitCount) continue;
        const KeyValue* mine = head.find(kv.key);
        if (mine == nullptr || mine->value.type() != kv.value.type() ||
            !std::ranges::equal(mine->value.encoded(), kv.value.encoded())) {
          return with_file(split_error(std::string(kv.key),
                                       fmt::format("{} the first shard's",
                                                   mine ? "the value differs from" : "the key is missing from")),
                           p);
        }
      }
      model.shards_.push_back(std::move(shard).value());
      model.paths_.emplace_back(p);
    }
  }

  model.index_tensors();
  for (size_t i = 1; i < model.tensor_by_name_.size(); ++i) {
    const ModelTensor& a = model.tensors_[model.tensor_by_name_[i - 1]];
    const ModelTensor& b = model.tensors_[model.tensor_by_name_[i]];
    if (a.info->name == b.info->name) {
      return make_error(ErrorCode::duplicate_tensor, b.info->info_offset, std::string(b.info->name),
                        fmt::format("the tensor is in shard {} and in shard {}", a.shard + 1, b.shard + 1));
    }
  }
  if (n > 1) {
    auto expected = split_key<int32_t>(model.shards_.front(), keys::kSplitTensorsCount, first_path);
    if (!expected) return std::move(expected).error();
    if (!*expected || **expected < 0 || static_cast<size_t>(**expected) != model.tensors_.size()) {
      return with_file(split_error(std::string(keys::kSplitTensorsCount),
                                   fmt::format("split.tensors.count is {}, the {} shards hold {} tensors",
                                               *expected ? fmt::format("{}", **expected) : "missing", n,
                                               model.tensors_.size())),
                       first_path);
    }
  }
  return model;
}

const ModelTensor* SplitModel::find_tensor(std::string_view name) const {
  const auto it = std::ranges::lower_bound(tensor_by_name_, name, {},
                                           [&](size_t i) { return tensors_[i].info->name; });
  if (it == tensor_by_name_.end() || tensors_[*it].info->name != name) return nullptr;
  return &tensors_[*it];
}

Expected<ByteOrder> SplitModel::byte_order() const {
  const ByteOrder first = shards_.front().byte_order();
  for (size_t i = 1; i < shards_.size(); ++i) {
    if (shards_[i].byte_order() != first) {
      return split_error({}, fmt::format("{} is {}-endian but {} is {}-endian: shards of mixed byte order cannot be "
                                         "read as one model (convert one with gguf convert-endian)",
                                         paths_[i].string(), byte_order_name(shards_[i].byte_order()),
                                         paths_.front().string(), byte_order_name(first)));
    }
  }
  return first;
}

uint64_t SplitModel::tensor_bytes() const {
  uint64_t total = 0;
  for (const GgufFile& f : shards_) total += f.tensor_bytes();
  return total;
}

uint64_t SplitModel::file_bytes() const {
  uint64_t total = 0;
  for (const GgufFile& f : shards_) total += f.file_size();
  return total;
}

Expected<GgufBuilder> merge_builder(const SplitModel& model) {
  const GgufFile& head = model.metadata_file();
  // Tensor bytes are copied as stored: every shard must be in the same byte order.
  if (auto order = model.byte_order(); !order) return std::move(order).error();
  GgufBuilder b;
  if (auto r = b.set_version(head.version()); !r) return r.error();
  if (auto r = copy_metadata(head, b); !r) return r.error();
  for (const ModelTensor& t : model.tensors()) {
    if (auto r = b.add_tensor(t.info->name, t.info->type, t.info->shape(), t.data); !r) return r.error();
  }
  return b;
}

Expected<void> write_merged(const SplitModel& model, const std::filesystem::path& out, const WriteOptions& options) {
  std::error_code ec;
  for (const auto& p : model.paths()) {
    if (std::filesystem::equivalent(p, out, ec)) {
      return with_file(make_error(ErrorCode::output_is_input, std::nullopt, {}, "the output would replace an input shard"),
                       out.string());
    }
  }
  auto b = merge_builder(model);
  if (!b) return std::move(b).error();
  WriteOptions o = options;
  o.output.inputs.insert(o.output.inputs.end(), model.paths().begin(), model.paths().end());
  o.byte_order = model.metadata_file().byte_order();  // merge_builder checked every shard agrees
  if (model.tensors().empty()) o.pad_header_without_tensors = model.metadata_file().header_padded();
  return b->write_file(out, o);
}

bool SplitModel::has_tensor_data() const {
  return std::all_of(shards_.begin(), shards_.end(), [](const GgufFile& f) { return f.has_tensor_data(); });
}

FileSummary summarize(const SplitModel& model) {
  SummaryBuilder b;
  for (const ModelTensor& t : model.tensors()) b.add(*t.info);
  return std::move(b).finish();
}

void append_dump_json(std::string& out, const SplitModel& model, const JsonDumpOptions& options) {
  json::Writer w(out);
  w.begin_object();
  append_dump_members(w, model.metadata_file(), {.metadata = options.metadata, .tensors = false, .file = options.file});
  if (options.tensors) {
    w.key("tensors").begin_array();
    for (const ModelTensor& mt : model.tensors()) write_dump_tensor(w, *mt.info, mt.shard);
    w.end_array();
  }
  w.key("shards").begin_array();
  for (size_t i = 0; i < model.shards().size(); ++i) {
    const GgufFile& f = model.shards()[i];
    w.begin_object()
        .member("path", model.paths()[i].string())
        .member("version", f.version())
        .member("byte_order", byte_order_name(f.byte_order()))
        .member("alignment", f.alignment())
        .member("data_offset", f.data_offset())
        .member("file_size", f.file_size())
        .member("tensor_data", f.has_tensor_data())
        .member("tensor_count", f.tensors().size())
        .end_object();
  }
  w.end_array().end_object();
  out += '\n';
}

}  // namespace ggufkit
