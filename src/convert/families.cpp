// The families gguf convert knows, in the order `gguf convert --help` lists them. Each is defined in
// families/<name>.cpp; adding one is a file there, a line here and its name in CMakeLists.txt.
#include "convert/family.h"

#include <array>

namespace ggufkit::convert_detail {

extern const Family kLlamaFamily;
extern const Family kQwen2Family;
extern const Family kQwen3Family;
extern const Family kGemmaFamily;
extern const Family kGemma2Family;
extern const Family kGemma3Family;
extern const Family kPhi3Family;
extern const Family kSmolLM3Family;
extern const Family kGraniteFamily;
extern const Family kOlmo2Family;
extern const Family kMixtralFamily;
extern const Family kQwen2MoeFamily;
extern const Family kQwen3MoeFamily;
extern const Family kMistral3Family;
extern const Family kGptOssFamily;

namespace {

const std::array kFamilies = {&kLlamaFamily, &kQwen2Family, &kQwen3Family, &kGemmaFamily, &kGemma2Family, &kGemma3Family,
                              &kPhi3Family, &kSmolLM3Family, &kGraniteFamily, &kOlmo2Family,
                              &kMixtralFamily, &kQwen2MoeFamily, &kQwen3MoeFamily, &kMistral3Family,
                              &kGptOssFamily};

}  // namespace

std::span<const Family* const> families() { return kFamilies; }

const Family* find_family(std::string_view hf_class) {
  for (const Family* family : kFamilies) {
    for (std::string_view name : family->hf_classes) {
      if (name == hf_class) return family;
    }
  }
  return nullptr;
}

}  // namespace ggufkit::convert_detail
