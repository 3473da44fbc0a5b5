#include "cli_docs.h"
#include "output.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "ggufkit/conventions.h"
#include "ggufkit/tensor_types.h"

namespace gguf_cli {
namespace {

std::vector<const CLI::App*> verbs(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

std::vector<const CLI::Option*> visible_options(const CLI::App& cmd) {
  return cmd.get_options([](const CLI::Option* o) { return !o->get_group().empty(); });
}

// A flag has no type name (CLI11's own help shows a value placeholder exactly when there is one).
bool takes_value(const CLI::Option& o) { return o.get_positional() || !o.get_type_name().empty(); }

// "--output,-o" style names: long names first, as --help lists them.
std::vector<std::string> option_names(const CLI::Option& o) {
  std::vector<std::string> names;
  for (const auto& l : o.get_lnames()) names.push_back("--" + l);
  for (const auto& s : o.get_snames()) names.push_back("-" + s);
  return names;
}

// The words an option's value may be: a type list, explicit choices, or file names (bash's
// default completion, also what a number gets).
enum class ValueKind { files, types, choices };
struct ValueSpec {
  ValueKind kind = ValueKind::files;
  std::vector<std::string> choices;
};

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(sep, start), s.size());
    if (end > start) out.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

ValueSpec value_spec(const CLI::Option& o) {
  const std::string full = o.get_type_name();
  // A validator such as CLI::IsMember describes itself as "{a,b,c}" after the type's own name.
  if (const size_t open = full.find('{'); open != std::string::npos) {
    const size_t close = full.find('}', open);
    if (close != std::string::npos) return {ValueKind::choices, split(std::string_view(full).substr(open + 1, close - open - 1), ',')};
  }
  const std::string name = full.substr(0, full.find(':'));
  if (name == "TYPE") return {ValueKind::types, {}};
  if (name.find('|') != std::string::npos) return {ValueKind::choices, split(name, '|')};
  return {ValueKind::files, {}};
}

std::string join(const std::vector<std::string>& words, std::string_view sep) {
  return fmt::format("{}", fmt::join(words, sep));
}

// One bash `case` arm's word list for a value spec.
std::string bash_value_words(const ValueSpec& spec) {
  switch (spec.kind) {
    case ValueKind::types: return "$types";
    case ValueKind::choices: return join(spec.choices, " ");
    case ValueKind::files: return "";
  }
  return "";
}

// roff: escape backslashes and hyphens, and keep a line from starting with a control character.
std::string roff(std::string_view text) {
  std::string out;
  bool line_start = true;
  for (const char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

std::string positional_usage(const CLI::Option& o) {
  std::string name = o.get_name();
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (o.get_items_expected_max() > 1) name += "...";
  return o.get_required() ? name : "[" + name + "]";
}

}  // namespace

std::vector<const ggufkit::FileTypeInfo*> quantize_presets() {
  std::vector<const ggufkit::FileTypeInfo*> presets;
  for (const auto& ft : ggufkit::all_file_types()) {
    if (!ft.removed && ft.default_type) presets.push_back(&ft);
  }
  return presets;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const ggufkit::FileTypeInfo* preset : quantize_presets()) names.emplace_back(ggufkit::file_type_preset_name(*preset));
  return names;
}

std::optional<std::string> unknown_option_message(CLI::App& app) {
  CLI::App* verb = nullptr;
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->parsed()) verb = sub;
  }
  CLI::App& where = verb != nullptr ? *verb : app;
  for (const std::string& extra : where.remaining()) {
    if (extra.size() < 2 || extra[0] != '-') continue;
    const std::string word = extra.substr(0, extra.find('='));
    std::vector<std::string> names = {"--help"};
    for (const CLI::Option* o : visible_options(where)) {
      if (o->get_positional()) continue;
      for (auto& n : option_names(*o)) names.push_back(std::move(n));
    }
    const std::string verb_name = verb != nullptr ? " " + verb->get_name() : "";
    return fmt::format("gguf{}: unknown option '{}'{}", verb_name, word,
                       suggestion_or(ggufkit::nearest_name(word, names), fmt::format(" (see gguf{} --help)", verb_name)));
  }
  return std::nullopt;
}

std::vector<std::string> tensor_type_names() {
  std::vector<std::string> names;
  for (const auto& t : ggufkit::all_type_traits()) {
    if (t.status != ggufkit::TypeStatus::supported || t.block_size == 0) continue;
    const bool float_type = t.type() == ggufkit::TensorType::F32 || t.type() == ggufkit::TensorType::F16 ||
                            t.type() == ggufkit::TensorType::BF16;
    if (t.quantized || float_type) names.emplace_back(t.name);
  }
  return names;
}

