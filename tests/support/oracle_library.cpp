#include "oracle_library.h"

#include <dlfcn.h>

#include <cstdlib>

namespace ggufkit::test {

std::string oracle_library_dir() {
  if (const char* env = std::getenv("GGUFKIT_ORACLE_LIB_DIR"); env != nullptr && *env != '\0') return env;
#ifdef GGUFKIT_ORACLE_LIB_DIR
  return GGUFKIT_ORACLE_LIB_DIR;
#else
  return {};
#endif
}

void* open_oracle_library(const std::string& name, std::initializer_list<const char*> required,
                          std::string* why_not) {
  const auto fail = [&](std::string reason) -> void* {
    if (why_not != nullptr) *why_not = std::move(reason);
    return nullptr;
  };
  std::string path = oracle_library_dir();
  if (path.empty()) {
    return fail("oracle library directory unknown: set GGUFKIT_ORACLE_LIB_DIR to the directory holding " + name +
                " (scripts/install-oracle.sh installs it)");
  }
  if (path.back() != '/') path.push_back('/');
  path += name;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return fail("cannot load the oracle " + path + ": " + (err != nullptr ? err : "dlopen failed") +
                " (run scripts/install-oracle.sh, or set GGUFKIT_ORACLE_LIB_DIR)");
  }
  for (const char* symbol : required) {
    if (dlsym(handle, symbol) == nullptr) return fail(path + " lacks " + symbol);
  }
  return handle;
}

void* open_llama_library(std::initializer_list<const char*> required, std::string* why_not) {
  void* handle = open_oracle_library("libllama.v0.4.0.so", required, why_not);
  if (handle == nullptr) return nullptr;
  static const std::string backends_missing = [] {
    const std::string dir = oracle_library_dir();
    const std::string ggml_path = dir + "/libggml.v0.4.0.so";
    void* ggml = dlopen(ggml_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    auto load_backends =
        ggml ? reinterpret_cast<void (*)(const char*)>(dlsym(ggml, "ggml_backend_load_all_from_path")) : nullptr;
    if (load_backends == nullptr) return "cannot load ggml_backend_load_all_from_path from " + ggml_path;
    load_backends(dir.c_str());
    return std::string();
  }();
  if (!backends_missing.empty()) {
    if (why_not != nullptr) *why_not = backends_missing;
    return nullptr;
  }
  static const bool initialized = [handle] {
    if (auto init = reinterpret_cast<void (*)()>(dlsym(handle, "llama_backend_init"))) init();
    return true;
  }();
  (void)initialized;
  return handle;
}

}  // namespace ggufkit::test
