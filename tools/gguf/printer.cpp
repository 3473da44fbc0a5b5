// The text and the JSON printer (printer.h).
#include "printer.h"

#include <vector>

#include "output.h"

namespace gguf_cli {
namespace {

// Lines for people; objects and arrays only structure the JSON. Every piece of text is made safe
// for a terminal (terminal_safe): a key or tensor name cannot move the cursor or forge a line.
class TextPrinter final : public Printer {
 public:
  explicit TextPrinter(std::string& out) : out_(out) {}
  bool json() const override { return false; }

  Printer& begin_object(std::string_view) override { return *this; }
  Printer& end_object() override { return *this; }
  Printer& begin_array(std::string_view) override { return *this; }
  Printer& end_array() override { return *this; }

  Printer& begin_line(std::string_view label) override {
    in_line_ = true;
    line_has_text_ = false;
    line_ = terminal_safe(label);
    return *this;
  }
  Printer& end_line() override {
    if (in_line_ && line_has_text_) {
      out_ += line_;
      out_ += '\n';
    }
    in_line_ = false;
    return *this;
  }
  Printer& field_with(std::string_view, const std::function<void(ggufkit::json::Writer&)>&,
                      std::optional<std::string_view> text) override {
    if (!text) return *this;
    if (in_line_) {
      line_ += terminal_safe(*text);
      line_has_text_ = true;
    } else {
      out_ += terminal_safe(*text);
      out_ += '\n';
    }
    return *this;
  }
  Printer& text(std::string_view s) override {
    if (in_line_) {
      line_ += terminal_safe(s);
    } else {
      out_ += terminal_safe(s);
      out_ += '\n';
    }
    return *this;
  }

 private:
  std::string& out_;
  std::string line_;
  bool in_line_ = false;
  bool line_has_text_ = false;
};

// One JSON document through json::Writer; lines and text are for people only.
class JsonPrinter final : public Printer {
 public:
  explicit JsonPrinter(std::string& out) : out_(out), w_(out) {}
  bool json() const override { return true; }

  Printer& begin_object(std::string_view key) override {
    member(key);
    w_.begin_object();
    in_array_.push_back(false);
    return *this;
  }
  Printer& end_object() override {
    w_.end_object();
    return close();
  }
  Printer& begin_array(std::string_view key) override {
    member(key);
    w_.begin_array();
    in_array_.push_back(true);
    return *this;
  }
  Printer& end_array() override {
    w_.end_array();
    return close();
  }
  Printer& begin_line(std::string_view) override { return *this; }
  Printer& end_line() override { return *this; }
  Printer& field_with(std::string_view key, const std::function<void(ggufkit::json::Writer&)>& write,
                      std::optional<std::string_view>) override {
    member(key);
    write(w_);
    return *this;
  }
  Printer& text(std::string_view) override { return *this; }

 private:
  // In an object, the member's name; in an array (or at the top), nothing.
  void member(std::string_view key) {
    if (!in_array_.empty() && !in_array_.back()) w_.key(key);
  }
  Printer& close() {
    in_array_.pop_back();
    if (in_array_.empty()) out_ += '\n';  // the document is complete
    return *this;
  }

  std::string& out_;
  ggufkit::json::Writer w_;
  std::vector<bool> in_array_;  // the open containers, innermost last
};

}  // namespace

std::unique_ptr<Printer> Printer::make(bool json, std::string& out) {
  if (json) return std::make_unique<JsonPrinter>(out);
  return std::make_unique<TextPrinter>(out);
}

}  // namespace gguf_cli
