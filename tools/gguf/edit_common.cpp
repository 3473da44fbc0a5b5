#include "edit_common.h"

#include "commands.h"

#include <chrono>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "ggufkit/check.h"
#include "ggufkit/json.h"
#include "output.h"

namespace gguf_cli {
namespace {

using ggufkit::Expected;
using ggufkit::MetadataChange;
using ggufkit::MetadataValue;
using ggufkit::ValueType;
using ggufkit::ValueView;

// A value for a report line: arrays by their size and type, strings shortened to 80 characters.
std::string display(const ValueView& value) { return value_text(value, {80, 0, 80}); }

std::string type_label(const ValueView& value) {
  if (value.type() != ValueType::Array) return std::string(ggufkit::value_type_name(value.type()));
  const auto array = value.as_array();
  return fmt::format("array of {}", array ? ggufkit::value_type_name(array->element_type()) : "?");
}

void print_changes(const ggufkit::EditPlan& plan) {
  for (const auto& c : plan.changes) {
    if (c.renamed_from) {
      fmt::print("rename {} -> {}\n", terminal_safe(*c.renamed_from), terminal_safe(c.key));
    } else if (!c.after) {
      // A key renamed away is reported by its new name.
      bool renamed = false;
      for (const auto& other : plan.changes) renamed |= other.renamed_from && *other.renamed_from == c.key;
      if (!renamed) fmt::print("remove {} (was {})\n", terminal_safe(c.key), display(c.before->view()));
    } else if (!c.before) {
      fmt::print("add {} = {} ({})\n", terminal_safe(c.key), display(c.after->view()), type_label(c.after->view()));
    } else if (c.before->type() != c.after->type()) {
      fmt::print("set {}: {} ({}) -> {} ({})\n", terminal_safe(c.key), display(c.before->view()), type_label(c.before->view()),
                 display(c.after->view()), type_label(c.after->view()));
    } else {
      const bool same = std::ranges::equal(c.before->encoded(), c.after->encoded());
      fmt::print("set {}: {} -> {}{}\n", terminal_safe(c.key), display(c.before->view()), display(c.after->view()),
                 same ? " (unchanged)" : "");
    }
  }
}

// What gguf check finds wrong with the edited metadata that it did not find before: errors (llama.cpp
// would refuse the file: a loader key given another type, a special token id past the vocabulary,
// tokens, scores and token types of different lengths) and warnings. Both headers are checked as
// metadata-only files, so only what the edit changes differs.
std::vector<ggufkit::Finding> introduced_problems(const ggufkit::EditPlan& plan) {
  if (plan.mode == ggufkit::EditMode::unchanged || plan.header.empty()) return {};
  const auto key = [](const ggufkit::Finding& f) { return fmt::format("{}\n{}\n{}", f.code, f.subject, f.message); };
  std::set<std::string> before;
  for (const ggufkit::Finding& f : ggufkit::check_bytes(plan.original_header).findings) before.insert(key(f));
  std::vector<ggufkit::Finding> out;
  for (ggufkit::Finding& f : ggufkit::check_bytes(plan.header).findings) {
    if (f.severity != ggufkit::Severity::info && !before.contains(key(f))) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

void add_edit_options(CLI::App& cmd, EditTarget& target) {
  cmd.add_option("-o,--output", target.output, "Write the edited model to this file; FILE is left as it is");
  add_force_flag(cmd, target.force);
  cmd.add_flag("--dry-run", target.dry_run, "Show what would change and how it would be written; write nothing");
  add_progress_flags(cmd);
  cmd.add_flag("--rewrite", target.rewrite, "Always write a new file and rename it into place, never in place");
  add_no_sync_flag(cmd, target.no_sync);
  cmd.add_flag("--strict", target.strict,
               "Refuse the edit (exit 2, nothing written) when gguf check would find a new error or warning "
               "in the edited file; without it they are warnings");
  cmd.add_option("--rename", target.renames, "Also rename a key, OLD=NEW, after the verb's own changes (repeatable)");
  cmd.add_option("--rm", target.removals, "Also remove a key, after the renames (repeatable)");
}

bool append_extra_changes(const EditTarget& target, std::vector<MetadataChange>& changes) {
  for (const std::string& spec : target.renames) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      fmt::print(stderr, "gguf: --rename takes OLD=NEW, not '{}'\n", terminal_safe(spec));
      return false;
    }
    changes.push_back(MetadataChange::rename(spec.substr(0, eq), spec.substr(eq + 1)));
  }
  for (const std::string& key : target.removals) changes.push_back(MetadataChange::remove(key));
  return true;
}

HeldEditLock lock_for_edit(const EditTarget& target) {
  if (target.dry_run) return {.acquired = true, .lock = std::nullopt};
  auto lock = ggufkit::EditLock::acquire(target.file);
  if (!lock) {
    report_error(target.file, lock.error());
    return {};
  }
  return {.acquired = true, .lock = std::move(lock).value()};
}

int run_edit(const EditTarget& target, const std::vector<MetadataChange>& changes) {
  const auto lock = lock_for_edit(target);  // held until the edit is written
  if (!lock) return kUsageOrIoError;
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
  if (to_other && !outputs_allowed({target.output}, {.overwrite = target.force, .inputs = {target.file}})) {
    return kUsageOrIoError;
  }
  const auto problems = introduced_problems(*plan);
  for (const ggufkit::Finding& f : problems) {
    fmt::print(stderr, "gguf {}: {}: after this edit, gguf check finds: {}\n", target.verb,
               target.strict ? "refused" : "warning", terminal_safe(f.describe()));
  }
  if (target.strict && !problems.empty()) {
    fmt::print(stderr, "gguf {}: --strict: nothing written\n", target.verb);
    return kUsageOrIoError;
  }
  const std::string destination = to_other ? target.output : target.file;
  std::string how;
  switch (plan->mode) {
    case ggufkit::EditMode::unchanged: how = "nothing to change"; break;
    case ggufkit::EditMode::in_place:
      how = fmt::format("in place: {} bytes at offset {}", plan->write_length, plan->write_offset);
      break;
    case ggufkit::EditMode::rewrite: how = fmt::format("rewrite ({})", plan->reason); break;
  }
  if (to_other) how = fmt::format("new file {}", terminal_safe(target.output));
  if (target.dry_run) {
    print_changes(*plan);
    fmt::print("dry run, nothing written: {}\n", how);
    return kOk;
  }
  ggufkit::ApplyOptions apply;
  apply.sync = !target.no_sync;
  apply.output.overwrite = target.force;
  watch_interrupts();
  apply.cancel = &interrupt_flag();
  const Progress progress;
  apply.progress = [&progress](uint64_t done, uint64_t all) { progress.bytes(done, all, "tensor data copied"); };
  const std::string verb = target.verb.empty() ? "edit" : target.verb;
  const bool writes = to_other || plan->mode != ggufkit::EditMode::unchanged;
  if (const int status = write_status(verb, ggufkit::apply_metadata_edit(file, target.file, *plan, destination, apply),
                                      destination, destination, writes);
      status != kOk) {
    return status;  // nothing on stdout: the changes listed are the ones made
  }
  print_changes(*plan);
  fmt::print("{}: {}\n", terminal_safe(destination), how);
  return kOk;
}

}  // namespace gguf_cli
