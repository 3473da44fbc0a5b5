// What the metadata-editing verbs (set, rm, rename) share: options, value parsing from text and
// JSON, the report of a plan, and running it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ggufkit/edit.h"

namespace gguf_cli {

struct EditTarget {
  std::string file;
  std::string output;        // -o: write a new file instead of changing FILE
  bool dry_run = false;
  bool rewrite = false;      // never in place
  bool no_sync = false;      // skip fsync (safe against a killed process, not a power cut)
  bool force = false;        // -o may replace an existing file
  bool strict = false;       // refuse an edit after which gguf check finds a new error or warning
  std::string verb;          // set, rm, rename: for messages
  // Extra changes any editing verb accepts, so that one call makes several kinds of change.
  std::vector<std::string> removals;   // --rm KEY
  std::vector<std::string> renames;    // --rename OLD=NEW
};

// Adds FILE's companions: -o, --dry-run, --rewrite, --no-sync, --strict, --rm, --rename.
void add_edit_options(CLI::App& cmd, EditTarget& target);

// Appends the --rm and --rename changes; false (after a message) when one is malformed.
bool append_extra_changes(const EditTarget& target, std::vector<ggufkit::MetadataChange>& changes);

// The edit lock on target.file (ggufkit::EditLock), taken before the file is read and held until
// the edit is written; a dry run takes none. False (after a message) when it cannot be taken.
struct HeldEditLock {
  bool acquired = false;
  std::optional<ggufkit::EditLock> lock;  // empty for a dry run
  explicit operator bool() const { return acquired; }
};
HeldEditLock lock_for_edit(const EditTarget& target);

// Plans, reports (stdout) and applies (unless --dry-run) the changes. Returns the exit code. The
// first form opens target.file; the second takes it already open (set reads types from it first).
int run_edit(const EditTarget& target, const std::vector<ggufkit::MetadataChange>& changes);
int run_edit(const EditTarget& target, const ggufkit::GgufFile& file,
             const std::vector<ggufkit::MetadataChange>& changes);


}  // namespace gguf_cli
