// Mistakes caught with the fix suggested: misspelt verbs, options, type and preset names, keys and
// tensors (exit 2, or 1 for get's missing key, one line on stderr, nothing on stdout); gguf set
// refusing a key unknown in a namespace llama.cpp and gguf-py define unless --new says it is meant.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using ggufkit::test::run_gguf;

struct Case {
  std::vector<std::string> args;
  int exit_code;
  std::string err;
};

void expect_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    std::string cmd = "gguf";
    for (const auto& a : c.args) cmd += " " + a;
    SCOPED_TRACE(cmd);
    const auto r = run_gguf(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, c.err);
  }
}

TEST(CliSuggest, MisspeltNamesGetTheNearestOne) {
  const std::string m = ggufkit::test::sample_model().string();
  expect_cases({
      {{"infos", m}, 2, "gguf: unknown verb 'infos' (did you mean info?)\n"},
      {{"frobnicate", m}, 2, "gguf: unknown verb 'frobnicate' (see gguf --help)\n"},
      {{"info", m, "--jsn"}, 2, "gguf info: unknown option '--jsn' (did you mean --json?)\n"},
      {{"info", m, "--zzzzzz"}, 2, "gguf info: unknown option '--zzzzzz' (see gguf info --help)\n"},
      {{"quantize", m, "/nonexistent/q.gguf", "Q4_K_M", "--thread", "2"}, 2,
       "gguf quantize: unknown option '--thread' (did you mean --threads?)\n"},
      {{"quantize", m, "/nonexistent/q.gguf", "Q4KM"}, 2, "gguf: 'Q4KM' is not a quantization type (did you mean Q4_K_M?)\n"},
      {{"quantize", m, "/nonexistent/q.gguf", "q4km"}, 2, "gguf: 'q4km' is not a quantization type (did you mean Q4_K_M?)\n"},
      {{"quantize", m, "/nonexistent/q.gguf", "zzz"}, 2,
       "gguf: 'zzz' is not a quantization type (try q4_0, q8_0, q4_K, Q4_K_M, iq4_xs...; gguf types lists them)\n"},
      {{"quantize", m, "/nonexistent/q.gguf", "q4_0", "--output-tensor-type", "q8"}, 2,
       "gguf: --output-tensor-type 'q8' is not a tensor type (did you mean q8_0?)\n"},
      {{"get", m, "general.nmae"}, 1, "gguf: " + m + ": no key 'general.nmae' (did you mean general.name?)\n"},
      {{"get", m, "nothing.like.it"}, 1, "gguf: " + m + ": no key 'nothing.like.it'\n"},
      {{"extract", m, "token_embd.weigth", "-o", "/nonexistent/x"}, 2,
       "gguf: " + m + ": no tensor named 'token_embd.weigth' (did you mean token_embd.weight?)\n"},
      {{"rm", m, "general.nmae", "--dry-run"}, 2,
       "gguf: " + m + ": 'general.nmae': there is no such key to remove (did you mean general.name?) [invalid_argument]\n"},
      {{"rename", m, "general.nmae", "general.title", "--dry-run"}, 2,
       "gguf: " + m + ": 'general.nmae': there is no such key to rename (did you mean general.name?) [invalid_argument]\n"},
      {{"set", m, "general.name", "x", "--type", "strng"}, 2, "gguf set: unknown --type 'strng' (did you mean string?)\n"},
  });
}

TEST(CliSuggest, SetRefusesUnknownKeysInKnownNamespacesWithoutNew) {
  const fs::path dir = ggufkit::test::temp_dir("cli-suggest-set");
  const fs::path f = dir / "m.gguf";
  fs::copy_file(ggufkit::test::sample_model(), f);
  const auto before = ggufkit::test::read_bytes(f);
  const std::string p = f.string();
  const std::string hint = "; give --new to add it anyway\n";
  expect_cases({
      {{"set", p, "llama.context_lenght", "8192"}, 2,
       "gguf set: llama.context_lenght is not a key llama.cpp or gguf-py knows in llama.* (did you mean "
       "llama.context_length?)" + hint},
      {{"set", p, "general.nmae", "x"}, 2,
       "gguf set: general.nmae is not a key llama.cpp or gguf-py knows in general.* (did you mean general.name?)" + hint},
      {{"set", p, "tokenizer.chat_templte", "--from-file", p}, 2,
       "gguf set: tokenizer.chat_templte is not a key llama.cpp or gguf-py knows in tokenizer.* (did you mean "
       "tokenizer.chat_template?)" + hint},
      // One bad key refuses the whole command.
      {{"set", p, "general.author", "me", "llama.frobnication", "1"}, 2,
       "gguf set: llama.frobnication is not a key llama.cpp or gguf-py knows in llama.*" + hint},
  });
  EXPECT_EQ(ggufkit::test::read_bytes(f), before);  // nothing written

  // Known keys, keys of a namespace of the user's own, and --new are accepted.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"set", p, "general.base_model.0.name", "Base"},
                                             {"set", p, "tokenizer.chat_template.tool_use", "{{ x }}"},
                                             {"set", p, "mycompany.build", "42"},
                                             {"set", p, "llama.frobnication", "1", "--new"}}) {
    const auto r = run_gguf(args);
    EXPECT_EQ(r.exit_code, 0) << args[2] << ": " << r.err;
    EXPECT_EQ(r.err, "");
  }
  const auto got = run_gguf({"get", p, "llama.frobnication"});
  EXPECT_EQ(got.exit_code, 0);
  EXPECT_EQ(got.out, "1\n");
  fs::remove_all(dir);
}

