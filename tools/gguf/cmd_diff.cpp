// gguf diff A B [--json] [--data]: what differs between two GGUF models, one line per item, in a
// stable order (sorted by key, then by tensor name), so that two outputs can themselves be diffed.
// A or B may be the first shard of a split model: the model is compared as a whole.
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/diff.h"
#include "ggufkit/json.h"
#include "ggufkit/split.h"
#include "output.h"

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

std::string element_text(const ValueView& v);

// A value without its type: numbers as JSON prints them, strings quoted and shortened, arrays
// as their first elements.
std::string bare_value_text(const ValueView& v, size_t max_chars) {
  if (v.type() == ValueType::String) return quoted(v.as_string().value_or(""), max_chars);
  if (const auto arr = v.as_array()) {
    std::string out = "[";
    uint64_t shown = 0;
    for (const ValueView e : arr->values()) {
      if (shown == kShownArrayElements) {
        out += fmt::format(", … {} more", arr->size() - shown);
        break;
      }
      if (shown++ > 0) out += ", ";
      out += element_text(e);
    }
    return out + "]";
  }
  std::string out;
  ggufkit::json::append_value(out, v);
  return out;
}

std::string element_text(const ValueView& v) { return bare_value_text(v, kShownElementChars); }

// "uint32", "string", "string[32000]"
std::string typed_value_text(const ValueView& v) { return value_type_text(v) + " " + bare_value_text(v, kDiffShownChars); }

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

