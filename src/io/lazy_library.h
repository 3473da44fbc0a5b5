// A shared library loaded when it is first needed instead of linked: the dynamic loader binds
// every symbol of a linked library (and of its dependencies) at every start, which for libcrypto
// and libcurl (39 libraries with its own dependencies) costs every verb more than a quick verb's
// whole work. Only the verbs that make a SHA digest or read a remote file load them.
#pragma once

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include <fmt/format.h>

namespace ggufkit::io {

class LazyLibrary {
 public:
  // Opens `soname` (RTLD_NOW | RTLD_LOCAL); it stays loaded for the life of the process.
  explicit LazyLibrary(const char* soname) : soname_(soname) {
    handle_ = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      const char* why = ::dlerror();
      error_ = fmt::format("cannot load {}: {}", soname, why != nullptr ? why : "unknown reason");
    }
  }
  LazyLibrary(const LazyLibrary&) = delete;
  LazyLibrary& operator=(const LazyLibrary&) = delete;

  // Sets `fn` to the library's function `name` (a pointer of the declared function's type);
  // false, with error() saying which, when the library or the symbol is missing.
  template <class F>
  bool bind(F& fn, const char* name) {
    static_assert(std::is_pointer_v<F> && std::is_function_v<std::remove_pointer_t<F>>);
    if (handle_ == nullptr) return false;
    fn = reinterpret_cast<F>(::dlsym(handle_, name));
    if (fn == nullptr && error_.empty()) error_ = fmt::format("{} has no {}", soname_, name);
    return fn != nullptr;
  }

  // Empty when the library and every symbol bound so far were found.
  const std::string& error() const { return error_; }

 private:
  const char* soname_;
  void* handle_ = nullptr;
  std::string error_;
};

}  // namespace ggufkit::io
