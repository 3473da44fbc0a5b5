// gguf set / get / rm / rename: the verbs as a user runs them, on copies of the sample model.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/syscall.h>

#include <fstream>
#include <iterator>

#include "ggufkit/reader.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

class CliEdit : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = temp_dir("cli-edit");
    model = dir / "model.gguf";
    fs::copy_file(sample_model(), model);
  }
  void TearDown() override { fs::remove_all(dir); }
  GgufFile reopen(const fs::path& p) {
    auto f = GgufFile::open(p);
    EXPECT_TRUE(f) << f.error().describe();
    return std::move(*f);
  }
  // The tensor bytes of the original sample and of `p` are the same.
  void expect_same_tensors(const fs::path& p) {
    auto a = GgufFile::open(sample_model());
    auto b = GgufFile::open(p);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(a->tensors().size(), b->tensors().size());
    for (size_t i = 0; i < a->tensors().size(); ++i) {
      const auto x = a->tensor_data(a->tensors()[i]), y = b->tensor_data(b->tensors()[i]);
      EXPECT_TRUE(std::ranges::equal(x, y)) << a->tensors()[i].name;
    }
  }
  fs::path dir, model;
};

TEST_F(CliEdit, ChatTemplateFromAFileComesBackByteForByte) {
  // No trailing newline, CRLF, a tab, UTF-8 and Jinja: all must survive exactly.
  const std::string jinja = "{% for m in messages %}<|{{ m['role'] }}|>\r\n\t{{ m['content'] }} — ünïcode{% endfor %}";
  const fs::path t = dir / "t.jinja";
  write_bytes(t, std::vector<std::byte>(reinterpret_cast<const std::byte*>(jinja.data()),
                                        reinterpret_cast<const std::byte*>(jinja.data()) + jinja.size()));
  auto r = run_gguf({"set", model.string(), "tokenizer.chat_template", "--from-file", t.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tokenizer.chat_template"), std::string::npos);
  r = run_gguf({"get", model.string(), "tokenizer.chat_template"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, jinja);
  r = run_gguf({"get", model.string(), "tokenizer.chat_template", "--json"});
  EXPECT_EQ(r.out.front(), '"');
  // A named template next to it.
  r = run_gguf({"set", model.string(), "tokenizer.chat_template.tool_use", "--from-file", t.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(run_gguf({"get", model.string(), "tokenizer.chat_template.tool_use"}).out, jinja);
  expect_same_tensors(model);
}

// Issue 29 review: a file that reports size 0 (/proc) gave an empty value with exit 0. The file
// is read to its end, whatever size fstat reports.
TEST_F(CliEdit, FromFileReadsToTheEndWhateverSizeTheFileReports) {
  const fs::path out = dir / "out.gguf";
  auto r = run_gguf({"set", model.string(), "general.name", "--from-file", "/proc/version", "-o", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  std::ifstream in("/proc/version", std::ios::binary);
  const std::string version((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(version.size(), 20u);
  // The change, its new value shortened for display, then the new file.
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_TRUE(lines[0].starts_with("set general.name: \"ggufkit tiny sample\" -> \"" + version.substr(0, 20))) << lines[0];
  EXPECT_EQ(lines[1], fmt::format("{}: new file {}", out.string(), out.string()));
  const GgufFile f = reopen(out);
  EXPECT_EQ(f.get("general.name")->as_string(), version);
}

TEST_F(CliEdit, ExistingKeysKeepTheirTypeNewKeysAreInferred) {
  const GgufFile before = reopen(model);
  const KeyValue* ctx = nullptr;
  for (const KeyValue& kv : before.metadata()) {
    if (kv.key.ends_with(".context_length")) ctx = &kv;
  }
  ASSERT_NE(ctx, nullptr);
  const std::string ctx_key(ctx->key);
  const ValueType ctx_type = ctx->value.type();
  auto r = run_gguf({"set", model.string(), ctx_key, "8192", "test.u", "123", "test.i", "-5", "test.f", "0.5",
                     "test.b", "true", "test.s", "hello", "general.version", "2.0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const GgufFile f = reopen(model);
  EXPECT_EQ(f.get(ctx_key)->type(), ctx_type);
  EXPECT_EQ(run_gguf({"get", model.string(), ctx_key}).out, "8192\n");
  EXPECT_EQ(f.get("test.u")->type(), ValueType::UInt32);
  EXPECT_EQ(f.get("test.i")->get<int32_t>(), -5);
  EXPECT_EQ(f.get("test.f")->get<float>(), 0.5f);
  EXPECT_EQ(f.get("test.b")->get<bool>(), true);
  EXPECT_EQ(f.get("test.s")->as_string(), "hello");
  EXPECT_EQ(f.get("general.version")->as_string(), "2.0");
  // --type overrides, and checks the range.
  r = run_gguf({"set", model.string(), "test.u", "300", "--type", "uint8"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("test.u"), std::string::npos) << r.err;
  r = run_gguf({"set", model.string(), "test.u", "300", "--type", "int64"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(reopen(model).get("test.u")->get<int64_t>(), 300);
  EXPECT_NE(r.out.find("uint32"), std::string::npos) << "the type change is reported: " << r.out;
  expect_same_tensors(model);
}

TEST_F(CliEdit, ArraysComeFromJson) {
  auto r = run_gguf({"set", model.string(), "test.ints", "--json", "[1, 2, 3]"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_gguf({"set", model.string(), "test.words", "--json", R"(["a", "b c", "\u00e9"])"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_gguf({"set", model.string(), "test.floats", "--json", "[0.5, 1, -2]", "--type", "float32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const GgufFile f = reopen(model);
  EXPECT_EQ(f.get("test.ints")->as_array()->element_type(), ValueType::UInt32);
  EXPECT_EQ(f.get("test.ints")->as_array()->size(), 3u);
  EXPECT_EQ(run_gguf({"get", model.string(), "test.words"}).out, "[\"a\",\"b c\",\"\xc3\xa9\"]\n");
  EXPECT_EQ(f.get("test.floats")->as_array()->element_type(), ValueType::Float32);
  // An existing array keeps its element type.
  r = run_gguf({"set", model.string(), "test.ints", "--json", "[7]"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(reopen(model).get("test.ints")->as_array()->element_type(), ValueType::UInt32);
  // Text for an array, mixed JSON, bad JSON: usage errors.
  EXPECT_EQ(run_gguf({"set", model.string(), "test.ints", "5"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"set", model.string(), "test.mixed", "--json", "[1, \"a\"]"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"set", model.string(), "test.bad", "--json", "[1,"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"set", model.string(), "test.empty", "--json", "[]"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"set", model.string(), "test.empty", "--json", "[]", "--type", "int32"}).exit_code, 0);
}

// Issue 29: a value nested deeper than the reader reads was written, and then every verb refused
// the file, rm included. An edit after which the file would not open (gguf check: structure.*) is
// refused instead, and the file stays as it was.
TEST_F(CliEdit, ArraysNestedDeeperThanTheReaderReadsAreRefused) {
  const auto before = read_bytes(model);
  const auto nested = [](int levels) { return std::string(levels, '[') + "1" + std::string(levels, ']'); };
  auto r = run_gguf({"set", model.string(), "test.deep", "--json", nested(9)});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, fmt::format("gguf: {}: 'test.deep': arrays nested more than 8 deep [array_too_deep]\n", model.string()));
  EXPECT_EQ(read_bytes(model), before);
  // Issue 29 review: 40000 levels overflowed the stack (SIGSEGV), nine empty arrays were "an empty
  // array": the depth is checked first, on the text, with --type or without.
  for (const auto& [json, typed] : std::vector<std::pair<std::string, bool>>{
           {nested(40000), true}, {nested(40000), false}, {"[[[[[[[[[]]]]]]]]]", false}, {"[[[[[[[[[]]]]]]]]]", true},
           {"[\"]]\\\"[[[[[[[[[[\", [[[[[[[[[]]]]]]]]]]", false}}) {
    SCOPED_TRACE(json.substr(0, 40));
    std::vector<std::string> args{"set", model.string(), "test.deep", "--json", json};
    if (typed) args.insert(args.end(), {"--type", "uint8"});
    r = run_gguf(args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, fmt::format("gguf: {}: 'test.deep': arrays nested more than 8 deep [array_too_deep]\n", model.string()));
    EXPECT_EQ(read_bytes(model), before);
  }
  // Brackets inside strings are not nesting.
  r = run_gguf({"set", model.string(), "test.brackets", "--json", "[\"[[[[[[[[[[\\\"[[[[\"]"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(*reopen(model).get("test.brackets")->as_array()->strings().begin(), "[[[[[[[[[[\"[[[[");
  r = run_gguf({"rm", model.string(), "test.brackets"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Eight levels are the reader's limit: written, read back, and removed again.
  r = run_gguf({"set", model.string(), "test.deep", "--json", nested(8)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(run_gguf({"get", model.string(), "test.deep"}).out, nested(8) + "\n");
  r = run_gguf({"rm", model.string(), "test.deep"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(reopen(model).find("test.deep"), nullptr);
}

TEST_F(CliEdit, DryRunAndOutputLeaveTheFileUntouched) {
  const auto before = read_bytes(model);
  auto r = run_gguf({"set", model.string(), "general.name", "A much longer name than the sample has", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("dry run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rewrite"), std::string::npos) << r.out;
  EXPECT_EQ(read_bytes(model), before);
  const fs::path out = dir / "out.gguf";
  r = run_gguf({"rm", model.string(), "general.name", "-o", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_bytes(model), before);
  EXPECT_EQ(reopen(out).find("general.name"), nullptr);
  expect_same_tensors(out);
}

TEST_F(CliEdit, InPlaceWhenItFitsRewriteOtherwise) {
  const GgufFile f = reopen(model);
  const std::string name(f.get("general.name")->as_string().value_or(""));
  std::string same_length = name;
  same_length[0] = same_length[0] == 'X' ? 'Y' : 'X';
  auto r = run_gguf({"set", model.string(), "general.name", same_length});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("in place"), std::string::npos) << r.out;
  r = run_gguf({"set", model.string(), "general.name", name + std::string(200, '!')});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rewrite"), std::string::npos) << r.out;
  EXPECT_EQ(run_gguf({"get", model.string(), "general.name"}).out, name + std::string(200, '!'));
  expect_same_tensors(model);
}

// A writer that does not take the edit lock renames another file over the model between the edit's
// checks and its in-place write (the edit is stopped just before its pwrite): the write lands in
// the file that was replaced, and the edit says so instead of reporting success. Exit 2, nothing on
// stdout, the file now under the name untouched; the edit is in the old file when it has another
// name (here a hard link), which the message gives by its inode.
TEST_F(CliEdit, AnInPlaceEditReportsAFileReplacedUnderIt) {
  GGUFKIT_REQUIRE_PTRACE();
  const std::string name(reopen(model).get("general.name")->as_string().value_or(""));
  std::string same_length = name;
  same_length[0] = same_length[0] == 'X' ? 'Y' : 'X';
  const fs::path foreign = dir / "foreign.gguf", held = dir / "held.gguf";
  ASSERT_EQ(run_gguf({"set", model.string(), "general.name", "foreign", "-o", foreign.string()}).exit_code, 0);
  const auto foreign_bytes = read_bytes(foreign);
  for (const bool other_name : {true, false}) {
    SCOPED_TRACE(other_name ? "the replaced file has another name" : "the replaced file is deleted");
    fs::remove(model);
    fs::copy_file(sample_model(), model);
    if (other_name) fs::create_hard_link(model, held);
    struct stat before {};
    ASSERT_EQ(::stat(model.c_str(), &before), 0);
    const StoppedRun run = run_gguf_stopped_at({"set", model.string(), "general.name", same_length}, {SYS_pwrite64}, 1,
                                               [&](pid_t) {
                                                 fs::copy_file(foreign, dir / "incoming.gguf");
                                                 fs::rename(dir / "incoming.gguf", model);
                                               });
    ASSERT_TRUE(run.stopped);
    EXPECT_EQ(run.result.exit_code, 2);
    EXPECT_EQ(run.result.out, "");
    const std::string where = other_name ? "inode " + std::to_string(before.st_ino) + ", which has other names"
                                         : std::string("which is deleted");
    EXPECT_EQ(run.result.err, "gguf: " + model.string() +
                                  ": the file was replaced during the edit (by a writer that does not take the edit "
                                  "lock): the edit went to the replaced file, " + where +
                                  "; the file now under this name is not modified [io_error]\n");
    EXPECT_EQ(read_bytes(model), foreign_bytes);
    if (other_name) {
      EXPECT_EQ(reopen(held).get("general.name")->as_string(), same_length);
      expect_same_tensors(held);
      fs::remove(held);
    }
  }
}

TEST_F(CliEdit, RemoveRenameAndSeveralChangesInOneCall) {
  auto r = run_gguf({"rename", model.string(), "general.name", "general.title"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rename general.name -> general.title"), std::string::npos) << r.out;
  // The verb's own changes first, then --rename, then --rm: one write for all of them.
  r = run_gguf({"set", model.string(), "test.a", "1", "--rm", "general.title", "--rename", "test.a=test.b"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const GgufFile f = reopen(model);
  EXPECT_EQ(f.find("general.title"), nullptr);
  EXPECT_EQ(f.find("test.a"), nullptr);
  EXPECT_EQ(f.get("test.b")->get<uint32_t>(), 1u);
  r = run_gguf({"rm", model.string(), "no.such.key"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no.such.key"), std::string::npos) << r.err;
  expect_same_tensors(model);
}

TEST_F(CliEdit, ErrorsAreUsageErrorsAndChangeNothing) {
  const auto before = read_bytes(model);
  EXPECT_EQ(run_gguf({"get", model.string(), "no.such.key"}).exit_code, 1);
  EXPECT_EQ(run_gguf({"get", (dir / "missing.gguf").string(), "general.name"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"set", (dir / "missing.gguf").string(), "general.name", "x"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"set", model.string(), "general.name"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"set", model.string(), "k", "v", "--type", "complex"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"set", model.string(), "k", "--from-file", (dir / "none.jinja").string()}).exit_code, 2);
  ASSERT_EQ(::chmod(model.c_str(), 0444), 0);
  const auto r = run_gguf({"set", model.string(), "general.name", "read-only"});
  ::chmod(model.c_str(), 0644);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("read-only"), std::string::npos) << r.err;
  EXPECT_EQ(read_bytes(model), before);
  for (const char* verb : {"set", "get", "rm", "rename"}) {
    const auto help = run_gguf({verb, "--help"});
    EXPECT_EQ(help.exit_code, 0) << verb;
    EXPECT_NE(help.out.find("Usage"), std::string::npos) << verb;
  }
}

TEST_F(CliEdit, BigEndianFilesAreEditedInTheirOwnByteOrder) {
  const fs::path big = dir / "big.gguf";
  auto r = run_gguf({"convert-endian", model.string(), big.string(), "--to", "big"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_gguf({"get", big.string(), "general.name"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, run_gguf({"get", model.string(), "general.name"}).out);
  // The same edits on both files; the big-endian one stays big-endian and equals the conversion
  // of the edited little-endian one.
  for (const std::vector<std::string>& edit :
       {std::vector<std::string>{"set", "", "general.name", "edited"}, {"set", "", "test.n", "7", "--rm", "general.name"},
        {"rename", "", "test.n", "test.m"}}) {
    for (const fs::path& p : {model, big}) {
      std::vector<std::string> args = edit;
      args[1] = p.string();
      r = run_gguf(args);
      ASSERT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    }
    const fs::path expected = dir / "expected.gguf";
    r = run_gguf({"convert-endian", model.string(), expected.string(), "--to", "big", "--force"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(read_bytes(expected) == read_bytes(big)) << edit[0] << " " << edit[2];
  }
  EXPECT_EQ(reopen(big).byte_order(), ByteOrder::big);
  EXPECT_EQ(run_gguf({"get", big.string(), "test.m"}).out, "7\n");
}

}  // namespace
