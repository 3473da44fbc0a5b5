// What the files of the extension module share (python/core.cpp, python/verbs.cpp).
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <string_view>
#include <utility>

#include "ggufkit/error.h"
#include "ggufkit/threads.h"
#include "ggufkit/value.h"

namespace ggufkit::python {

// Raises ggufkit.GGUFError(message, code, offset, record, file), a ValueError subclass defined in
// Python (python/ggufkit/errors.py); `file` is used when the error does not name one.
[[noreturn]] void raise_error(const Error& e, const std::string& file = {});

template <class T>
T take(Expected<T>&& r, const std::string& file = {}) {
  if (!r) raise_error(r.error(), file);
  return std::move(*r);
}

inline void check(const Expected<void>& r, const std::string& file = {}) {
  if (!r) raise_error(r.error(), file);
}

// UTF-8 bytes as a str: errors "strict" (a reader's values, as gguf-py decodes them) or
// "replace" (names and messages in reports).
pybind11::object text(std::string_view s, const char* errors = "strict");

// A metadata value as Python data: int, float, bool, str; an array as a list, nested, or with
// `flatten` its leaves in order (gguf-py's ReaderField.contents()).
pybind11::object value_to_python(const ValueView& v, bool flatten, const char* errors = "strict");

// 0 (or less): every core.
inline Threads threads_of(int n) { return Threads{n <= 0 ? 0u : static_cast<unsigned>(n)}; }

// The library's verbs as functions (python/verbs.cpp).
void register_verbs(pybind11::module_& m);

}  // namespace ggufkit::python
