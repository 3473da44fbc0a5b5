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

// UTF-8 bytes as a str: errors "surrogateescape" (what a reader gives: names and string values,
// lossless: utf8() gives the bytes back, where gguf-py raises UnicodeDecodeError), "replace" (names
// and messages in reports) or "strict".
pybind11::object text(std::string_view s, const char* errors = "surrogateescape");

// A str (encoded as UTF-8, lone surrogates from a "surrogateescape" decoding back to their bytes),
// bytes or bytearray as bytes: the inverse of text(), for every name and string the module takes.
std::string utf8(const pybind11::handle& s);

// A metadata value as Python data: int, float, bool, str; an array as a list, nested, or with
// `flatten` its leaves in order (gguf-py's ReaderField.contents()).
pybind11::object value_to_python(const ValueView& v, bool flatten, const char* errors = "surrogateescape");

// The one rule for thread counts (quants.py's _threads says the same): 0 is one per core
// (Threads{0}); a negative count is refused with ValueError.
inline Threads threads_of(int n) {
  if (n < 0) throw pybind11::value_error("threads must be 0 or more (0 or None: every core), not " + std::to_string(n));
  return Threads{static_cast<unsigned>(n)};
}

// The library's verbs as functions (python/verbs.cpp).
void register_verbs(pybind11::module_& m);

}  // namespace ggufkit::python