std::string plural(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
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
  return fmt::format("{} {} -> {}", value_type_text(*m.a), bare_value_text(*m.a, kDiffShownChars), bare_value_text(*m.b, kDiffShownChars));
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

void line(std::string& out, std::string_view label, std::string_view name, std::string_view text) {
  fmt::format_to(std::back_inserter(out), "{:<14} {}: {}\n", label, shorten_for_display(name, 200), text);
}

void diff_text(std::string& out, const DiffResult& r) {
  auto it = std::back_inserter(out);
  const ggufkit::LayoutDiff& l = r.layout;
  if (l.version_a != l.version_b) fmt::format_to(it, "{:<14} version {} -> {}\n", "layout", l.version_a, l.version_b);
  if (l.alignment_a != l.alignment_b) fmt::format_to(it, "{:<14} alignment {} -> {}\n", "layout", l.alignment_a, l.alignment_b);
  if (l.shards_a != l.shards_b) fmt::format_to(it, "{:<14} shards {} -> {}\n", "layout", l.shards_a, l.shards_b);
  if (l.metadata_order_differs) fmt::format_to(it, "{:<14} metadata order differs\n", "layout");
  if (l.tensor_order_differs) fmt::format_to(it, "{:<14} tensor order differs\n", "layout");
  for (const auto& m : r.metadata) line(out, fmt::format("key {}", change_name(m.change)), m.key, metadata_change_text(m));
  for (const auto& t : r.tensors) line(out, fmt::format("tensor {}", change_name(t.change)), t.name, tensor_change_text(t));
  for (const auto& d : r.data) line(out, "data differs", d.name, data_change_text(d));

  const auto& c = r.counts;
  fmt::format_to(it, "summary: {} · keys: {} (A {}, B {}) · tensors: {} (A {}, B {}) · data: ",
                 r.identical() ? "identical" : "different", plural(r.metadata.size(), "differs", "differ"), c.keys_a,
                 c.keys_b, plural(r.tensors.size(), "differs", "differ"), c.tensors_a, c.tensors_b);
  if (r.data_compared) {
    fmt::format_to(it, "{} of {} compared {}\n", r.data.size(), c.data_compared, r.data.size() == 1 ? "differs" : "differ");
  } else {
    out += "not compared (--data)\n";
  }
}

// ---- JSON ----

void json_string(std::string& out, std::string_view s) { ggufkit::json::append_string(out, s); }

// {"type":"uint32","value":1}; arrays: {"type":"array","element_type":"string","length":N,"value":[...]}
// with "head" (the first elements) and "truncated":true instead of "value" when long.
void json_typed_value(std::string& out, const std::optional<ValueView>& v) {
  if (!v) {
    out += "null";
    return;
  }
  bool valid = true;
  out += "{\"type\":";
  json_string(out, ggufkit::value_type_name(v->type()));
  if (const auto arr = v->as_array()) {
    fmt::format_to(std::back_inserter(out), ",\"element_type\":\"{}\",\"length\":{}",
                   ggufkit::value_type_name(arr->element_type()), arr->size());
    if (arr->size() <= kJsonArrayLimit) {
      out += ",\"value\":";
      valid &= ggufkit::json::append_value(out, *v);
    } else {
      out += ",\"head\":[";
      size_t shown = 0;
      for (const ValueView e : arr->values()) {
        if (shown == kJsonArrayHead) break;
        if (shown++ > 0) out += ',';
        valid &= ggufkit::json::append_value(out, e);
      }
      out += "],\"truncated\":true";
    }
  } else {
    out += ",\"value\":";
    valid &= ggufkit::json::append_value(out, *v);
  }
  if (!valid) out += ",\"lossy\":true";
  out += '}';
}

void json_element(std::string& out, const std::optional<ValueView>& v) {
  if (v) {
    ggufkit::json::append_value(out, *v);
  } else {
    out += "null";
  }
}

void json_tensor(std::string& out, const TensorInfo* t) {
  if (t == nullptr) {
    out += "null";
    return;
  }
  fmt::format_to(std::back_inserter(out), "{{\"type\":\"{}\",\"shape\":[{}]}}", ggufkit::type_name(t->type),
                 fmt::join(t->shape(), ","));
}

void json_bool(std::string& out, std::string_view key, bool v) {
  fmt::format_to(std::back_inserter(out), ",\"{}\":{}", key, v ? "true" : "false");
}

void diff_json(std::string& out, const DiffResult& r) {
  auto it = std::back_inserter(out);
  const ggufkit::LayoutDiff& l = r.layout;
  const auto& c = r.counts;
  fmt::format_to(it, "{{\"identical\":{},\"data_compared\":{}", r.identical(), r.data_compared);
  fmt::format_to(it, ",\"layout\":{{\"differs\":{},\"version\":[{},{}],\"alignment\":[{},{}],\"shards\":[{},{}]",
                 l.differs(), l.version_a, l.version_b, l.alignment_a, l.alignment_b, l.shards_a, l.shards_b);
  json_bool(out, "metadata_order_differs", l.metadata_order_differs);
  json_bool(out, "tensor_order_differs", l.tensor_order_differs);
  fmt::format_to(it, "}},\"counts\":{{\"keys\":[{},{}],\"tensors\":[{},{}]", c.keys_a, c.keys_b, c.tensors_a, c.tensors_b);
  if (r.data_compared) {
    fmt::format_to(it, ",\"data_compared\":{},\"data_bytes_equal\":{}", c.data_compared, c.data_bytes_equal);
  }
  out += "},\"metadata\":[";
  for (size_t i = 0; i < r.metadata.size(); ++i) {
    const auto& m = r.metadata[i];
    out += i ? ",{\"key\":" : "{\"key\":";
    json_string(out, m.key);
    fmt::format_to(it, ",\"change\":\"{}\"", change_name(m.change));
    json_bool(out, "type_changed", m.type_changed);
    out += ",\"a\":";
    json_typed_value(out, m.a);
    out += ",\"b\":";
    json_typed_value(out, m.b);
    if (m.elements) {
      const ArrayDiff& d = *m.elements;
      fmt::format_to(it, ",\"elements\":{{\"length_a\":{},\"length_b\":{},\"differing\":{},\"shown\":[", d.length_a,
                     d.length_b, d.differing);
      for (size_t k = 0; k < d.shown.size(); ++k) {
        fmt::format_to(it, "{}{{\"index\":{},\"a\":", k ? "," : "", d.shown[k].index);
        json_element(out, d.shown[k].a);
        out += ",\"b\":";
        json_element(out, d.shown[k].b);
        out += '}';
      }
      out += "]}";
    }
    out += '}';
  }
  out += "],\"tensors\":[";
  for (size_t i = 0; i < r.tensors.size(); ++i) {
    const auto& t = r.tensors[i];
    out += i ? ",{\"name\":" : "{\"name\":";
    json_string(out, t.name);
    fmt::format_to(it, ",\"change\":\"{}\"", change_name(t.change));
    json_bool(out, "type_changed", t.type_changed);
    json_bool(out, "shape_changed", t.shape_changed);
    out += ",\"a\":";
    json_tensor(out, t.a);
    out += ",\"b\":";
    json_tensor(out, t.b);
    out += '}';
  }
  out += "],\"data\":";
  if (!r.data_compared) {
    out += "null}\n";
    return;
  }
  out += '[';
  for (size_t i = 0; i < r.data.size(); ++i) {
    const auto& d = r.data[i];
    out += i ? ",{\"name\":" : "{\"name\":";
    json_string(out, d.name);
    fmt::format_to(it, ",\"type_a\":\"{}\",\"type_b\":\"{}\",\"values\":", ggufkit::type_name(d.a->type),
                   ggufkit::type_name(d.b->type));
    if (d.values) {
      const ggufkit::ValueStats& s = *d.values;
      fmt::format_to(it, "{{\"elements\":{},\"differing\":{},\"non_finite\":{},\"max_abs_diff\":", s.elements, s.differing,
                     s.non_finite);
      ggufkit::json::append_double(out, s.max_abs_diff);
      out += ",\"rmse\":";
      ggufkit::json::append_double(out, s.rmse);
      out += ",\"cosine\":";
      ggufkit::json::append_double(out, s.cosine);
      out += '}';
    } else {
      out += "null,\"note\":";
      json_string(out, d.note);
    }
    out += '}';
  }
  out += "]}\n";
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
  const bool progress = args.data && ::isatty(STDERR_FILENO) == 1;
  if (progress) {
    options.progress = [](size_t done, size_t all) {
      fmt::print(stderr, "\rcomparing tensor data: {}/{}{}", done, all, done == all ? "\n" : "");
    };
  }
  const auto result = ggufkit::diff_models(*a, *b, options);
  if (!result) {
    report_error(args.a + " / " + args.b, result.error());
    return kUsageOrIoError;
  }
  std::string out;
  if (args.json) {
    diff_json(out, *result);
  } else {
    diff_text(out, *result);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (std::fflush(stdout) != 0) return kUsageOrIoError;
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
  cmd->add_flag("--data", args->data,
                "Compare tensor bytes; where they differ, dequantize and give max abs difference, RMSE and cosine");
  cmd->add_option("--threads", args->threads, "Threads for --data (default: one per core)");
  cmd->add_option("--show", args->show, "Differing elements listed per metadata array (default 5)")
      ->check(CLI::Range(size_t{0}, size_t{1000}));
  return [args] { return run_diff(*args); };
}

}  // namespace gguf_cli
