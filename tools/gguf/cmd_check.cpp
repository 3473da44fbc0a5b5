// gguf check FILE [--base BASE.gguf] [--json] [--strict]: findings about a file an engine is about
// to load. Exit 0 with no errors (and no warnings under --strict), 1 otherwise, 2 when the file
// cannot be read at all.
#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/check.h"
#include "ggufkit/remote.h"
#include "output.h"
#include "printer.h"

namespace gguf_cli {
namespace {

using ggufkit::CheckReport;
using ggufkit::Finding;
using ggufkit::Severity;

struct CheckArgs {
  std::string file;
  std::string base;
  bool json = false;
  bool strict = false;
};

// How the verdict line names what the file was checked as; nothing for a model.
std::string check_kind_text(ggufkit::FileKind kind) {
  switch (kind) {
    case ggufkit::FileKind::model: return "";
    case ggufkit::FileKind::adapter: return " (LoRA adapter)";
    case ggufkit::FileKind::projector: return " (multimodal projector)";
    case ggufkit::FileKind::vocabulary: return " (vocabulary only)";
    case ggufkit::FileKind::shard: return " (shard of a split model)";
  }
  return "";
}

// The findings, one line each, then the verdict.
void print_report(Printer& p, const std::string& file, const CheckReport& report, bool strict) {
  p.begin_object().begin_array("findings");
  for (const Finding& f : report.findings) {
    p.begin_object()
        .field("severity", ggufkit::severity_name(f.severity))
        .field("code", f.code)
        .field("subject", f.subject)
        .field("offset", f.offset);
    if (!f.file.empty()) p.field("file", f.file);
    p.field("message", f.message, f.describe());  // people read the finding described in one line
    p.end_object();
  }
  p.end_array();
  const bool passed = report.passed(strict);
  p.begin_line();
  p.field("file", file, file);
  p.field("kind", ggufkit::file_kind_name(report.kind), check_kind_text(report.kind));
  p.field("passed", passed, passed ? ": OK (" : ": FAILED (");
  p.field("strict", strict);
  p.field("complete", report.complete);
  p.field("errors", report.count(Severity::error), plural(report.count(Severity::error), "error", "errors"));
  p.field("warnings", report.count(Severity::warning), ", " + plural(report.count(Severity::warning), "warning", "warnings"));
  p.field("infos", report.count(Severity::info), ", " + plural(report.count(Severity::info), "note", "notes"));
  if (!report.complete) p.text("; checking stopped at a structural break");
  p.text(")").end_line();
  p.end_object();
}

int run_check(const CheckArgs& args) {
  ggufkit::CheckOptions options;
  if (!args.base.empty()) options.base = args.base;
  std::optional<ggufkit::GgufFile> remote;
  if (ggufkit::is_remote_address(args.file)) {
    if (!args.base.empty()) {
      fmt::print(stderr, "gguf: check: --base needs a local file; {} is remote\n", terminal_safe(args.file));
      return kUsageOrIoError;
    }
    remote = open_remote_or_report(args.file, {});
    if (!remote) return kUsageOrIoError;
  }
  auto report = remote ? ggufkit::Expected<ggufkit::CheckReport>(
                             ggufkit::check_header(remote->bytes(), remote->file_size(), options))
                       : ggufkit::check_file(args.file, options);
  if (!report) {
    report_error(args.file, report.error());
    return kUsageOrIoError;
  }
  std::string out;
  print_report(*Printer::make(args.json, out), args.file, *report, args.strict);
  if (const int written = write_result(out); written != kOk) return written;
  return report->passed(args.strict) ? kOk : kProblemFound;
}

}  // namespace

Runner register_check(CLI::App& app) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* cmd = app.add_subcommand("check", "Validate a file (or split model): structure, metadata, architecture, "
                                              "tokenizer, RoPE, LoRA adapters, engine compatibility");
  cmd->add_option("file", args->file, "GGUF file, or the first shard of a split model")->required();
  cmd->add_option("--base", args->base, "For a LoRA adapter: the base model it applies to");
  cmd->add_flag("--json", args->json, "Findings as JSON");
  cmd->add_flag("--strict", args->strict, "Warnings fail the check too (exit 1)");
  add_remote_options(*cmd);
  return [args] { return run_check(*args); };
}

}  // namespace gguf_cli