std::vector<std::string> quantization_type_names() {
  std::vector<std::string> names = preset_names();
  for (auto& n : tensor_type_names()) names.push_back(std::move(n));
  return names;
}

std::string bash_completion_script(const CLI::App& app) {
  std::vector<std::string> verb_names;
  for (const CLI::App* v : verbs(app)) verb_names.push_back(v->get_name());
  std::vector<std::string> top_options;
  for (const CLI::Option* o : visible_options(app)) {
    for (auto& n : option_names(*o)) top_options.push_back(std::move(n));
  }

  std::string s;
  s += "# bash completion for gguf (ggufkit), generated by `gguf completion bash` from the CLI's own definition.\n";
  s += "# Install: /usr/share/bash-completion/completions/gguf, or `source <(gguf completion bash)`.\n";
  s += "_gguf() {\n";
  s += "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n";
  s += fmt::format("  local types=\"{}\"\n", join(quantization_type_names(), " "));
  s += "  local verb='' i=1\n";
  s += "  while [[ $i -lt $COMP_CWORD ]]; do\n";
  s += "    case ${COMP_WORDS[i]} in -*) ;; *) verb=${COMP_WORDS[i]}; break ;; esac\n";
  s += "    i=$((i + 1))\n";
  s += "  done\n";
  s += "  if [[ -z $verb ]]; then\n";
  s += fmt::format("    COMPREPLY=($(compgen -W \"{} {}\" -- \"$cur\"))\n", join(verb_names, " "), join(top_options, " "));
  s += "    return 0\n";
  s += "  fi\n";
  s += "  local options='' valued='' positional=''\n";
  s += "  case $verb in\n";
  for (const CLI::App* v : verbs(app)) {
    std::vector<std::string> names, valued;
    std::vector<std::string> value_arms;  // "--opt|-o) words ;;"
    std::vector<std::string> positional_kinds;
    for (const CLI::Option* o : visible_options(*v)) {
      if (o->get_positional()) {
        const ValueSpec spec = value_spec(*o);
        const std::string words = bash_value_words(spec);
        // A positional taking several values takes the rest of the words.
        positional_kinds.push_back(words.empty() ? "-" : words);
        if (o->get_items_expected_max() > 1) positional_kinds.back() += " ...";
        continue;
      }
      auto n = option_names(*o);
      names.insert(names.end(), n.begin(), n.end());
      if (!takes_value(*o)) continue;
      valued.insert(valued.end(), n.begin(), n.end());
      const std::string words = bash_value_words(value_spec(*o));
      value_arms.push_back(fmt::format("{}) {} ;;", join(n, "|"), words.empty() ? "return 0" : "COMPREPLY=($(compgen -W \"" + words + "\" -- \"$cur\")); return 0"));
    }
    s += fmt::format("    {})\n", v->get_name());
    s += fmt::format("      options=\"{}\"\n", join(names, " "));
    s += fmt::format("      valued=\" {} \"\n", join(valued, " "));
    s += "      case $prev in\n";
    for (const auto& arm : value_arms) s += "        " + arm + "\n";
    s += "      esac\n";
    // The n-th positional's words: "-" for file names; "... " marks one that takes the rest.
    std::string pos;
    for (const auto& k : positional_kinds) pos += (pos.empty() ? "" : ";") + k;
    s += fmt::format("      positional=\"{}\"\n", pos);
    s += "      ;;\n";
  }
  s += "    *) return 0 ;;\n";
  s += "  esac\n";
  s += "  if [[ $cur == -* ]]; then\n";
  s += "    COMPREPLY=($(compgen -W \"$options\" -- \"$cur\"))\n";
  s += "    return 0\n";
  s += "  fi\n";
  s += "  # Which positional this word is: count the words after the verb that are not options or their values.\n";
  s += "  local n=0 j=$((i + 1))\n";
  s += "  while [[ $j -lt $COMP_CWORD ]]; do\n";
  s += "    case ${COMP_WORDS[j]} in\n";
  s += "      -*) [[ $valued == *\" ${COMP_WORDS[j]} \"* ]] && j=$((j + 1)) ;;\n";
  s += "      *) n=$((n + 1)) ;;\n";
  s += "    esac\n";
  s += "    j=$((j + 1))\n";
  s += "  done\n";
  s += "  local IFS=';' kinds=() k=0 words='-'\n";
  s += "  read -ra kinds <<< \"$positional\"\n";
  s += "  IFS=$' \\t\\n'\n";
  s += "  while [[ $k -lt ${#kinds[@]} ]]; do\n";
  s += "    words=${kinds[k]}\n";
  s += "    [[ $k -eq $n || $words == *' ...' ]] && break\n";
  s += "    k=$((k + 1))\n";
  s += "  done\n";
  s += "  [[ $k -ge ${#kinds[@]} ]] && words='-'\n";
  s += "  words=${words% ...}\n";
  s += "  [[ $words == - ]] && return 0  # file names: bash's default completion\n";
  s += "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n";
  s += "}\n";
  s += "complete -o bashdefault -o default -F _gguf gguf\n";
  return s;
}

