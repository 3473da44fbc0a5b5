// What the files of the extension module share (python/core.cpp, python/verbs.cpp).
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "ggufkit/error.h"
#include "ggufkit/threads.h"

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

// 0 (or less): every core.
inline Threads threads_of(int n) { return Threads{n <= 0 ? 0u : static_cast<unsigned>(n)}; }

// The library's verbs as functions (python/verbs.cpp).
void register_verbs(pybind11::module_& m);

}  // namespace ggufkit::python
