#include "edit_common.h"

#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ggufkit/json.h"
#include "output.h"

namespace gguf_cli {
namespace {

using ggufkit::Expected;
using ggufkit::MetadataChange;
using ggufkit::MetadataValue;
using ggufkit::ValueType;
using ggufkit::ValueView;

ggufkit::Error usage_error(std::string message) {
  return ggufkit::make_error(ggufkit::ErrorCode::invalid_argument, 0, {}, std::move(message));
}

// A value for a report line: arrays by their size, long strings shortened.
std::string display(const ValueView& value) {
  if (value.type() == ValueType::Array) {
    const auto array = value.as_array();
    if (!array) return "[malformed array]";
    return fmt::format("[{} {}]", array->size(), ggufkit::value_type_name(array->element_type()));
  }
  std::string json;
  ggufkit::json::append_value(json, value);
  return shorten_for_display(json, 80);
}

std::string type_label(const ValueView& value) {
  if (value.type() != ValueType::Array) return std::string(ggufkit::value_type_name(value.type()));
  const auto array = value.as_array();
  return fmt::format("array of {}", array ? ggufkit::value_type_name(array->element_type()) : "?");
}

void print_changes(const ggufkit::EditPlan& plan) {
  for (const auto& c : plan.changes) {
    if (c.renamed_from) {
      fmt::print("rename {} -> {}\n", *c.renamed_from, c.key);
    } else if (!c.after) {
      // A key renamed away is reported by its new name.
      bool renamed = false;
      for (const auto& other : plan.changes) renamed |= other.renamed_from && *other.renamed_from == c.key;
      if (!renamed) fmt::print("remove {} (was {})\n", c.key, display(c.before->view()));
    } else if (!c.before) {
      fmt::print("add {} = {} ({})\n", c.key, display(c.after->view()), type_label(c.after->view()));
    } else if (c.before->type() != c.after->type()) {
      fmt::print("set {}: {} ({}) -> {} ({})\n", c.key, display(c.before->view()), type_label(c.before->view()),
                 display(c.after->view()), type_label(c.after->view()));
    } else {
      const bool same = std::ranges::equal(c.before->encoded(), c.after->encoded());
      fmt::print("set {}: {} -> {}{}\n", c.key, display(c.before->view()), display(c.after->view()),
                 same ? " (unchanged)" : "");
    }
  }
}

// The leaf type of a JSON value: what every scalar in it can be stored as.
Expected<ValueType> infer_leaf_type(const nlohmann::json& j) {
  bool any_string = false, any_bool = false, any_float = false, any_int = false, any_negative = false;
  bool fits_u32 = true, fits_i32 = true;
  std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& v) {
    if (v.is_array()) {
      for (const auto& e : v) walk(e);
    } else if (v.is_string()) {
      any_string = true;
    } else if (v.is_boolean()) {
      any_bool = true;
    } else if (v.is_number_float()) {
      any_float = true;
    } else if (v.is_number_unsigned()) {
      any_int = true;
      const auto u = v.get<uint64_t>();
      fits_u32 = fits_u32 && u <= UINT32_MAX;
      fits_i32 = fits_i32 && u <= INT32_MAX;
    } else if (v.is_number_integer()) {
      any_int = true;
      const auto i = v.get<int64_t>();
      any_negative = any_negative || i < 0;
      fits_u32 = fits_u32 && i >= 0 && i <= UINT32_MAX;
      fits_i32 = fits_i32 && i >= INT32_MIN && i <= INT32_MAX;
    } else {
      any_string = any_bool = true;  // null or object: rejected below
    }
  };
  walk(j);
  const int kinds = int{any_string} + int{any_bool} + int{any_float || any_int};
  if (kinds == 0) return usage_error("cannot infer the type of an empty array: give --type");
  if (kinds > 1) return usage_error("the JSON mixes strings, booleans and numbers (or holds null or objects)");
  if (any_string) return ValueType::String;
  if (any_bool) return ValueType::Bool;
  if (any_float) return ValueType::Float32;
  if (fits_u32 && !any_negative) return ValueType::UInt32;
  if (fits_i32) return ValueType::Int32;
  return any_negative ? ValueType::Int64 : ValueType::UInt64;
}

Expected<MetadataValue> convert(const nlohmann::json& j, ValueType leaf) {
  if (j.is_array()) {
    std::vector<MetadataValue> elements;
    elements.reserve(j.size());
    for (const auto& e : j) {
      auto v = convert(e, leaf);
      if (!v) return v;
      elements.push_back(std::move(*v));
    }
    const ValueType element_type = elements.empty() ? leaf : elements.front().type();
    return MetadataValue::array_of(element_type, elements);
  }
  if (leaf == ValueType::String) {
    if (!j.is_string()) return usage_error(fmt::format("{} is not a string", j.dump()));
    return MetadataValue::string(j.get<std::string>());
  }
  if (leaf == ValueType::Bool) {
    if (!j.is_boolean()) return usage_error(fmt::format("{} is not a boolean", j.dump()));
    return MetadataValue::of(j.get<bool>());
  }
  if (!j.is_number()) return usage_error(fmt::format("{} is not a number", j.dump()));
  if (j.is_number_float() && leaf != ValueType::Float32 && leaf != ValueType::Float64) {
    return usage_error(fmt::format("{} is not an integer ({})", j.dump(), ggufkit::value_type_name(leaf)));
  }
  return ggufkit::parse_scalar_value(j.dump(), leaf);
}

}  // namespace

