// gguf diff A B [--json] [--data]: what differs between two GGUF models, one line per item, in a
// stable order (sorted by key, then by tensor name), so that two outputs can themselves be diffed.
// A or B may be the first shard of a split model: the model is compared as a whole.

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/diff.h"
#include "ggufkit/json.h"
#include "ggufkit/split.h"
#include "output.h"
#include "printer.h"

namespace gguf_cli {
namespace {

using ggufkit::ArrayDiff;
using ggufkit::Change;
using ggufkit::DiffResult;
using ggufkit::TensorInfo;
using ggufkit::ValueType;
using ggufkit::ValueView;

struct DiffArgs {
  std::string a, b;
  bool json = false;
  bool data = false;
  unsigned threads = 0;
  size_t show = 5;
};

constexpr size_t kDiffShownChars = 60;         // a string value in text mode
constexpr size_t kShownElementChars = 40;  // a string element of an array in text mode
constexpr size_t kContextChars = 24;       // text kept before the first difference of two long strings
constexpr size_t kShownArrayElements = 4;  // an added or removed array in text mode
constexpr uint64_t kJsonArrayLimit = 64;   // longer arrays are shortened to their head in JSON
constexpr size_t kJsonArrayHead = 8;

// ---- text ----

std::string quoted(std::string_view s, size_t max) { return fmt::format("\"{}\"", shorten_for_display(s, max)); }

// Text mode: a string value up to kDiffShownChars, an array's first kShownArrayElements elements,
// a string element up to kShownElementChars.
constexpr ValueTextLimits kValueLimits{kDiffShownChars, kShownArrayElements, kShownElementChars};
constexpr ValueTextLimits kElementLimits{kShownElementChars, kShownArrayElements, kShownElementChars};
std::string element_text(const ValueView& v) { return value_text(v, kElementLimits); }

// "uint32", "string", "string[32000]"
std::string typed_value_text(const ValueView& v) { return value_type_text(v) + " " + value_text(v, kValueLimits); }

// Backs up from byte i to the start of the UTF-8 character it is in.
size_t char_start(std::string_view s, size_t i) {
  while (i > 0 && i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

// Two strings: in full when short, else both around their first difference (chat templates).
std::string string_change_text(std::string_view a, std::string_view b) {
  if (a.size() <= kDiffShownChars && b.size() <= kDiffShownChars) {
    return fmt::format("string {} -> {}", quoted(a, kDiffShownChars), quoted(b, kDiffShownChars));
  }
  const auto [ma, mb] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  const size_t at = static_cast<size_t>(ma - a.begin());
  const size_t from = char_start(a, at > kContextChars ? at - kContextChars : 0);
  const auto around = [&](std::string_view s) {
    return fmt::format("\"{}{}\"", from > 0 ? "…" : "", shorten_for_display(s.substr(std::min(from, s.size())), kDiffShownChars));
  };
  return fmt::format("string, {} -> {} bytes, first difference at byte {}: {} -> {}", a.size(), b.size(), at,
                     around(a), around(b));
}

std::string array_change_text(const ValueView& a, const ValueView& b, const ArrayDiff& d) {
  std::string out = value_type_text(a);
  if (d.length_a != d.length_b) out += " -> " + value_type_text(b);
  const uint64_t common = std::min(d.length_a, d.length_b);
  std::vector<std::string> parts;
  if (d.differing > 0 || d.length_a == d.length_b) {
    parts.push_back(fmt::format("{} of {}{} {}", d.differing, common, d.length_a == d.length_b ? "" : " common",
                                d.differing == 1 ? "element differs" : "elements differ"));
  }
  if (d.length_b > d.length_a) parts.push_back(plural(d.length_b - d.length_a, "element", "elements") + " added at the end");
  if (d.length_a > d.length_b) parts.push_back(plural(d.length_a - d.length_b, "element", "elements") + " removed from the end");
  out += ", " + fmt::format("{}", fmt::join(parts, ", "));
  std::vector<std::string> items;
  for (const ggufkit::ElementDiff& e : d.shown) {
    if (e.a && e.b) {
      items.push_back(fmt::format("[{}] {} -> {}", e.index, element_text(*e.a), element_text(*e.b)));
    } else {
      items.push_back(fmt::format("[{}] {}{}", e.index, e.a ? "-" : "+", element_text(e.a ? *e.a : *e.b)));
    }
  }
  const uint64_t all = d.differing + (std::max(d.length_a, d.length_b) - common);
  if (!items.empty()) out += ": " + fmt::format("{}", fmt::join(items, ", "));
  if (all > d.shown.size()) out += ", …";
  return out;
}

std::string metadata_change_text(const ggufkit::MetadataDiff& m) {
  if (m.change == Change::added) return typed_value_text(*m.b);
  if (m.change == Change::removed) return typed_value_text(*m.a);
  if (m.type_changed) return typed_value_text(*m.a) + " -> " + typed_value_text(*m.b) + " (type changed)";
  if (m.elements) return array_change_text(*m.a, *m.b, *m.elements);
  if (m.a->type() == ValueType::String) return string_change_text(m.a->as_string().value_or(""), m.b->as_string().value_or(""));
  return fmt::format("{} {} -> {}", value_type_text(*m.a), value_text(*m.a, kValueLimits), value_text(*m.b, kValueLimits));
}

std::string shape_text(const TensorInfo& t) { return fmt::format("[{}]", fmt::join(t.shape(), ", ")); }
std::string tensor_text(const TensorInfo& t) { return fmt::format("{} {}", ggufkit::type_name(t.type), shape_text(t)); }

std::string tensor_change_text(const ggufkit::TensorDiff& t) {
  if (t.change == Change::added) return tensor_text(*t.b);
  if (t.change == Change::removed) return tensor_text(*t.a);
  const char* what = t.type_changed && t.shape_changed ? "type and shape changed" : t.type_changed ? "type changed" : "shape changed";
  return fmt::format("{} -> {} ({})", tensor_text(*t.a), tensor_text(*t.b), what);
}

std::string data_change_text(const ggufkit::DataDiff& d) {
  std::string out = std::string(ggufkit::type_name(d.a->type));
  if (d.a->type != d.b->type) out += fmt::format(" -> {}", ggufkit::type_name(d.b->type));
  if (!d.values) return out + fmt::format(": bytes differ ({})", d.note);
  const ggufkit::ValueStats& s = *d.values;
  out += fmt::format(": max_abs {:.6g} rmse {:.6g} cosine {:.8f}, {} of {} {}", s.max_abs_diff, s.rmse, s.cosine,
                     s.differing, s.elements, s.differing == 1 ? "element differs" : "elements differ");
  if (s.non_finite > 0) out += fmt::format(", {} not finite (left out)", s.non_finite);
  return out;
}

// ---- JSON ----

using ggufkit::json::Writer;

// [a, b]
template <class T>
void pair(Writer& w, T a, T b) {
  w.begin_array().value(a).value(b).end_array();
}

// {"type":"uint32","value":1}; arrays: {"type":"array","element_type":"string","length":N,"value":[...]}
// with "head" (the first elements) and "truncated":true instead of "value" when long.
void json_typed_value(Writer& w, const std::optional<ValueView>& v) {
  if (!v) {
    w.null();
    return;
  }
  w.take_lossy();
  w.begin_object().member("type", ggufkit::value_type_name(v->type()));
  if (const auto arr = v->as_array()) {
    w.member("element_type", ggufkit::value_type_name(arr->element_type())).member("length", arr->size());
    if (arr->size() <= kJsonArrayLimit) {
      w.member("value", *v);
    } else {
      w.key("head").begin_array();
      size_t shown = 0;
      for (const ValueView e : arr->values()) {
        if (shown++ == kJsonArrayHead) break;
        w.value(e);
      }
      w.end_array().member("truncated", true);
    }
  } else {
    w.member("value", *v);
  }
  if (w.take_lossy()) w.member("lossy", true);
  w.end_object();
}

void json_tensor(Writer& w, const TensorInfo* t) {
  if (t == nullptr) {
    w.null();
    return;
  }
  w.begin_object().member("type", ggufkit::type_name(t->type)).key("shape").array(t->shape()).end_object();
}

void json_elements(Writer& w, const ArrayDiff& d) {
  w.begin_object()
      .member("length_a", d.length_a)
      .member("length_b", d.length_b)
      .member("differing", d.differing)
      .key("shown")
      .begin_array();
  for (const auto& e : d.shown) {
    w.begin_object().member("index", e.index).key("a");
    w.value(e.a);
    w.key("b");
    w.value(e.b);
    w.end_object();
  }
  w.end_array().end_object();
}

void json_stats(Writer& w, const std::optional<ggufkit::ValueStats>& values) {
  if (!values) {
    w.null();
    return;
  }
  const ggufkit::ValueStats& s = *values;
  w.begin_object()
      .member("elements", s.elements)
      .member("differing", s.differing)
      .member("non_finite", s.non_finite)
      .member("max_abs_diff", s.max_abs_diff)
      .member("rmse", s.rmse)
      .member("cosine", s.cosine)
      .end_object();
}

// ---- both ----

// "key changed    general.name: ": the start of a change's line.
std::string change_label(std::string_view what, Change change) {
  return fmt::format("{:<14} ", fmt::format("{} {}", what, change_name(change)));
}

// The differences, one line each (layout, keys, tensors, data), then the summary; as JSON, one
// object with the same facts (and the typed values and element lists in full).
void print_diff(Printer& p, const DiffResult& r) {
  const ggufkit::LayoutDiff& l = r.layout;
  const auto& c = r.counts;
  p.begin_object().field("identical", r.identical()).field("data_compared", r.data_compared);

  p.begin_object("layout").field("differs", l.differs());
  const auto layout_pair = [&](std::string_view key, uint64_t a, uint64_t b) {
    const std::string text = fmt::format("{:<14} {} {} -> {}", "layout", key, a, b);
    p.field_with(key, [&](Writer& w) { pair(w, a, b); }, a != b ? std::optional<std::string_view>(text) : std::nullopt);
  };
  layout_pair("version", l.version_a, l.version_b);
  layout_pair("alignment", l.alignment_a, l.alignment_b);
  layout_pair("shards", l.shards_a, l.shards_b);
  const std::string metadata_order = fmt::format("{:<14} metadata order differs", "layout");
  const std::string tensor_order = fmt::format("{:<14} tensor order differs", "layout");
  p.field("metadata_order_differs", l.metadata_order_differs,
          l.metadata_order_differs ? std::optional<std::string_view>(metadata_order) : std::nullopt);
  p.field("tensor_order_differs", l.tensor_order_differs,
          l.tensor_order_differs ? std::optional<std::string_view>(tensor_order) : std::nullopt);
  p.end_object();

  p.begin_array("metadata");
  for (const auto& m : r.metadata) {
    p.begin_object().begin_line(change_label("key", m.change));
    p.field("key", m.key, shorten_for_display(m.key, 200));
    p.field("change", change_name(m.change)).field("type_changed", m.type_changed);
    p.field_with("a", [&](Writer& w) { json_typed_value(w, m.a); }, std::nullopt);
    p.field_with("b", [&](Writer& w) { json_typed_value(w, m.b); }, std::nullopt);
    if (m.elements) p.field_with("elements", [&](Writer& w) { json_elements(w, *m.elements); }, std::nullopt);
    p.text(": " + metadata_change_text(m));  // the values above, for people
    p.end_line().end_object();
  }
  p.end_array().begin_array("tensors");
  for (const auto& t : r.tensors) {
    p.begin_object().begin_line(change_label("tensor", t.change));
    p.field("name", t.name, shorten_for_display(t.name, 200));
    p.field("change", change_name(t.change))
        .field("type_changed", t.type_changed)
        .field("shape_changed", t.shape_changed);
    p.field_with("a", [&](Writer& w) { json_tensor(w, t.a); }, std::nullopt);
    p.field_with("b", [&](Writer& w) { json_tensor(w, t.b); }, std::nullopt);
    p.text(": " + tensor_change_text(t));
    p.end_line().end_object();
  }
  p.end_array();
  if (r.data_compared) {
    p.begin_array("data");
    for (const auto& d : r.data) {
      p.begin_object().begin_line(fmt::format("{:<14} ", "data differs"));
      p.field("name", d.name, shorten_for_display(d.name, 200));
      p.field("type_a", ggufkit::type_name(d.a->type)).field("type_b", ggufkit::type_name(d.b->type));
      p.field_with("values", [&](Writer& w) { json_stats(w, d.values); }, std::nullopt);
      if (!d.values) p.field("note", d.note);
      p.text(": " + data_change_text(d));
      p.end_line().end_object();
    }
    p.end_array();
  } else {
    p.field_with("data", [](Writer& w) { w.null(); }, std::nullopt);
  }

  p.begin_line("summary: ").begin_object("counts");
  p.text(r.identical() ? "identical" : "different");
  p.field_with("keys", [&](Writer& w) { pair(w, c.keys_a, c.keys_b); },
               fmt::format(" · keys: {} (A {}, B {})", plural(r.metadata.size(), "differs", "differ"), c.keys_a,
                           c.keys_b));
  p.field_with("tensors", [&](Writer& w) { pair(w, c.tensors_a, c.tensors_b); },
               fmt::format(" · tensors: {} (A {}, B {})", plural(r.tensors.size(), "differs", "differ"),
                           c.tensors_a, c.tensors_b));
  if (r.data_compared) {
    p.field("data_compared", c.data_compared,
            fmt::format(" · data: {} of {} compared {}", r.data.size(), c.data_compared,
                        r.data.size() == 1 ? "differs" : "differ"));
    p.field("data_bytes_equal", c.data_bytes_equal);
  } else {
    p.text(" · data: not compared (--data)");
  }
  p.end_object().end_line();
  p.end_object();
}

// A plain file, or the first shard of a split model (read as the whole model).
std::optional<ggufkit::SplitModel> open_model(const std::string& path) {
  auto m = ggufkit::SplitModel::open(path);
  if (!m) {
    report_error(path, m.error());
    return std::nullopt;
  }
  return std::move(m).value();
}

int run_diff(const DiffArgs& args) {
  const auto a = open_model(args.a);
  if (!a) return kUsageOrIoError;
  const auto b = open_model(args.b);
  if (!b) return kUsageOrIoError;

  ggufkit::DiffOptions options;
  options.data = args.data;
  options.threads = ggufkit::Threads{args.threads};
  options.max_shown_elements = args.show;
  const Progress progress;
  if (args.data) {
    options.progress = [&progress](size_t done, size_t all) { progress.item(done, all, 0, 0, "tensors compared"); };
  }
  const auto result = ggufkit::diff_models(*a, *b, options);
  if (!result) {
    report_error(args.a + " / " + args.b, result.error());
    return kUsageOrIoError;
  }
  std::string out;
  print_diff(*Printer::make(args.json, out), *result);
  if (const int written = write_result(out); written != kOk) return written;
  return result->identical() ? kOk : kProblemFound;
}

}  // namespace

Runner register_diff(CLI::App& app) {
  auto args = std::make_shared<DiffArgs>();
  CLI::App* cmd = app.add_subcommand(
      "diff", "Compare two GGUF files: metadata, tensors and (--data) tensor data; exit 0 when identical, 1 when not");
  cmd->add_option("a", args->a, "First GGUF file (A), or the first shard of a split model")->required();
  cmd->add_option("b", args->b, "Second GGUF file (B), or the first shard of a split model")->required();
  cmd->add_flag("--json", args->json, "One JSON object instead of text");
  add_progress_flags(*cmd);
  cmd->add_flag("--data", args->data,
                "Compare tensor bytes; where they differ, dequantize and give max abs difference, RMSE and cosine");
  cmd->add_option("--threads", args->threads, "Threads for --data (default: one per core)");
  cmd->add_option("--show", args->show, "Differing elements listed per metadata array (default 5)")
      ->check(CLI::Range(size_t{0}, size_t{1000}));
  return [args] { return run_diff(*args); };
}

}  // namespace gguf_cli
