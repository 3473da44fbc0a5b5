// gguf check judges each kind of file by its own rules (check.h, FileKind): a LoRA adapter, a
// multimodal projector, a vocabulary-only file and a shard other than the first are each checked by
// the passes that apply to them. A correct file of each kind passes --strict with exactly the
// findings listed here; a broken projector gets exactly its problems.
#include <limits>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "ggufkit/reader.h"
#include "ggufkit/split.h"
#include "tokenizer_rope_lora_fixtures.h"

namespace ggufkit {
namespace {

using test::add_zeros;
using test::check_model;
using test::set;

// (severity, code, subject) of every finding, in order.
using Summary = std::vector<std::tuple<Severity, std::string, std::string>>;

Summary summary_of(const CheckReport& report) {
  Summary out;
  for (const Finding& f : report.findings) out.emplace_back(f.severity, f.code, f.subject);
  return out;
}

std::string describe(const CheckReport& report) {
  std::string s;
  for (const Finding& f : report.findings) s += "\n  " + f.describe();
  return s;
}

const Finding* find_code(const CheckReport& report, std::string_view code) {
  for (const Finding& f : report.findings) {
    if (f.code == code) return &f;
  }
  return nullptr;
}

// A LoRA adapter as convert_lora_to_gguf.py writes it: the base's architecture, general.type
// "adapter", adapter.type "lora", the alpha, the file type, and only lora_a/lora_b pairs.
GgufBuilder lora_adapter() {
  GgufBuilder b;
  set(b, "general.architecture", MetadataValue::string("llama"));
  set(b, "general.type", MetadataValue::string("adapter"));
  set(b, "general.name", MetadataValue::string("Tiny Llama Lora"));
  set(b, "general.file_type", MetadataValue::of(uint32_t{0}));
  set(b, "general.quantization_version", MetadataValue::of(uint32_t{2}));
  set(b, "adapter.type", MetadataValue::string("lora"));
  set(b, "adapter.lora.alpha", MetadataValue::of(16.0f));
  add_zeros(b, "blk.0.attn_q.weight.lora_a", {test::kEmbedding, 8});
  add_zeros(b, "blk.0.attn_q.weight.lora_b", {8, test::kEmbedding});
  add_zeros(b, "blk.0.attn_v.weight.lora_a", {test::kEmbedding, 8});
  add_zeros(b, "blk.0.attn_v.weight.lora_b", {8, test::kEmbedding});
  return b;
}

// The base the adapter applies to.
GgufBuilder lora_base() {
  GgufBuilder b = test::spm_model();
  add_zeros(b, "blk.0.attn_q.weight", {test::kEmbedding, test::kEmbedding});
  add_zeros(b, "blk.0.attn_v.weight", {test::kEmbedding, test::kEmbedding});
  return b;
}

TEST(CheckFileKind, LoraAdapterIsCheckedAsAnAdapter) {
  const CheckReport report = check_model(lora_adapter());
  EXPECT_EQ(report.kind, FileKind::adapter);
  EXPECT_EQ(file_kind_name(report.kind), "adapter");
  EXPECT_EQ(summary_of(report), (Summary{{Severity::info, "compat.types", ""}})) << describe(report);
  EXPECT_TRUE(report.passed(true)) << describe(report);
  EXPECT_TRUE(report.complete);
}

TEST(CheckFileKind, LoraAdapterWithItsBaseIsCheckedAgainstIt) {
  CheckOptions options;
  options.base = test::write_model(lora_base(), "base");
  const CheckReport report = check_model(lora_adapter(), options);
  EXPECT_EQ(report.kind, FileKind::adapter);
  EXPECT_EQ(summary_of(report), (Summary{{Severity::info, "compat.types", ""}})) << describe(report);
  EXPECT_TRUE(report.passed(true));

  // The same adapter against a base without attn_v: the pass that compares them ran.
  CheckOptions other;
  other.base = test::write_model(test::spm_model(), "other-base");
  const CheckReport against_other = check_model(lora_adapter(), other);
  EXPECT_EQ(summary_of(against_other), (Summary{{Severity::error, "lora.missing_base_tensor", "blk.0.attn_q.weight.lora_a"},
                                                {Severity::error, "lora.missing_base_tensor", "blk.0.attn_v.weight.lora_a"},
                                                {Severity::info, "compat.types", ""}}))
      << describe(against_other);
}

// A vision projector as convert_hf_to_gguf.py --mmproj writes one (Gemma 3's keys, small sizes).
GgufBuilder projector() {
  GgufBuilder b;
  set(b, "general.architecture", MetadataValue::string("clip"));
  set(b, "general.type", MetadataValue::string("mmproj"));
  set(b, "general.name", MetadataValue::string("Tiny Gemma Mmproj"));
  set(b, "general.file_type", MetadataValue::of(uint32_t{0}));
  set(b, "clip.has_vision_encoder", MetadataValue::of(true));
  set(b, "clip.projector_type", MetadataValue::string("gemma3"));
  set(b, "clip.vision.image_size", MetadataValue::of(uint32_t{64}));
  set(b, "clip.vision.patch_size", MetadataValue::of(uint32_t{16}));
  set(b, "clip.vision.embedding_length", MetadataValue::of(uint32_t{64}));
  set(b, "clip.vision.feed_forward_length", MetadataValue::of(uint32_t{128}));
  set(b, "clip.vision.block_count", MetadataValue::of(uint32_t{1}));
  set(b, "clip.vision.projection_dim", MetadataValue::of(uint32_t{64}));
  set(b, "clip.vision.attention.head_count", MetadataValue::of(uint32_t{4}));
  set(b, "clip.vision.attention.layer_norm_epsilon", MetadataValue::of(1e-6f));
  set(b, "clip.vision.image_mean", MetadataValue::array(std::vector<float>{0.5f, 0.5f, 0.5f}));
  set(b, "clip.vision.image_std", MetadataValue::array(std::vector<float>{0.5f, 0.5f, 0.5f}));
  set(b, "clip.use_gelu", MetadataValue::of(true));
  add_zeros(b, "v.patch_embd.weight", {16, 16, 3, 64});
  add_zeros(b, "v.position_embd.weight", {64, 16});
  add_zeros(b, "v.blk.0.attn_q.weight", {64, 64});
  add_zeros(b, "mm.input_projection.weight", {64, 64});
  return b;
}

TEST(CheckFileKind, ProjectorIsCheckedAsAProjector) {
  const CheckReport report = check_model(projector());
  EXPECT_EQ(report.kind, FileKind::projector);
  EXPECT_EQ(summary_of(report), (Summary{{Severity::info, "compat.types", ""}})) << describe(report);
  EXPECT_TRUE(report.passed(true));
}

TEST(CheckFileKind, BrokenProjectorGetsExactlyItsProblems) {
  GgufBuilder b = projector();
  set(b, "clip.projector_type", MetadataValue::string("hologram"));
  set(b, "clip.vision.block_count", MetadataValue::of(int32_t{1}));  // llama.cpp reads it with gguf_get_val_u32
  set(b, "clip.vision.patch_size", MetadataValue::of(uint32_t{0}));
  ASSERT_TRUE(b.remove("clip.vision.attention.layer_norm_epsilon"));
  const CheckReport report = check_model(b);
  EXPECT_EQ(report.kind, FileKind::projector);
  EXPECT_EQ(summary_of(report),
            (Summary{{Severity::error, "mmproj.unknown_projector", "clip.projector_type"},
                     {Severity::error, "mmproj.wrong_type", "clip.vision.block_count"},
                     {Severity::error, "mmproj.missing_key", "clip.vision.attention.layer_norm_epsilon"},
                     {Severity::error, "mmproj.bad_hyperparameter", "clip.vision.patch_size"},
                     {Severity::info, "compat.types", ""}}))
      << describe(report);
  const Finding* type = find_code(report, "mmproj.wrong_type");
  ASSERT_NE(type, nullptr);
  EXPECT_EQ(type->message,
            "'clip.vision.block_count' is an int32 but llama.cpp's projector loader reads it with gguf_get_val_u32, "
            "which aborts the program on any type but uint32; set it as a uint32");
  EXPECT_TRUE(type->offset.has_value());
  const Finding* unknown = find_code(report, "mmproj.unknown_projector");
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ(unknown->message,
            "projector type 'hologram' is not one llama.cpp knows: it refuses the file (\"unknown projector type: "
            "hologram\"); the projector may need a newer llama.cpp");
}

// Issue 29: clip's epsilon, image mean and std, against the range table (clip divides by the std).
TEST(CheckFileKind, ProjectorFloatsOutsideTheirRange) {
  const std::string eps_error =
      "clip aborts on a negative or NaN epsilon (GGML_ASSERT(eps >= 0.0f) in ggml's norm operations), and an "
      "infinite one turns every normalized activation into 0";
  const std::string eps_warning =
      "an epsilon is a small positive number (1e-5, 1e-6): at 0 a row of zeros is divided by zero, and above 0.1 it "
      "swamps the variance it is added to";
  const std::string std_error =
      "clip divides every pixel by it: 0 divides by zero, NaN or an infinity makes the image NaN, and a negative one "
      "inverts the image";
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::pair<std::pair<std::string, MetadataValue>, std::string> cases[] = {
      {{"clip.vision.attention.layer_norm_epsilon", MetadataValue::of(-1.0f)},
       "error mmproj.bad_hyperparameter 'clip.vision.attention.layer_norm_epsilon' is -1, outside [0, inf): " + eps_error},
      {{"clip.vision.attention.layer_norm_epsilon", MetadataValue::of(nan)},
       "error mmproj.bad_hyperparameter 'clip.vision.attention.layer_norm_epsilon' is nan, outside [0, inf): " + eps_error},
      {{"clip.vision.attention.layer_norm_epsilon", MetadataValue::of(inf)},
       "error mmproj.bad_hyperparameter 'clip.vision.attention.layer_norm_epsilon' is inf, outside [0, inf): " + eps_error},
      {{"clip.vision.attention.layer_norm_epsilon", MetadataValue::of(0.0f)},
       "warning mmproj.implausible_hyperparameter 'clip.vision.attention.layer_norm_epsilon' is 0, outside (0, 0.1]: " +
           eps_warning},
      {{"clip.vision.attention.layer_norm_epsilon", MetadataValue::of(1e30f)},
       "warning mmproj.implausible_hyperparameter 'clip.vision.attention.layer_norm_epsilon' is 1e+30, outside (0, "
       "0.1]: " + eps_warning},
      {{"clip.vision.image_std", MetadataValue::array(std::vector<float>{0.5f, 0.0f, 0.5f})},
       "error mmproj.bad_hyperparameter 'clip.vision.image_std' element 1 is 0, outside (0, inf): " + std_error},
      {{"clip.vision.image_std", MetadataValue::array(std::vector<float>{0.5f, 0.5f, -1.0f})},
       "error mmproj.bad_hyperparameter 'clip.vision.image_std' element 2 is -1, outside (0, inf): " + std_error},
      {{"clip.vision.image_mean", MetadataValue::array(std::vector<float>{nan, 0.5f, 0.5f})},
       "error mmproj.bad_hyperparameter 'clip.vision.image_mean' element 0 is nan, outside (-inf, inf): clip subtracts "
       "it from every pixel: NaN or an infinity makes the image NaN"},
  };
  for (const auto& [change, expected] : cases) {
    SCOPED_TRACE(change.first);
    GgufBuilder b = projector();
    set(b, change.first, change.second);
    const CheckReport report = check_model(b);
    std::string all;  // every finding: severity, code, subject, and the message but compat.types' (its own test's)
    for (const Finding& f : report.findings) {
      all += fmt::format("{} {} [{}] {}\n", severity_name(f.severity), f.code, f.subject,
                         f.code == "compat.types" ? "" : f.message);
    }
    const size_t code_end = expected.find(' ', expected.find(' ') + 1);
    EXPECT_EQ(all, fmt::format("{} [{}] {}; convert the projector again\ninfo compat.types [] \n",
                               expected.substr(0, code_end), change.first, expected.substr(code_end + 1)));
  }
}

TEST(CheckFileKind, ProjectorWithoutAnEncoderIsAnError) {
  GgufBuilder b = projector();
  set(b, "clip.has_vision_encoder", MetadataValue::of(false));
  const CheckReport report = check_model(b);
  EXPECT_EQ(summary_of(report), (Summary{{Severity::error, "mmproj.no_encoder", ""}, {Severity::info, "compat.types", ""}}))
      << describe(report);
}

TEST(CheckFileKind, VocabularyOnlyFileIsCheckedAsAVocabulary) {
  // The model's keys without its tensors, as llama.cpp's vocab files are.
  auto model = GgufFile::open(test::write_model(test::spm_model(), "model"));
  ASSERT_TRUE(model);
  GgufBuilder vocab;
  for (const KeyValue& kv : model->metadata()) set(vocab, kv.key, MetadataValue::copy_of(kv.value));
  const CheckReport report = check_file(test::write_model(vocab, "vocab")).value();
  EXPECT_EQ(report.kind, FileKind::vocabulary);
  EXPECT_EQ(summary_of(report), (Summary{{Severity::info, "arch.vocabulary_only", ""}})) << describe(report);
  EXPECT_TRUE(report.passed(true));
}

TEST(CheckFileKind, LaterShardIsCheckedAsAShard) {
  auto whole = GgufFile::open(test::sample_model());
  ASSERT_TRUE(whole);
  const auto dir = test::temp_dir("check-file-kind-shards");
  auto plan = plan_split(*whole, (dir / "split").string(), SplitLimits{0, 8});
  ASSERT_TRUE(plan);
  ASSERT_GE(plan->shards.size(), 2u);
  SplitWriteOptions options;
  options.sync = false;
  ASSERT_TRUE(write_split(*whole, *plan, options));

  const auto second = check_file(plan->shards[1].path);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->kind, FileKind::shard);
  EXPECT_EQ(summary_of(*second), (Summary{{Severity::info, "split.not_first_shard", "split.no"},
                                          {Severity::info, "compat.types", ""}}))
      << describe(*second);
  EXPECT_TRUE(second->passed(true));
  EXPECT_TRUE(second->complete);

  // The first shard is the model, checked whole.
  const auto first = check_file(plan->shards[0].path);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->kind, FileKind::model);
  EXPECT_TRUE(first->passed(true)) << describe(*first);
  std::filesystem::remove_all(dir);
}

TEST(CheckFileKind, CliNamesTheKind) {
  const auto path = test::write_model(lora_adapter(), "adapter");
  const auto r = test::run_gguf({"check", "--strict", path.string()});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  const auto report = check_file(path);
  ASSERT_TRUE(report);
  const Finding& types = report->findings.at(0);
  EXPECT_EQ(r.out, types.describe() + "\n" + path.string() + " (LoRA adapter): OK (0 errors, 0 warnings, 1 note)\n");
  const auto json = test::run_gguf({"check", "--json", path.string()});
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_EQ(json.err, "");
  EXPECT_NE(json.out.find(R"("kind":"adapter","passed":true)"), std::string::npos) << json.out;
}

}  // namespace
}  // namespace ggufkit