Expected<MetadataValue> value_from_json(std::string_view json_text, std::optional<ValueType> type,
                                        const ValueView* like) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    return usage_error(fmt::format("not valid JSON: {}", e.what()));
  }
  ValueType leaf{};
  if (type) {
    leaf = *type;
  } else if (like != nullptr) {
    leaf = like->type();
    if (leaf == ValueType::Array) {
      const auto array = like->as_array();
      leaf = array ? array->element_type() : ValueType::Array;
      if (leaf == ValueType::Array || !j.is_array()) {
        auto inferred = infer_leaf_type(j);
        if (!inferred) return std::move(inferred).error();
        leaf = *inferred;
      }
    } else if (j.is_array()) {
      auto inferred = infer_leaf_type(j);
      if (!inferred) return std::move(inferred).error();
      leaf = *inferred;
    }
  } else {
    auto inferred = infer_leaf_type(j);
    if (!inferred) return std::move(inferred).error();
    leaf = *inferred;
  }
  return convert(j, leaf);
}

void add_edit_options(CLI::App& cmd, EditTarget& target) {
  cmd.add_option("-o,--output", target.output, "Write the edited model to this file; FILE is left as it is");
  cmd.add_flag("--dry-run", target.dry_run, "Show what would change and how it would be written; write nothing");
  cmd.add_flag("--rewrite", target.rewrite, "Always write a new file and rename it into place, never in place");
  cmd.add_flag("--no-sync", target.no_sync,
               "Do not fsync before the rename: faster, still safe if the process dies, not if the power fails");
  cmd.add_option("--rename", target.renames, "Also rename a key, OLD=NEW, after the verb's own changes (repeatable)");
  cmd.add_option("--rm", target.removals, "Also remove a key, after the renames (repeatable)");
}

bool append_extra_changes(const EditTarget& target, std::vector<MetadataChange>& changes) {
  for (const std::string& spec : target.renames) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      fmt::print(stderr, "gguf: --rename takes OLD=NEW, not '{}'\n", spec);
      return false;
    }
    changes.push_back(MetadataChange::rename(spec.substr(0, eq), spec.substr(eq + 1)));
  }
  for (const std::string& key : target.removals) changes.push_back(MetadataChange::remove(key));
  return true;
}

int run_edit(const EditTarget& target, const std::vector<MetadataChange>& changes) {
  const auto file = open_or_report(target.file);
  if (!file) return kUsageOrIoError;
  return run_edit(target, *file, changes);
}

int run_edit(const EditTarget& target, const ggufkit::GgufFile& file, const std::vector<MetadataChange>& changes) {
  std::error_code ec;
  const bool to_other = !target.output.empty() && !std::filesystem::equivalent(target.file, target.output, ec);
  ggufkit::EditOptions options;
  options.force_rewrite = target.rewrite || to_other;
  const auto plan = ggufkit::plan_metadata_edit(file, changes, options);
  if (!plan) {
    report_error(target.file, plan.error());
    return kUsageOrIoError;
  }
  print_changes(*plan);
  const std::string destination = to_other ? target.output : target.file;
  std::string how;
  switch (plan->mode) {
    case ggufkit::EditMode::unchanged: how = "nothing to change"; break;
    case ggufkit::EditMode::in_place:
      how = fmt::format("in place: {} bytes at offset {}", plan->write_length, plan->write_offset);
      break;
    case ggufkit::EditMode::rewrite: how = fmt::format("rewrite ({})", plan->reason); break;
  }
  if (to_other) how = fmt::format("new file {}", target.output);
  if (target.dry_run) {
    fmt::print("dry run, nothing written: {}\n", how);
    return kOk;
  }
  ggufkit::ApplyOptions apply;
  apply.sync = !target.no_sync;
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  apply.progress = [&](uint64_t done, uint64_t all) {
    const auto now = std::chrono::steady_clock::now();
    // Quiet for copies that finish within a second.
    if (now - last < std::chrono::seconds(1)) return;
    last = now;
    fmt::print(stderr, "copying tensor data: {:5.1f}% of {}\n", all ? 100.0 * static_cast<double>(done) / static_cast<double>(all) : 100.0,
               human_bytes(all));
  };
  if (auto r = ggufkit::apply_metadata_edit(file, target.file, *plan, destination, apply); !r) {
    report_error(destination, r.error());
    return kUsageOrIoError;
  }
  fmt::print("{}: {}\n", destination, how);
  return kOk;
}

}  // namespace gguf_cli
