// Real files: every file of ../shared/corpus (llama.cpp's vocab files, the tiny llama in 25
// quantization mixes written by llama.cpp's own quantizer) and the project's sample model.
//
// Each file must open, round-trip byte for byte through both write paths, and keep every tensor
// inside the file at an aligned place. Facts asserted about particular files come from outside
// ggufkit: ../shared/README.md (what the corpus is), llama.h (file type ids) and
// tools/make_sample.cpp (the sample's generator).
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ggufkit/ggufkit.h"
#include "test_support.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace ggufkit;
using ggufkit::test::corpus_files;
using ggufkit::test::read_bytes;
using ggufkit::test::sample_model;
using ggufkit::test::shared_dir;
using ggufkit::test::temp_dir;

GgufFile open_or_fail(const fs::path& path) {
  auto f = GgufFile::open(path);
  if (!f) throw std::runtime_error(path.string() + ": " + f.error().describe());
  return std::move(f).value();
}

// The offset of the first differing byte, or the shorter length when one is a prefix of the other;
// nullopt when equal. Reported on failure instead of a 5 MB byte dump.
std::optional<size_t> first_difference(std::span<const std::byte> a, std::span<const std::byte> b) {
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  if (ia == a.end() && ib == b.end()) return std::nullopt;
  return static_cast<size_t>(ia - a.begin());
}

// Every file under test: the shared corpus (when present) and the sample.
std::vector<fs::path> files_under_test() {
  std::vector<fs::path> files = corpus_files();
  files.push_back(sample_model());
  return files;
}

