// Engine compatibility of tensor types (issue 5, item 7): which types the llama.cpp we track reads
// and since when, and the type ids whose meaning differs between llama.cpp and its forks. Unknown
// ids (including the ones forks use) and removed ids are found by the structure pass.
#include <fmt/format.h>

#include <map>

#include "check_internal.h"
#include "ggufkit/tensor_types.h"

namespace ggufkit::check {
namespace {

// Types llama.cpp added recently: engines built before them (older llama.cpp builds and the apps
// that embed them) refuse the file with an "invalid ggml type" error.
struct RecentType {
  TensorType type;
  std::string_view since;
};
constexpr RecentType kRecentTypes[] = {
    {TensorType::MXFP4, "in August 2025 (for gpt-oss)"},
    {TensorType::NVFP4, "after MXFP4"},
    {TensorType::Q1_0, "after NVFP4"},
    {TensorType::Q2_0, "after NVFP4"},
};

}  // namespace

void check_compatibility(const ModelUnderCheck& model, Findings& out) {
  std::map<uint32_t, std::pair<size_t, const TensorInfo*>> by_id;  // count, first tensor
  for (const TensorInfo* t : model.tensors) {
    auto& entry = by_id[static_cast<uint32_t>(t->type)];
    if (entry.first++ == 0) entry.second = t;
  }
  // The file's misplaced tensors, when any: a type id read with the wrong block size shows there.
  bool misplaced = false;
  for (const Finding& f : out.all()) {
    misplaced |= f.code == "structure.bad_tensor_offset" || f.code == "structure.data_out_of_bounds";
  }
  std::string mix;
  for (const auto& [id, entry] : by_id) {
    const TypeTraits* traits = find_type_traits(id);
    if (traits == nullptr || traits->status == TypeStatus::removed) continue;  // structure findings
    if (!mix.empty()) mix += ", ";
    mix += fmt::format("{} x{}", traits->name, entry.first);
    for (const RecentType& r : kRecentTypes) {
      if (r.type != traits->type()) continue;
      out.info("compat.recent_type", entry.second->name, entry.second->info_offset,
               fmt::format("{} tensors ({}, first '{}'): a type llama.cpp added {}; engines built before that "
                           "refuse the file",
                           traits->name, entry.first, entry.second->name, r.since));
    }
    if (traits->type() == TensorType::Q2_0) {
      // Same number, different formats: llama.cpp's 42 is Q2_0, some forks wrote STQ1_0 as 42.
      const std::string text = fmt::format(
          "type id 42 is Q2_0 in llama.cpp but STQ1_0 in some forks: the same number means different formats "
          "in different builds. {}",
          misplaced ? "This file's tensor offsets do not fit Q2_0 blocks: it was most likely written by such a "
                      "fork, and llama.cpp cannot read it"
                    : "The offsets fit Q2_0 blocks, so it reads as Q2_0; a fork that means STQ1_0 would misread it");
      if (misplaced) {
        out.error("compat.ambiguous_type_id", entry.second->name, entry.second->info_offset, text);
      } else {
        out.info("compat.ambiguous_type_id", entry.second->name, entry.second->info_offset, text);
      }
    }
  }
  if (!mix.empty()) {
    out.info("compat.types", {}, std::nullopt,
             fmt::format("tensor types: {}; every one is read by the llama.cpp ggufkit tracks (node-llama-cpp "
                         "3.21.1's build)",
                         mix));
  }
}

}  // namespace ggufkit::check
