// Every edited file is re-read by llama.cpp's own parser (gguf_init_from_file from the oracle
// libggml-base.so): the metadata it sees is the original's with the edits applied, and the
// tensors (names, types, shapes, offsets, bytes) are unchanged.
#include <gtest/gtest.h>

#include "ggufkit/edit.h"
#include "ggufkit/reader.h"
#include "oracle_ggml.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

std::vector<fs::path> models() {
  std::vector<fs::path> out{sample_model()};
  for (const auto& p : corpus_files()) out.push_back(p);
  return out;
}

nlohmann::json find_key(const nlohmann::json& metadata, const std::string& key) {
  for (const auto& kv : metadata) {
    if (kv["key"] == key) return kv;
  }
  return nullptr;
}

TEST(EditOracle, LlamaCppReadsEveryEditedFileWithTheEditsApplied) {
  std::string why;
  auto oracle = OracleGgml::load(&why);
  if (!oracle) GTEST_SKIP() << why;
  const auto dir = temp_dir("edit-oracle");
  const std::string jinja = "{% for m in messages %}{{ m.content }}\n{% endfor %}";
  for (const fs::path& source : models()) {
    SCOPED_TRACE(source.filename().string());
    std::string error;
    const nlohmann::json before = oracle_dump_json(*oracle, source.string(), &error);
    ASSERT_FALSE(before.is_null()) << error;
    auto file = GgufFile::open(source);
    ASSERT_TRUE(file);
    // Two edits on a copy of the file: a same-length rename of the first key (in place), and a
    // template, a name and a removal together (a rewrite).
    const std::string first_key(file->metadata().front().key);
    // The last key that neither edit sets and that does not move the data (alignment).
    std::string removed;
    for (const KeyValue& kv : file->metadata()) {
      if (kv.key != "general.name" && kv.key != "general.alignment" && kv.key != first_key) removed = kv.key;
    }
    ASSERT_FALSE(removed.empty());
    std::string renamed = first_key;
    renamed.back() = renamed.back() == 'X' ? 'Y' : 'X';
    const std::vector<std::vector<MetadataChange>> edits = {
        {MetadataChange::rename(first_key, renamed)},
        {MetadataChange::set("tokenizer.chat_template.ggufkit", MetadataValue::string(jinja)),
         MetadataChange::set("general.name", MetadataValue::string("edited by ggufkit")),
         MetadataChange::remove(removed)},
    };
    for (size_t e = 0; e < edits.size(); ++e) {
      const fs::path copy = dir / ("copy-" + std::to_string(e) + ".gguf");
      fs::copy_file(source, copy, fs::copy_options::overwrite_existing);
      fs::permissions(copy, fs::perms::owner_read | fs::perms::owner_write);  // corpus files are read-only
      auto f = GgufFile::open(copy);
      ASSERT_TRUE(f);
      auto plan = plan_metadata_edit(*f, edits[e]);
      ASSERT_TRUE(plan) << plan.error().describe();
      ASSERT_TRUE(apply_metadata_edit(*f, copy, *plan, copy));
      const nlohmann::json after = oracle_dump_json(*oracle, copy.string(), &error);
      ASSERT_FALSE(after.is_null()) << "llama.cpp rejects the edited file (" << edit_mode_name(plan->mode)
                                    << "): " << error;
      EXPECT_EQ(after["tensors"], before["tensors"]);
      // Every key llama.cpp sees is the original's, edited.
      for (const auto& kv : after["metadata"]) {
        const std::string key = kv["key"];
        if (e == 0 && key == renamed) {
          EXPECT_EQ(kv["value"], find_key(before["metadata"], first_key)["value"]);
        } else if (key == "tokenizer.chat_template.ggufkit") {
          EXPECT_EQ(kv["value"], jinja);
        } else if (e == 1 && key == "general.name") {
          EXPECT_EQ(kv["value"], "edited by ggufkit");
        } else {
          EXPECT_EQ(kv, find_key(before["metadata"], key)) << key;
        }
      }
      const size_t expected_count = before["metadata"].size() + (e == 0 ? 0 : 1) +
                                    (e == 1 && find_key(before["metadata"], "general.name").is_null() ? 1 : 0) -
                                    (e == 1 ? 1 : 0);
      EXPECT_EQ(after["metadata"].size(), expected_count);
      // The tensor bytes are the source's.
      auto g = GgufFile::open(copy);
      ASSERT_TRUE(g);
      for (size_t t = 0; t < file->tensors().size(); ++t) {
        EXPECT_TRUE(std::ranges::equal(file->tensor_data(file->tensors()[t]), g->tensor_data(g->tensors()[t])));
      }
    }
  }
  fs::remove_all(dir);
}

}  // namespace