std::string test_name_for(const testing::TestParamInfo<fs::path>& param) {
  const fs::path& path = param.param;
  std::string name = path.parent_path().filename().string() + "_" + path.stem().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

// Parameter count of a llama-architecture model with tied output (no output.weight): token
// embedding, output norm, and per layer two norms, Q/K/V/O projections and the three FFN matrices.
uint64_t llama_parameter_count(uint64_t vocab, uint64_t embd, uint64_t layers, uint64_t heads, uint64_t kv_heads,
                               uint64_t ff) {
  const uint64_t kv_dim = embd / heads * kv_heads;
  const uint64_t per_layer = 2 * embd + 2 * embd * embd + 2 * embd * kv_dim + 3 * embd * ff;
  return vocab * embd + embd + layers * per_layer;
}

std::map<std::string, uint64_t> tensors_per_type(const FileSummary& s) {
  std::map<std::string, uint64_t> out;
  for (const TypeUsage& u : s.types) out[std::string(type_name(u.type))] = u.tensors;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Every file.

class CorpusFile : public testing::TestWithParam<fs::path> {};

TEST_P(CorpusFile, OpensAndEveryTensorLiesAlignedInsideTheFile) {
  const GgufFile file = open_or_fail(GetParam());
  EXPECT_EQ(file.file_size(), fs::file_size(GetParam()));
  EXPECT_GE(file.version(), 2u);
  EXPECT_LE(file.version(), kGgufVersionLatest);
  const std::byte* base = file.bytes().data();
  const std::byte* end = base + file.file_size();
  if (!file.tensors().empty()) {
    EXPECT_EQ(file.data_offset() % file.alignment(), 0u);
  }
  uint64_t total = 0;
  for (const TensorInfo& t : file.tensors()) {
    SCOPED_TRACE(std::string(t.name));
    const auto data = file.tensor_data(t);
    EXPECT_EQ(data.size(), t.size);
    ASSERT_GE(data.data(), base);
    ASSERT_LE(data.data() + data.size(), end);
    const auto at = static_cast<uint64_t>(data.data() - base);
    EXPECT_EQ(at, file.data_offset() + t.offset);
    EXPECT_EQ(at % file.alignment(), 0u) << "tensor data at file offset " << at;
    EXPECT_EQ(t.offset % file.alignment(), 0u);
    total += t.size;
  }
  EXPECT_EQ(file.tensor_bytes(), total);
}

TEST_P(CorpusFile, RewriteFileWritesAByteIdenticalCopy) {
  const GgufFile file = open_or_fail(GetParam());
  const fs::path dir = temp_dir("corpus-rewrite");
  const fs::path copy = dir / GetParam().filename();
  const auto written = rewrite_file(file, copy);
  ASSERT_TRUE(written) << written.error().describe();
  const std::vector<std::byte> original = read_bytes(GetParam());
  const std::vector<std::byte> rewritten = read_bytes(copy);
  EXPECT_EQ(rewritten.size(), original.size());
  const auto diff = first_difference(original, rewritten);
  EXPECT_FALSE(diff) << "first difference at byte " << *diff;
  fs::remove_all(dir);
}

TEST_P(CorpusFile, BuilderFromFileWritesTheSameBytesToMemory) {
  const GgufFile file = open_or_fail(GetParam());
  const GgufBuilder builder = GgufBuilder::from_file(file);
  EXPECT_EQ(builder.metadata_count(), file.metadata().size());
  EXPECT_EQ(builder.tensor_count(), file.tensors().size());
  const WriteOptions options = builder.suggested_options();
  EXPECT_EQ(builder.file_bytes(options), file.file_size());
  if (!file.tensors().empty()) {
    EXPECT_EQ(builder.header_bytes(options), file.data_offset());
  }
  MemorySink sink;
  const auto written = builder.write(sink, options);
  ASSERT_TRUE(written) << written.error().describe();
  EXPECT_EQ(sink.data.size(), file.file_size());
  const auto diff = first_difference(file.bytes(), sink.data);
  EXPECT_FALSE(diff) << "first difference at byte " << *diff;
}

INSTANTIATE_TEST_SUITE_P(AllFiles, CorpusFile, testing::ValuesIn(files_under_test()), test_name_for);

// ---------------------------------------------------------------------------------------------
// The shared corpus: what its README says it is.

std::vector<fs::path> tiny_llama_files() {
  std::vector<fs::path> out;
  for (const fs::path& p : corpus_files()) {
    if (p.parent_path().filename() == "tiny-llama") out.push_back(p);
  }
  return out;
}

fs::path shared_file(const std::string& relative) { return *shared_dir() / "corpus" / relative; }

TEST(SharedCorpus, HoldsTheEightVocabulariesAndTwentySixTinyLlamas) {
  GGUFKIT_REQUIRE_SHARED();
  size_t vocab = 0;
  for (const fs::path& p : corpus_files()) vocab += p.parent_path().filename() == "vocab";
  EXPECT_EQ(vocab, 8u);
  EXPECT_EQ(tiny_llama_files().size(), 26u);  // the gguf-py F16 original and 25 quantization mixes
}

TEST(SharedCorpus, TinyLlamaQ4KMHasTwelveQ4KThreeQ6KFiveF32Tensors) {
  GGUFKIT_REQUIRE_SHARED();
  const GgufFile file = open_or_fail(shared_file("tiny-llama/tiny-llama-q4_k_m.gguf"));
  const FileSummary s = summarize(file);
  const std::map<std::string, uint64_t> expected = {{"q4_K", 12}, {"q6_K", 3}, {"f32", 5}};
  EXPECT_EQ(tensors_per_type(s), expected);
  // Counted straight from the tensor list too, not only through summarize().
  std::map<std::string, uint64_t> counted;
  for (const TensorInfo& t : file.tensors()) ++counted[std::string(type_name(t.type))];
  EXPECT_EQ(counted, expected);
  // llama.h: LLAMA_FTYPE_MOSTLY_Q4_K_M = 15.
  const ModelMetadata meta(file);
  EXPECT_EQ(meta.file_type(), 15u);
  const FileTypeInfo* ft = find_file_type(15);
  ASSERT_NE(ft, nullptr);
  EXPECT_EQ(ft->name, "MOSTLY_Q4_K_M");
}

class TinyLlama : public testing::TestWithParam<fs::path> {};

TEST_P(TinyLlama, HasTheReadmeHyperparameters) {
  const GgufFile file = open_or_fail(GetParam());
  const ModelMetadata meta(file);
  EXPECT_EQ(meta.architecture(), "llama");
  EXPECT_EQ(meta.block_count(), 2u);
  EXPECT_EQ(meta.embedding_length(), 256u);
  EXPECT_EQ(meta.head_count(), 4u);
  EXPECT_EQ(meta.head_count_kv(), 2u);
  EXPECT_EQ(meta.feed_forward_length(), 768u);
  const auto tokens = meta.tokens();
  ASSERT_TRUE(tokens);
  EXPECT_EQ(tokens->size(), 4096u);
  EXPECT_EQ(tokens->element_type(), ValueType::String);
}

TEST_P(TinyLlama, SummaryCountsEveryWeightOfATiedOutputLlama) {
  const GgufFile file = open_or_fail(GetParam());
  const FileSummary s = summarize(file);
  EXPECT_EQ(s.parameters, llama_parameter_count(4096, 256, 2, 4, 2, 768));
  EXPECT_EQ(s.tensor_bytes, file.tensor_bytes());
  EXPECT_EQ(file.tensors().size(), 2 + 2 * 9u);
  EXPECT_EQ(file.find_tensor("output.weight"), nullptr) << "the README says the output is tied";
  uint64_t tensors = 0, elements = 0, bytes = 0;
  for (const TypeUsage& u : s.types) {
    tensors += u.tensors;
    elements += u.elements;
    bytes += u.bytes;
  }
  EXPECT_EQ(tensors, file.tensors().size());
  EXPECT_EQ(elements, s.parameters);
  EXPECT_EQ(bytes, s.tensor_bytes);
  EXPECT_TRUE(std::is_sorted(s.types.begin(), s.types.end(),
                             [](const TypeUsage& a, const TypeUsage& b) { return a.elements > b.elements; }));
  EXPECT_DOUBLE_EQ(s.bits_per_weight, 8.0 * static_cast<double>(s.tensor_bytes) / static_cast<double>(s.parameters));
  // ggml order: the embedding's first dimension is the embedding width, then the vocabulary.
  const TensorInfo* embd = file.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(std::vector<int64_t>(embd->shape().begin(), embd->shape().end()), (std::vector<int64_t>{256, 4096}));
}

// The file name is the llama-quantize preset that wrote it; general.file_type must be that preset.
TEST_P(TinyLlama, FileTypeIsThePresetInTheFileName) {
  const GgufFile file = open_or_fail(GetParam());
  const std::string stem = GetParam().stem().string();
  const std::string preset = stem.substr(std::string("tiny-llama-").size());
  const auto expected = parse_file_type(preset);
  ASSERT_TRUE(expected) << "no file type named " << preset;
  EXPECT_EQ(ModelMetadata(file).file_type(), *expected);
}

// "the first 4096 tokens of the llama-spm vocabulary"
TEST_P(TinyLlama, TokensAreTheFirstOfTheLlamaSpmVocabulary) {
  const GgufFile file = open_or_fail(GetParam());
  const GgufFile spm = open_or_fail(shared_file("vocab/ggml-vocab-llama-spm.gguf"));
  const auto tokens = ModelMetadata(file).tokens();
  const auto spm_tokens = ModelMetadata(spm).tokens();
  ASSERT_TRUE(tokens && spm_tokens);
  ASSERT_LE(tokens->size(), spm_tokens->size());
  uint64_t i = 0;
  auto spm_it = spm_tokens->strings().begin();
  for (const std::string_view token : tokens->strings()) {
    ASSERT_EQ(token, *spm_it) << "token " << i;
    ++spm_it;
    ++i;
  }
  EXPECT_EQ(i, 4096u);
}

INSTANTIATE_TEST_SUITE_P(Shared, TinyLlama, testing::ValuesIn(tiny_llama_files()), test_name_for);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TinyLlama);  // no ../shared: nothing to run

TEST(SharedCorpus, LlamaBpeVocabularyHas128256TokensAnd280147Merges) {
  GGUFKIT_REQUIRE_SHARED();
  const GgufFile file = open_or_fail(shared_file("vocab/ggml-vocab-llama-bpe.gguf"));
  const ModelMetadata meta(file);
  EXPECT_TRUE(file.tensors().empty());
  EXPECT_EQ(meta.tokenizer_model(), "gpt2");  // llama 3's tokenizer is a byte-level BPE
  ASSERT_TRUE(meta.tokens());
  EXPECT_EQ(meta.tokens()->size(), 128256u);
  ASSERT_TRUE(meta.merges());
  EXPECT_EQ(meta.merges()->size(), 280147u);
  // Walking the lazy ranges visits exactly as many elements as the arrays claim.
  uint64_t merges = 0;
  for (const std::string_view m : meta.merges()->strings()) merges += !m.empty();
  EXPECT_EQ(merges, 280147u);
}

TEST(SharedCorpus, LlamaSpmVocabularyIsA32kSentencePieceVocabulary) {
  GGUFKIT_REQUIRE_SHARED();
  const GgufFile file = open_or_fail(shared_file("vocab/ggml-vocab-llama-spm.gguf"));
  const ModelMetadata meta(file);
  EXPECT_EQ(meta.tokenizer_model(), "llama");  // llama.cpp's name for SentencePiece
  ASSERT_TRUE(meta.tokens());
  EXPECT_EQ(meta.tokens()->size(), 32000u);
  ASSERT_TRUE(meta.scores());
  EXPECT_EQ(meta.scores()->size(), 32000u);
  EXPECT_FALSE(meta.merges());
}

// The .out files hold the ids llama.cpp's tokenizer produced with each vocabulary: every one of
// them must name a token of that vocabulary.
TEST(SharedCorpus, TokenizerTestIdsAreTokensOfTheirVocabulary) {
  GGUFKIT_REQUIRE_SHARED();
  size_t vocabularies = 0;
  for (const fs::path& path : corpus_files()) {
    if (path.parent_path().filename() != "vocab") continue;
    SCOPED_TRACE(path.filename().string());
    const GgufFile file = open_or_fail(path);
    EXPECT_TRUE(file.tensors().empty());
    const auto tokens = ModelMetadata(file).tokens();
    ASSERT_TRUE(tokens);
    std::ifstream out(path.string() + ".out");
    ASSERT_TRUE(out) << "no .out file next to it";
    std::string line;
    size_t ids = 0;
    while (std::getline(out, line)) {
      std::istringstream words(line);
      int64_t id = 0;
      while (words >> id) {
        EXPECT_GE(id, 0);
        EXPECT_LT(static_cast<uint64_t>(id), tokens->size());
        ++ids;
      }
    }
    EXPECT_GT(ids, 0u);
    ++vocabularies;
  }
  EXPECT_EQ(vocabularies, 8u);
}

// ---------------------------------------------------------------------------------------------
// The sample: what tools/make_sample.cpp writes.

TEST(Sample, HasTheGeneratorsHyperparameters) {
  const GgufFile file = open_or_fail(sample_model());
  const ModelMetadata meta(file);
  EXPECT_EQ(meta.architecture(), "llama");
  EXPECT_EQ(meta.name(), "ggufkit tiny sample");
  EXPECT_EQ(meta.file_type(), 1u);  // MOSTLY_F16
  EXPECT_EQ(meta.context_length(), 256u);
  EXPECT_EQ(meta.block_count(), 2u);
  EXPECT_EQ(meta.embedding_length(), 64u);
  EXPECT_EQ(meta.head_count(), 4u);
  EXPECT_EQ(meta.head_count_kv(), 2u);
  EXPECT_EQ(meta.feed_forward_length(), 192u);
  EXPECT_EQ(meta.rms_norm_epsilon(), static_cast<double>(1e-5f));
  ASSERT_TRUE(meta.tokens());
  EXPECT_EQ(meta.tokens()->size(), 512u);
  EXPECT_EQ(meta.bos_token_id(), 1u);
  EXPECT_EQ(meta.eos_token_id(), 2u);
  EXPECT_EQ(meta.add_bos_token(), true);
  EXPECT_TRUE(meta.chat_template());
  const FileSummary s = summarize(file);
  EXPECT_EQ(s.parameters, llama_parameter_count(512, 64, 2, 4, 2, 192));
  EXPECT_EQ(tensors_per_type(s), (std::map<std::string, uint64_t>{{"f16", 15}, {"f32", 5}}));
}

// Runs a program (no shell) and returns its exit status.
int run_program(const std::vector<std::string>& args) {
  std::vector<std::string> store = args;
  std::vector<char*> argv;
  for (auto& a : store) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The sample in samples/ is committed output of make-sample: the writer must still produce it.
TEST(Sample, MakeSampleReproducesTheCommittedFileExactly) {
  const fs::path dir = temp_dir("make-sample");
  const fs::path out = dir / "tiny-llama-f16.gguf";
  ASSERT_EQ(run_program({GGUFKIT_MAKE_SAMPLE_PATH, out.string()}), 0);
  const std::vector<std::byte> committed = read_bytes(sample_model());
  const std::vector<std::byte> made = read_bytes(out);
  EXPECT_EQ(made.size(), committed.size());
  const auto diff = first_difference(committed, made);
  EXPECT_FALSE(diff) << "first difference at byte " << *diff;
  fs::remove_all(dir);
}

}  // namespace
