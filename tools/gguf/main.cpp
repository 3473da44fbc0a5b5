// gguf: one tool, one verb per file in this folder.
#include <fmt/format.h>

#include <map>

#include "cli_docs.h"
#include "ggufkit/mapped_file.h"
#include "commands.h"
#include "output.h"

int main(int argc, char** argv) {
  // An input truncated while it is read: one line and exit 2, temporary files removed.
  ggufkit::exit_on_bus_error("gguf");
  CLI::App app{"gguf: inspect, validate and edit GGUF model files"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ggufkit 0.1.0");

  // Every verb, in the order --help lists them.
  static constexpr std::pair<std::string_view, gguf_cli::Runner (*)(CLI::App&)> kVerbs[] = {
      {"info", gguf_cli::register_info},       {"dump", gguf_cli::register_dump},
      {"extract", gguf_cli::register_extract}, {"quantize", gguf_cli::register_quantize},
      {"get", gguf_cli::register_get},         {"set", gguf_cli::register_set},
      {"rm", gguf_cli::register_rm},           {"rename", gguf_cli::register_rename},
      {"diff", gguf_cli::register_diff},       {"split", gguf_cli::register_split},
      {"merge", gguf_cli::register_merge},     {"convert-endian", gguf_cli::register_convert_endian},
      {"check", gguf_cli::register_check},     {"hash", gguf_cli::register_hash},
      {"convert", gguf_cli::register_convert}, {"types", gguf_cli::register_types},
      {"estimate", gguf_cli::register_estimate}, {"completion", gguf_cli::register_completion},
  };
  std::map<CLI::App*, gguf_cli::Runner> runners;
  auto add = [&](gguf_cli::Runner (*reg)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    gguf_cli::Runner r = reg(app);
    runners[app.get_subcommands({})[before]] = std::move(r);
  };
  // `gguf VERB ...` registers that verb alone: building every verb's options is a tenth of a
  // quick verb's time. The completion script, --help, the man page and an unknown verb need them all.
  const std::string_view first = argc > 1 ? std::string_view(argv[1]) : std::string_view();
  bool one = false;
  for (const auto& [name, reg] : kVerbs) {
    if (name == first && name != "completion") {
      add(reg);
      one = true;
    }
  }
  if (!one) {
    for (const auto& [name, reg] : kVerbs) add(reg);
  }

  // The man page (installed as gguf.1) from the same definitions as --help; not a verb users need.
  if (argc == 2 && std::string_view(argv[1]) == "--man-page") return gguf_cli::write_result(gguf_cli::man_page(app));

  // CLI11 would call an unknown verb a missing subcommand; say what is wrong instead.
  const auto is_verb = [&](std::string_view name) {
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->get_name() == name) return true;
    }
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !is_verb(argv[1])) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    fmt::print(stderr, "gguf: unknown verb '{}'{}\n", gguf_cli::terminal_safe(argv[1]),
               gguf_cli::suggestion_or(ggufkit::nearest_name(argv[1], names), " (see gguf --help)"));
    return gguf_cli::kUsageOrIoError;
  }
  // CLI11's own messages quote the argument at fault: escaped as every line is (a value with ESC).
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    std::string out;
    for (const std::string& line : CLI::detail::split(CLI::FailureMessage::simple(a, e), '\n')) {
      if (!line.empty()) out += gguf_cli::terminal_safe(line) + "\n";
    }
    return out;
  });
  gguf_cli::expand_llama_short_options(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return gguf_cli::finish_output(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return gguf_cli::finish_output(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return gguf_cli::finish_output(app.exit(e));
  } catch (const CLI::ExtrasError& e) {
    // An unknown option: name the nearest of the verb's own.
    if (const auto line = gguf_cli::unknown_option_message(app)) {
      fmt::print(stderr, "{}\n", gguf_cli::terminal_safe(*line));
    } else {
      app.exit(e);
    }
    return gguf_cli::kUsageOrIoError;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return gguf_cli::kUsageOrIoError;
  }
  for (auto& [sub, run] : runners) {
    if (!sub->parsed()) continue;
    try {
      return gguf_cli::finish_output(run());
    } catch (const std::system_error& e) {  // {fmt} throws when stdout refuses a write
      return gguf_cli::output_failed(e.code().value());
    }
  }
  return gguf_cli::kUsageOrIoError;
}