// An edit after which llama.cpp would refuse the file (gguf check finds a new error): a warning on
// stderr, the edit made; with --strict refused, nothing written. An edit that breaks nothing says
// nothing.
TEST(CliSuggest, EditsThatBreakTheLoaderWarnAndStrictRefuses) {
  const fs::path dir = ggufkit::test::temp_dir("cli-suggest-strict");
  const fs::path f = dir / "m.gguf";
  fs::copy_file(ggufkit::test::sample_model(), f);
  const std::string p = f.string();
  const auto before = ggufkit::test::read_bytes(f);
  const std::string found = ": after this edit, gguf check finds: ";
  const std::string type_error =
      "error arch.wrong_type at offset 232 (llama.context_length): 'llama.context_length' is a float32, but llama.cpp "
      "reads it as a uint32 and refuses the file (\"key llama.context_length has wrong type f32 but expected type "
      "u32\"); set it again with gguf set --type uint32\n";
  const std::string special_error =
      "error tokenizer.special_token_out_of_range at offset 11672 (tokenizer.ggml.bos_token_id): "
      "tokenizer.ggml.bos_token_id is 99999 but the vocabulary has 512 tokens (ids 0..511); llama.cpp ignores it and "
      "uses its default for the tokenizer instead; set it to the id of the intended token\n";
  const std::string length_error =
      "error tokenizer.length_mismatch at offset 7482 (tokenizer.ggml.scores): tokenizer.ggml.scores has 2 entries "
      "for 512 tokens and llama.cpp refuses the file ('Index out of array bounds'); it needs one entry per token\n";
  struct StrictCase {
    std::vector<std::string> args;
    std::string verb;
    std::string finding;
  };
  for (const StrictCase& c : std::vector<StrictCase>{
           {{"set", p, "llama.context_length", "8192", "--type", "float32"}, "set", type_error},
           {{"set", p, "tokenizer.ggml.bos_token_id", "99999"}, "set", special_error},
           {{"set", p, "tokenizer.ggml.scores", "--json", "[0.0, 1.0]"}, "set", length_error}}) {
    SCOPED_TRACE(c.args[2]);
    auto strict = c.args;
    strict.push_back("--strict");
    const auto refused = run_gguf(strict);
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_EQ(refused.out, "");
    EXPECT_EQ(refused.err, "gguf " + c.verb + ": refused" + found + c.finding + "gguf " + c.verb + ": --strict: nothing written\n");
    EXPECT_EQ(ggufkit::test::read_bytes(f), before);
    auto dry = c.args;
    dry.push_back("--dry-run");
    const auto warned = run_gguf(dry);
    EXPECT_EQ(warned.exit_code, 0);
    EXPECT_EQ(warned.err, "gguf " + c.verb + ": warning" + found + c.finding);
    EXPECT_TRUE(warned.out.find("dry run, nothing written") != std::string::npos) << warned.out;
  }
  const auto rm = run_gguf({"rm", p, "general.architecture", "--dry-run"});
  EXPECT_EQ(rm.exit_code, 0);
  EXPECT_EQ(rm.err, "gguf rm: warning" + found +
                        "error metadata.missing_architecture (general.architecture): general.architecture is missing: "
                        "llama.cpp cannot load a model without it (it picks the hyperparameter keys and the tensor "
                        "layout by it); add it with gguf set\n");
  // Fine edits pass --strict silently.
  const auto fine = run_gguf({"set", p, "general.name", "Foo", "llama.context_length", "512", "--strict"});
  EXPECT_EQ(fine.exit_code, 0);
  EXPECT_EQ(fine.err, "");
  EXPECT_EQ(run_gguf({"get", p, "llama.context_length"}).out, "512\n");
  fs::remove_all(dir);
}

}  // namespace
