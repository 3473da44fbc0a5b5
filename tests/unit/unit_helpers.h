// Assertions shared by the unit tests.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "ggufkit/error.h"
#include "ggufkit/reader.h"
#include "raw_gguf.h"

namespace ggufkit::test {

inline Expected<GgufFile> parse(const RawGguf& g, const OpenOptions& options = {}) {
  return GgufFile::parse(g.span(), options);
}

// Checks every part of a rejection: code, offset, subject, and that the message mentions each of
// `message_mentions` (the specific facts: a number, a type name, a limit).
template <class T>
::testing::AssertionResult FailsWith(const Expected<T>& result, ErrorCode code, std::optional<uint64_t> offset,
                                     std::string_view subject,
                                     std::initializer_list<std::string_view> message_mentions = {}) {
  if (result) return ::testing::AssertionFailure() << "expected " << error_code_name(code) << ", but it succeeded";
  const Error& e = result.error();
  ::testing::AssertionResult failure = ::testing::AssertionFailure();
  bool ok = true;
  if (e.code != code) {
    failure << "code " << error_code_name(e.code) << " != expected " << error_code_name(code) << "; ";
    ok = false;
  }
  if (e.offset != offset) {
    const auto text = [](std::optional<uint64_t> o) { return o ? std::to_string(*o) : std::string("none"); };
    failure << "offset " << text(e.offset) << " != expected " << text(offset) << "; ";
    ok = false;
  }
  if (e.subject != subject) {
    failure << "subject '" << e.subject << "' != expected '" << subject << "'; ";
    ok = false;
  }
  if (e.message.empty()) {
    failure << "empty message; ";
    ok = false;
  }
  for (std::string_view part : message_mentions) {
    if (e.message.find(part) == std::string::npos) {
      failure << "message does not mention '" << part << "'; ";
      ok = false;
    }
  }
  if (ok) return ::testing::AssertionSuccess();
  return failure << "(error: " << e.describe() << ")";
}

}  // namespace ggufkit::test
