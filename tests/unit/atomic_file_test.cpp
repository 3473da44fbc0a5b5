// AtomicFile and OutputPolicy (sink.h): what a file output may replace, checked before a byte is
// written, and what a replaced file keeps. Each refusal is asserted whole: code, file, message, no
// offset, and the directory left exactly as it was.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "ggufkit/atomic_file.h"
#include "ggufkit/mapped_file.h"
#include "test_support.h"

namespace ggufkit {
namespace {

namespace fs = std::filesystem;

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

void write_text(const fs::path& p, std::string_view text) {
  std::vector<std::byte> bytes(text.size());
  std::transform(text.begin(), text.end(), bytes.begin(), [](char c) { return std::byte(static_cast<unsigned char>(c)); });
  test::write_bytes(p, bytes);
}

std::string read_text(const fs::path& p) {
  const auto bytes = test::read_bytes(p);
  std::string s(bytes.size(), '\0');
  std::transform(bytes.begin(), bytes.end(), s.begin(), [](std::byte b) { return static_cast<char>(b); });
  return s;
}

Expected<void> write_whole(const fs::path& target, std::string_view text, const OutputPolicy& policy = {}) {
  auto f = AtomicFile::create(target, policy);
  if (!f) return std::move(f).error();
  if (auto r = (*f)->write(std::as_bytes(std::span(text.data(), text.size()))); !r) return r;
  return (*f)->commit(false);
}

void expect_refused(const Expected<void>& r, ErrorCode code, const fs::path& file, const std::string& message) {
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, code) << r.error().describe();
  EXPECT_EQ(r.error().file, file.string());
  EXPECT_EQ(r.error().message, message);
  EXPECT_FALSE(r.error().offset);
}

class OutputPolicyTest : public testing::Test {
 protected:
  void SetUp() override { dir_ = test::temp_dir("atomic-file"); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(OutputPolicyTest, NeverReplacesWhatIsNotARegularFile) {
  fs::create_directory(dir_ / "a-dir");
  ASSERT_EQ(::mkfifo((dir_ / "a-fifo").c_str(), 0644), 0);
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock_path = (dir_ / "a-socket").string();
  ASSERT_LT(sock_path.size(), sizeof(addr.sun_path));
  std::copy(sock_path.begin(), sock_path.end(), addr.sun_path);
  ASSERT_EQ(::bind(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  std::vector<std::pair<std::string, std::string>> cases = {
      {"a-dir", "a directory"}, {"a-fifo", "a FIFO"}, {"a-socket", "a socket"}};
  // A character device (what /dev/full is): only root can make one.
  if (::geteuid() == 0 && ::mknod((dir_ / "a-device").c_str(), S_IFCHR | 0644, makedev(1, 3)) == 0) {
    cases.emplace_back("a-device", "a character device");
  }
  const auto before = names_in(dir_);
  for (const auto& [name, kind] : cases) {
    SCOPED_TRACE(name);
    expect_refused(write_whole(dir_ / name, "x"), ErrorCode::output_not_regular, dir_ / name,
                   "is " + kind + ": refusing to replace it with a file");
    // Through a link too, and --force changes nothing.
    fs::create_symlink(name, dir_ / ("link-to-" + name));
    expect_refused(write_whole(dir_ / ("link-to-" + name), "x", {.overwrite = true, .inputs = {}}),
                   ErrorCode::output_not_regular, dir_ / ("link-to-" + name),
                   "is " + kind + ": refusing to replace it with a file");
    fs::remove(dir_ / ("link-to-" + name));
  }
  EXPECT_EQ(names_in(dir_), before);  // no temporary file left
  ::close(sock);
}

TEST_F(OutputPolicyTest, AnExistingFileOnlyWhenAllowed) {
  const fs::path out = dir_ / "out.bin";
  write_text(out, "old");
  expect_refused(write_whole(out, "new", {.overwrite = false, .inputs = {}}), ErrorCode::output_exists, out,
                 "already exists (--force replaces it)");
  EXPECT_EQ(read_text(out), "old");
  EXPECT_TRUE(AtomicFile::check(dir_ / "absent.bin", {.overwrite = false, .inputs = {}}));
  ASSERT_TRUE(write_whole(out, "new", {.overwrite = true, .inputs = {}}));
  EXPECT_EQ(read_text(out), "new");
  EXPECT_EQ(names_in(dir_), std::set<std::string>{"out.bin"});
}

TEST_F(OutputPolicyTest, NeverAnInputByAnyName) {
  const fs::path input = dir_ / "model.gguf";
  write_text(input, "model");
  fs::create_hard_link(input, dir_ / "hard.gguf");
  fs::create_symlink("model.gguf", dir_ / "soft.gguf");
  fs::create_directory(dir_ / "sub");
  for (const fs::path& out : {input, dir_ / "hard.gguf", dir_ / "soft.gguf", dir_ / "sub" / ".." / "model.gguf"}) {
    SCOPED_TRACE(out.string());
    const std::string message = out == input ? "is an input of this command: refusing to overwrite it"
                                             : "is an input of this command (" + input.string() + "): refusing to overwrite it";
    expect_refused(write_whole(out, "x", {.overwrite = true, .inputs = {input}}), ErrorCode::output_is_input, out, message);
    expect_refused(AtomicFile::check(out, {.overwrite = true, .inputs = {input}}), ErrorCode::output_is_input, out, message);
  }
  EXPECT_EQ(read_text(input), "model");
  EXPECT_EQ(names_in(dir_), (std::set<std::string>{"model.gguf", "hard.gguf", "soft.gguf", "sub"}));
}

// A symlinked output is written through: the link stays, its target gets the new bytes (as an
// in-place edit through the link would change it).
TEST_F(OutputPolicyTest, ALinkIsWrittenThrough) {
  fs::create_directory(dir_ / "store");
  write_text(dir_ / "store" / "real.gguf", "old");
  fs::create_symlink("store/real.gguf", dir_ / "model.gguf");
  ASSERT_TRUE(write_whole(dir_ / "model.gguf", "new"));
  EXPECT_TRUE(fs::is_symlink(dir_ / "model.gguf"));
  EXPECT_EQ(fs::read_symlink(dir_ / "model.gguf"), "store/real.gguf");
  EXPECT_EQ(read_text(dir_ / "store" / "real.gguf"), "new");
  EXPECT_EQ(names_in(dir_ / "store"), std::set<std::string>{"real.gguf"});
  // A dangling link creates its target.
  fs::create_symlink("store/new.gguf", dir_ / "dangling.gguf");
  ASSERT_TRUE(write_whole(dir_ / "dangling.gguf", "made"));
  EXPECT_TRUE(fs::is_symlink(dir_ / "dangling.gguf"));
  EXPECT_EQ(read_text(dir_ / "store" / "new.gguf"), "made");
}

// A replaced file keeps its permission bits, and (when the process may give them away, as root)
// its owner and group; a new file gets 0666 minus the umask.
TEST_F(OutputPolicyTest, AReplacedFileKeepsModeOwnerAndGroup) {
  const fs::path out = dir_ / "out.bin";
  write_text(out, "old");
  ASSERT_EQ(::chmod(out.c_str(), 0640), 0);
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::chown(out.c_str(), 65534, 65534), 0);
  }
  struct stat before {};
  ASSERT_EQ(::stat(out.c_str(), &before), 0);
  ASSERT_TRUE(write_whole(out, "new"));
  struct stat after {};
  ASSERT_EQ(::stat(out.c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino);  // a new file, renamed into place
  EXPECT_EQ(after.st_mode & 07777, 0640u);
  EXPECT_EQ(after.st_uid, before.st_uid);
  EXPECT_EQ(after.st_gid, before.st_gid);
  if (root) {
    EXPECT_EQ(after.st_uid, 65534u);
  }

  const mode_t mask = ::umask(0);
  ::umask(mask);
  ASSERT_TRUE(write_whole(dir_ / "fresh.bin", "x"));
  struct stat fresh {};
  ASSERT_EQ(::stat((dir_ / "fresh.bin").c_str(), &fresh), 0);
  EXPECT_EQ(fresh.st_mode & 07777, 0666u & ~mask);
}

// I/O errors about the output name the output and the system's reason, with no offset.
TEST_F(OutputPolicyTest, AMissingDirectoryIsReportedAgainstTheOutput) {
  const fs::path out = dir_ / "absent" / "out.gguf";
  expect_refused(write_whole(out, "x"), ErrorCode::io_error, out,
                 "cannot create a file in " + (dir_ / "absent").string() + ": No such file or directory");
}

// The temporary file of a writer killed by SIGKILL is removed by the next write of the same output;
// a live writer's (it holds the lock), another output's, and a user's file that only has a
// temporary's name (old, unlocked, even a GGUF one) stay.
TEST_F(OutputPolicyTest, OnlyTheTemporariesOfDeadWritersAreRemoved) {
  const fs::path out = dir_ / "out.gguf";
  // A live writer of the output, still writing.
  auto live = AtomicFile::create(out);
  ASSERT_TRUE(live);
  ASSERT_TRUE((*live)->write(std::as_bytes(std::span("GGUF live", 9))));
  // Writers that die (SIGKILL) with their temporary half written: one of this output, one of another.
  for (const fs::path& target : {out, dir_ / "other.gguf"}) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto f = AtomicFile::create(target);
      if (f) (void)(*f)->write(std::as_bytes(std::span("GGUF partial", 12)));
      ::raise(SIGKILL);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  }
  ASSERT_FALSE(fs::exists(out));
  // A user's files named like temporaries: old, unlocked, one of them a GGUF file.
  for (const char* name : {".out.gguf.tmp-user01", ".out.gguf.tmp-user02"}) {
    write_text(dir_ / name, name[19] == '1' ? "GGUF my own notes" : "notes");
    const timespec times[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, (dir_ / name).c_str(), times, 0), 0);
  }
  std::set<std::string> expected = {".out.gguf.tmp-user01", ".out.gguf.tmp-user02",
                                    (*live)->temp_path().filename().string()};
  std::string dead;
  for (const auto& n : names_in(dir_)) {
    if (n.starts_with(".other.gguf.tmp-")) expected.insert(n);  // another output's: not this writer's to judge
    if (!expected.contains(n)) dead = n;
  }
  ASSERT_EQ(names_in(dir_).size(), 5u);  // the two dead writers', the user's two, the live one's
  ASSERT_TRUE(dead.starts_with(".out.gguf.tmp-")) << dead;
  ASSERT_TRUE(write_whole(out, "done"));
  expected.insert("out.gguf");
  EXPECT_EQ(names_in(dir_), expected);  // the dead writer's temporary is gone
  EXPECT_EQ(read_text(dir_ / ".out.gguf.tmp-user01"), "GGUF my own notes");
  ASSERT_TRUE((*live)->commit(false));
  EXPECT_EQ(read_text(out), "GGUF live");
}

// Files committed as a set: a cancel up to the renames leaves none of them and no temporary.
TEST_F(OutputPolicyTest, ASetIsCommittedWholeOrNotAtAll) {
  const auto make_set = [&] {
    std::vector<std::unique_ptr<AtomicFile>> files;
    for (const char* name : {"a.bin", "b.bin", "c.bin"}) {
      auto f = AtomicFile::create(dir_ / name, {.overwrite = false, .inputs = {}});
      EXPECT_TRUE(f);
      EXPECT_TRUE((*f)->write(std::as_bytes(std::span(name, 5))));
      files.push_back(std::move(f).value());
    }
    return files;
  };
  std::atomic<bool> cancel{true};
  {
    auto files = make_set();
    const auto r = AtomicFile::commit_all(files, false, &cancel);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::cancelled);
  }
  EXPECT_EQ(names_in(dir_), std::set<std::string>{});
  // A file that appears under a name of the set after it was checked: kept, and none of the set is
  // left (the ones renamed already are taken back).
  {
    auto files = make_set();
    write_text(dir_ / "b.bin", "theirs");
    expect_refused(AtomicFile::commit_all(files, false), ErrorCode::output_exists, dir_ / "b.bin",
                   "already exists (--force replaces it): it appeared while this command wrote");
  }
  EXPECT_EQ(names_in(dir_), std::set<std::string>{"b.bin"});
  EXPECT_EQ(read_text(dir_ / "b.bin"), "theirs");
  fs::remove(dir_ / "b.bin");
  cancel = false;
  {
    auto files = make_set();
    ASSERT_TRUE(AtomicFile::commit_all(files, true, &cancel));
  }
  EXPECT_EQ(names_in(dir_), (std::set<std::string>{"a.bin", "b.bin", "c.bin"}));
  EXPECT_EQ(read_text(dir_ / "c.bin"), std::string("c.bin", 5));
  // With overwrite allowed, a file that appeared is replaced, as rename(2) replaces.
  auto f = AtomicFile::create(dir_ / "d.bin");
  ASSERT_TRUE(f);
  ASSERT_TRUE((*f)->write(std::as_bytes(std::span("mine", 4))));
  write_text(dir_ / "d.bin", "theirs");
  ASSERT_TRUE((*f)->commit(false));
  EXPECT_EQ(read_text(dir_ / "d.bin"), "mine");
}

// Issue 29 review: with overwrite, a rename failing in the middle of a set unlinked the files renamed
// before it, which had replaced the user's: old and new were both gone. The replaced files are put
// back, the new ones removed, and nothing else is left in the directory.
TEST_F(OutputPolicyTest, AFailedSetPutsBackTheFilesItReplaced) {
  write_text(dir_ / "a.bin", "old a");
  write_text(dir_ / "b.bin", "old b");
  write_text(dir_ / "c.bin", "old c");
  std::vector<std::unique_ptr<AtomicFile>> files;
  for (const char* name : {"new.bin", "a.bin", "b.bin", "c.bin"}) {
    auto f = AtomicFile::create(dir_ / name);
    ASSERT_TRUE(f) << f.error().describe();
    ASSERT_TRUE((*f)->write(std::as_bytes(std::span(name, 5))));
    files.push_back(std::move(f).value());
  }
  // b.bin becomes a directory after the checks: the third rename fails (EISDIR).
  fs::remove(dir_ / "b.bin");
  fs::create_directory(dir_ / "b.bin");
  const auto r = AtomicFile::commit_all(files, false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::io_error) << r.error().describe();
  files.clear();  // the temporaries of the files not renamed go with them
  EXPECT_EQ(names_in(dir_), (std::set<std::string>{"a.bin", "b.bin", "c.bin"}));
  EXPECT_EQ(read_text(dir_ / "a.bin"), "old a");
  EXPECT_EQ(read_text(dir_ / "c.bin"), "old c");
  EXPECT_TRUE(fs::is_directory(dir_ / "b.bin"));
  // A set that succeeds leaves no saved copy.
  fs::remove(dir_ / "b.bin");
  for (const char* name : {"a.bin", "c.bin"}) {
    auto f = AtomicFile::create(dir_ / name);
    ASSERT_TRUE(f);
    ASSERT_TRUE((*f)->write(std::as_bytes(std::span(name, 5))));
    files.push_back(std::move(f).value());
  }
  ASSERT_TRUE(AtomicFile::commit_all(files, false));
  files.clear();
  EXPECT_EQ(names_in(dir_), (std::set<std::string>{"a.bin", "c.bin"}));
  EXPECT_EQ(read_text(dir_ / "a.bin"), "a.bin");
}

// zero_fill_on_bus_error (the Python module's SIGBUS handler), in a child process: a mapping read
// after its file shrank gives zeros instead of SIGBUS, lost_to_bus_error says which bytes, and an
// AtomicFile created before the fault refuses to commit, naming the file, and leaves nothing.
TEST(ZeroFillOnBusError, ReadsZerosAndRefusesTheCommit) {
  const fs::path dir = test::temp_dir("zero-fill");
  const fs::path in = dir / "in.bin";
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  test::write_bytes(in, std::vector<std::byte>(3 * page, std::byte{0xab}));
  EXPECT_EXIT(
      {
        zero_fill_on_bus_error();
        auto mapped = MappedFile::open(in);
        auto out = AtomicFile::create(dir / "out.bin");
        if (!mapped || !out || ::truncate(in.c_str(), static_cast<off_t>(page)) != 0) std::_Exit(10);
        const auto bytes = mapped->bytes();
        size_t nonzero = 0;
        for (size_t i = 2 * page; i < 3 * page; ++i) nonzero += bytes[i] != std::byte{0};  // the fault, then zeros
        if (nonzero != 0 || bytes[page - 1] != std::byte{0xab} || bus_error_count() != 1) std::_Exit(11);
        if (!lost_to_bus_error(bytes.subspan(2 * page, 1)) || lost_to_bus_error(bytes.subspan(0, page))) std::_Exit(12);
        if (!(*out)->write(bytes.subspan(0, 2 * page))) std::_Exit(13);  // page 1: a second fault
        const auto committed = (*out)->commit(false);
        if (committed || committed.error().code != ErrorCode::io_error || committed.error().file != in.string() ||
            committed.error().describe() !=
                "the file was truncated or became unreadable while it was read (bus error); nothing was written") {
          std::_Exit(14);
        }
        out->reset();
        std::_Exit(bus_error_count() == 2 && names_in(dir) == std::set<std::string>{"in.bin"} ? 0 : 15);
      },
      testing::ExitedWithCode(0), "");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ggufkit