std::string man_page(const CLI::App& app) {
  std::string s;
  s += ".\\\" The gguf(1) man page, generated by `gguf --man-page` from the CLI's own definition: edit\n";
  s += ".\\\" the options in tools/gguf/cmd_*.cpp, not this file.\n";
  s += ".TH GGUF 1 \"\" \"ggufkit 0.1.0\" \"User Commands\"\n";
  s += ".SH NAME\n";
  s += "gguf \\- inspect, validate, edit, quantize and convert GGUF model files\n";
  s += ".SH SYNOPSIS\n";
  s += ".B gguf\n.I verb\n[\\fIoptions\\fR] [\\fIarguments\\fR]\n.br\n.B gguf\n.I verb\n.B \\-\\-help\n";
  s += ".SH DESCRIPTION\n";
  s += "GGUF is the model file format of llama.cpp. Every file is untrusted input: it is validated as it is\n"
       "read, and a rejection names the record, the byte offset and the reason. Files are written to a\n"
       "temporary name and renamed into place.\n";
  s += ".PP\nResults go to standard output and nothing else does; progress and errors go to standard error.\n"
       "With \\fB\\-\\-json\\fR, the verbs that have it print machine\\-readable output.\n";
  s += ".SH VERBS\n";
  for (const CLI::App* v : verbs(app)) {
    std::vector<std::string> usage;
    for (const CLI::Option* o : visible_options(*v)) {
      if (o->get_positional()) usage.push_back(positional_usage(*o));
    }
    s += fmt::format(".SS \"gguf {} [options] {}\"\n", v->get_name(), roff(join(usage, " ")));
    s += roff(v->get_description()) + ".\n";
    const std::string footer = v->get_footer();
    if (!footer.empty()) s += ".PP\n" + roff(footer) + "\n";
    for (const CLI::Option* o : visible_options(*v)) {
      s += ".TP\n";
      if (o->get_positional()) {
        s += fmt::format("\\fI{}\\fR\n", roff(positional_usage(*o)));
      } else {
        std::string names;
        for (const auto& n : option_names(*o)) names += (names.empty() ? "" : ", ") + fmt::format("\\fB{}\\fR", roff(n));
        if (takes_value(*o)) {
          std::string type = o->get_type_name();
          type = type.substr(0, type.find(':'));
          // A list of choices may break after each "|" (roff's zero-width break point \:).
          std::string shown = roff(type);
          for (size_t at = shown.find('|'); at != std::string::npos; at = shown.find('|', at + 3)) shown.insert(at + 1, "\\:");
          names += fmt::format(" \\fI{}\\fR", shown);
        }
        s += names + "\n";
      }
      s += roff(o->get_description()) + "\n";
    }
  }
  s += ".SH TYPES\n";
  s += "A \\fITYPE\\fR is a quantization preset, as llama\\-quantize names them:\n";
  s += roff(join(preset_names(), ", ")) + ";\n";
  s += "or a tensor type, as ggml names them: " + roff(join(tensor_type_names(), ", ")) + ".\n";
  s += "Case does not matter.\n";
  s += ".SH EXIT STATUS\n";
  s += ".TP\n.B 0\nSuccess.\n.TP\n.B 1\nA problem was found (\\fBcheck\\fR findings, \\fBdiff\\fR differences, "
       "a \\fBhash \\-\\-check\\fR mismatch).\n.TP\n.B 2\nA usage or I/O error, including a file that is not valid GGUF; "
       "one line on standard error says which file, where and why.\n.TP\n.B 130\nInterrupted (SIGINT); nothing was left behind.\n";
  s += ".SH EXAMPLES\n";
  s += ".nf\n";
  s += roff("gguf info model.gguf\n"
            "gguf check download.gguf --json\n"
            "gguf quantize model-f16.gguf model-q4_k_m.gguf Q4_K_M\n"
            "gguf set model.gguf tokenizer.chat_template --from-file template.jinja\n"
            "gguf split model.gguf out/model --max-size 2G\n"
            "gguf convert ~/hf/Qwen3-0.6B qwen3-0.6b-f16.gguf\n");
  s += ".fi\n";
  s += ".SH SEE ALSO\n";
  s += "The README and docs/cli.md of ggufkit; \\fBllama\\-quantize\\fR(1), \\fBllama\\-gguf\\-split\\fR(1).\n";
  return s;
}

}  // namespace gguf_cli
