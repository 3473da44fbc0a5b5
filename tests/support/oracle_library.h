// The llama.cpp libraries the tests compare with: the prebuilt shared libraries of the npm package
// node-llama-cpp@3.21.1 (scripts/install-oracle.sh), loaded with dlopen and never closed (ggml
// keeps global state, such as a log callback into this program).
#pragma once

#include <initializer_list>
#include <string>

namespace ggufkit::test {

// $GGUFKIT_ORACLE_LIB_DIR when set, else the build's default (the GGUFKIT_ORACLE_LIB_DIR
// definition); empty when neither is known.
std::string oracle_library_dir();

// Opens DIR/name and checks that it has every symbol in `required`; nullptr with *why_not (when
// given) saying what is missing and how to install it.
void* open_oracle_library(const std::string& name, std::initializer_list<const char*> required,
                          std::string* why_not);

// libllama.v0.4.0.so with open_oracle_library's checks, its CPU backend loaded (ggml picks
// libggml-cpu-<level>.so for this machine) and llama_backend_init called: ready to load models.
// The same handle on every call.
void* open_llama_library(std::initializer_list<const char*> required, std::string* why_not);

}  // namespace ggufkit::test
