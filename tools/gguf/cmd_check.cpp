// gguf check FILE [--base BASE.gguf] [--json] [--strict]: findings about a file an engine is about
// to load. Exit 0 with no errors (and no warnings under --strict), 1 otherwise, 2 when the file
// cannot be read at all.
#include <fmt/format.h>

#include <cstdio>

#include "commands.h"
#include "ggufkit/check.h"
#include "ggufkit/json.h"
#include "output.h"

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

void write_finding(ggufkit::json::Writer& w, const Finding& f) {
  w.begin_object().member("severity", ggufkit::severity_name(f.severity)).member("code", f.code).member("subject", f.subject);
  w.member("offset", f.offset);
  if (!f.file.empty()) w.member("file", f.file);
  w.member("message", f.message).end_object();
}

std::string report_json(const std::string& file, const CheckReport& report, bool strict) {
  std::string out;
  ggufkit::json::Writer w(out);
  w.begin_object()
      .member("file", file)
      .member("passed", report.passed(strict))
      .member("strict", strict)
      .member("complete", report.complete)
      .member("errors", report.count(Severity::error))
      .member("warnings", report.count(Severity::warning))
      .member("infos", report.count(Severity::info));
  w.key("findings").begin_array();
  for (const Finding& f : report.findings) write_finding(w, f);
  w.end_array().end_object();
  return out + "\n";
}

std::string report_text(const std::string& file, const CheckReport& report, bool strict) {
  std::string out;
  for (const Finding& f : report.findings) {
    out += f.describe();
    out += "\n";
  }
  const size_t errors = report.count(Severity::error), warnings = report.count(Severity::warning);
  out += fmt::format("{}: {} ({} error{}, {} warning{}, {} note{}{})\n", file,
                     report.passed(strict) ? "OK" : "FAILED", errors, errors == 1 ? "" : "s", warnings,
                     warnings == 1 ? "" : "s", report.count(Severity::info),
                     report.count(Severity::info) == 1 ? "" : "s",
                     report.complete ? "" : "; checking stopped at a structural break");
  return out;
}

int run_check(const CheckArgs& args) {
  ggufkit::CheckOptions options;
  if (!args.base.empty()) options.base = args.base;
  auto report = ggufkit::check_file(args.file, options);
  if (!report) {
    report_error(args.file, report.error());
    return kUsageOrIoError;
  }
  const std::string out =
      args.json ? report_json(args.file, *report, args.strict) : report_text(args.file, *report, args.strict);
  std::fwrite(out.data(), 1, out.size(), stdout);
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
  return [args] { return run_check(*args); };
}

}  // namespace gguf_cli
