// The host-state layer's file system (FileHostState, file_host_state.h, the
// tpmsec_host target): each record kept whole in its file where it always
// was, 0600 in a 0700 directory, a malformed file an error naming it and how
// to forget it, the kernel's pins found under /sys; and the state
// directory's rule (files.h) held on every record as another local user
// would attack it. The protect path over host state in memory, with no
// state directory, is in trust_anchor_test.cc.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "support/test_data.h"
#include "tpmsec/host/file_host_state.h"
#include "tpmsec/host/kernel_pin.h"
#include "tpmsec/null_key.h"

namespace tpmsec {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const char* prefix) {
  std::string tmpl = ::testing::TempDir() + "/" + prefix + "-XXXXXX";
  return ::mkdtemp(tmpl.data()) ? tmpl : "";
}

fs::perms permissions(const std::string& path) { return fs::status(path).permissions() & fs::perms::all; }

TEST(FileHostState, AMalformedPinFileIsAnErrorNamingIt) {
  std::string dir = temp_dir("pins");
  FileHostState store(dir);
  const TpmId tpm = TpmId::of("swtpm:path=/x");
  ASSERT_TRUE(store.put_null_key_pin(tpm, SaltKind::kEcc, {Bytes{0, 0x0b, 1}, "b"}).ok());
  const std::string file = store.where(StateRecord::kNullKeyPin, tpm, SaltKind::kEcc);
  std::ofstream(file) << "tpm=swtpm:path=/other\nsalt=ecc\nboot=b\nname=000b01\n";
  auto r = store.null_key_pin(tpm, SaltKind::kEcc);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find(file), std::string::npos);
  fs::remove_all(dir);
}

// The EK pins (--ek-ca): kept whole per TPM string and key type, 0600 in a
// 0700 directory, a malformed file an error naming it and how to forget
// it, and erase() dropping both key types.
TEST(FileHostState, EkPinsAreKeptCheckedAndForgotten) {
  std::string dir = temp_dir("ek-pins");
  FileHostState store(dir);
  const TpmId tpm = TpmId::of("swtpm:host=127.0.0.1,port=1");
  Bytes ek{0, 0x0b, 1, 2}, null_name{0, 0x0b, 3};
  ASSERT_TRUE(store.put_ek_pin(tpm, SaltKind::kEcc, {ek, "", {}}).ok());
  ASSERT_TRUE(store.put_ek_pin(tpm, SaltKind::kRsa, {ek, "boot-1", null_name}).ok());
  auto ecc = store.ek_pin(tpm, SaltKind::kEcc);
  ASSERT_TRUE(ecc.ok()) << ecc.error().message();
  ASSERT_TRUE(ecc->has_value());
  EXPECT_EQ((*ecc)->name, ek);
  EXPECT_EQ((*ecc)->null_boot, "");
  auto rsa = store.ek_pin(tpm, SaltKind::kRsa);
  ASSERT_TRUE(rsa.ok() && rsa->has_value());
  EXPECT_EQ((*rsa)->null_boot, "boot-1");
  EXPECT_EQ((*rsa)->null_name, null_name);
  const std::string file = store.where(StateRecord::kEkPin, tpm, SaltKind::kEcc);
  EXPECT_EQ(permissions(file), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(permissions(store.where(StateRecord::kEkPin)), fs::perms::owner_all);
  EXPECT_FALSE(store.ek_pin(TpmId::of("another TPM"), SaltKind::kEcc)->has_value());

  std::ofstream(file) << "tpm=swtpm:host=other\nsalt=ecc\nname=000b01\n";
  auto bad = store.ek_pin(tpm, SaltKind::kEcc);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find(file), std::string::npos);
  EXPECT_NE(bad.error().message().find("null-key --forget"), std::string::npos);

  auto forgot = store.erase(StateRecord::kEkPin, tpm);
  ASSERT_TRUE(forgot.ok());
  EXPECT_TRUE(*forgot);
  EXPECT_FALSE(store.ek_pin(tpm, SaltKind::kRsa)->has_value());
  EXPECT_FALSE(*store.erase(StateRecord::kEkPin, tpm));
  fs::remove_all(dir);
}

// Every record is where it always was (existing state directories keep
// working): DIR/<folder>/<first 16 bytes of SHA-256(TPM string)>[-suffix].
TEST(FileHostState, RecordsKeepTheirPaths) {
  FileHostState store("/state");
  const TpmId tpm = TpmId::of("swtpm:port=1");
  ASSERT_EQ(tpm.key.size(), 32u);
  EXPECT_EQ(tpm.text, "swtpm:port=1");
  EXPECT_EQ(store.where(StateRecord::kNullKeyPin, tpm, SaltKind::kRsa), "/state/null-key-pins/" + tpm.key + "-rsa");
  EXPECT_EQ(store.where(StateRecord::kEkPin, tpm, SaltKind::kEcc), "/state/ek-pins/" + tpm.key + "-ecc");
  EXPECT_EQ(store.where(StateRecord::kKeptInfo, tpm), "/state/session-cache/" + tpm.key + "-info");
  EXPECT_EQ(store.where(StateRecord::kKeptNullKey, tpm, SaltKind::kEcc), "/state/session-cache/" + tpm.key + "-ecc");
  EXPECT_EQ(store.where(StateRecord::kBindSecret, tpm), "/state/bind/" + tpm.key);
  EXPECT_EQ(store.where(StateRecord::kSaltKey, tpm), "/state/salt-key/" + tpm.key);
}

// What the TCTI keeps per program (session_cache.h): a count per TPM, boot
// and program, 0600, only ever a cache (another program's, another boot's or
// a malformed record reads as none), forgotten with the TPM's other records.
TEST(FileHostState, CommandCountsAreKeptPerProgramAndBoot) {
  std::string dir = temp_dir("counts");
  FileHostState store(dir);
  const TpmId tpm = TpmId::of("swtpm:host=127.0.0.1,port=1");
  const ProgramId extend = ProgramId::of("/usr/bin/tpm2 (tpm2_pcrextend)");
  const ProgramId read = ProgramId::of("/usr/bin/tpm2 (tpm2_pcrread)");
  auto count = [&](const TpmId& t, const char* boot, const ProgramId& program) {
    auto kept = store.kept_command_count(t, boot, program);
    EXPECT_TRUE(kept.ok()) << kept.error().message();
    return kept.ok() ? *kept : std::nullopt;
  };
  EXPECT_FALSE(count(tpm, "b1", extend));
  ASSERT_TRUE(store.put_kept_command_count(tpm, "b1", extend, 1).ok());
  ASSERT_TRUE(store.put_kept_command_count(tpm, "b1", read, 7).ok());
  EXPECT_EQ(count(tpm, "b1", extend), 1u);
  EXPECT_EQ(count(tpm, "b1", read), 7u);
  EXPECT_FALSE(count(tpm, "b2", extend)) << "another boot's";
  EXPECT_FALSE(count(TpmId::of("swtpm:host=127.0.0.1,port=2"), "b1", extend)) << "another TPM's";
  const std::string file = dir + "/session-cache/" + tpm.key + "-commands-" + extend.key;
  EXPECT_EQ(permissions(file), fs::perms::owner_read | fs::perms::owner_write);
  std::ofstream(file) << "tpm=" << tpm.text << "\nboot=b1\nprogram=" << extend.path << "\ncommands=1x\n";
  EXPECT_FALSE(count(tpm, "b1", extend)) << "a malformed count";
  std::ofstream(file) << "tpm=" << tpm.text << "\nboot=b1\nprogram=/usr/bin/other\ncommands=1\n";
  EXPECT_FALSE(count(tpm, "b1", extend)) << "another program's";
  auto erased = store.erase(StateRecord::kKeptCommandCount, tpm);
  ASSERT_TRUE(erased.ok()) << erased.error().message();
  EXPECT_TRUE(*erased);
  EXPECT_FALSE(count(tpm, "b1", read));
  EXPECT_FALSE(fs::exists(file));
  fs::remove_all(dir);
}

// The executable, as /proc names it (a multi-call binary run by another name
// has that name added: tcti_test runs tpm2-tools).
TEST(FileHostState, TheRunningProgramIsItsExecutable) {
  FileHostState store(temp_dir("program"));
  auto p = store.running_program();
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->path, fs::read_symlink("/proc/self/exe").string());
  EXPECT_EQ(p->key.size(), 32u);
}

// What a Tpm holds, per process and Tpm: kept 0600 under its own name,
// rewritten, removed once it holds nothing; a record that does not read back
// as written (or copied under another's name) is left out, never a reason
// to flush.
TEST(FileHostState, HeldHandlesAreKeptPerProcessAndRemovedWhenEmpty) {
  std::string dir = temp_dir("held");
  FileHostState store(dir);
  const TpmId tpm = TpmId::of("swtpm:host=127.0.0.1,port=2321");
  const TpmId other = TpmId::of("swtpm:host=127.0.0.1,port=2322");
  HeldHandlesRecord a{{4242, 99, 7}, 1, "b", {{0x02000000, false}, {0x80000001, false}}};
  HeldHandlesRecord b{{4243, 100, 7}, 3, "b", {{0x02000001, true}}};
  ASSERT_TRUE(store.put_held_handles(tpm, a).ok());
  ASSERT_TRUE(store.put_held_handles(tpm, b).ok());
  ASSERT_TRUE(store.put_held_handles(other, a).ok());
  auto kept = store.held_handles(tpm);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].owner, a.owner);
  EXPECT_EQ(kept[0].context, 1u);
  EXPECT_EQ(kept[0].boot, "b");
  EXPECT_EQ(kept[0].handles, a.handles);
  EXPECT_EQ(kept[1].handles, b.handles);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(store.where(StateRecord::kHeldHandles))) {
    files.push_back(e.path().string());
    EXPECT_EQ(permissions(e.path().string()), fs::perms::owner_read | fs::perms::owner_write);
  }
  EXPECT_EQ(files.size(), 3u);
  a.handles = {{0x02000000, true}};
  ASSERT_TRUE(store.put_held_handles(tpm, a).ok());
  EXPECT_EQ(store.held_handles(tpm)[0].handles, a.handles);
  a.handles.clear();
  ASSERT_TRUE(store.put_held_handles(tpm, a).ok());
  ASSERT_EQ(store.held_handles(tpm).size(), 1u);
  EXPECT_EQ(store.held_handles(tpm)[0].owner, b.owner);
  // b's record altered: a handle that is no tracked handle, then copied
  // under another process's name.
  std::string b_file;
  for (const auto& e : fs::directory_iterator(store.where(StateRecord::kHeldHandles))) {
    if (e.path().filename().string().find("-4243-") != std::string::npos) b_file = e.path().string();
  }
  ASSERT_FALSE(b_file.empty());
  std::string text;
  {
    std::ifstream in(b_file);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ofstream(b_file) << "tpm=swtpm:host=127.0.0.1,port=2321\nboot=b\npid=4243\nstart=100\npidns=7\ncontext=3\n"
                           "handles=0x81000001\n";
  EXPECT_TRUE(store.held_handles(tpm).empty());
  fs::remove(b_file);
  std::string copy = b_file;
  copy.replace(copy.find("-4243-"), 6, "-4244-");
  std::ofstream(copy) << text;
  fs::permissions(copy, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_TRUE(store.held_handles(tpm).empty());
  ASSERT_TRUE(store.erase(StateRecord::kHeldHandles, other).value());
  fs::remove_all(dir);
}

// A process runs while its pid has its start time and it is no zombie; this
// pid with another start time is a later process (the owner ended); one of
// another pid namespace cannot be told, and counts as running.
TEST(FileHostState, AProcessRunsOnlyWithItsPidAndStartTime) {
  FileHostState store(temp_dir("process"));
  auto self = store.this_process();
  ASSERT_TRUE(self.ok()) << self.error().message();
  EXPECT_EQ(self->pid, ::getpid());
  EXPECT_NE(self->pid_namespace, 0u);
  EXPECT_TRUE(store.process_runs(*self));
  EXPECT_FALSE(store.process_runs({self->pid, self->start + 1, self->pid_namespace}));
  EXPECT_TRUE(store.process_runs({self->pid, self->start + 1, self->pid_namespace + 1}));
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  if (child == 0) {
    char c = 0;
    (void)::read(ready[0], &c, 1);
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  ProcessStamp theirs = *self;
  theirs.pid = child;
  std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  for (int n = 3; n <= 22 && fields >> field; ++n) {
    if (n == 22) theirs.start = std::stoull(field);
  }
  EXPECT_TRUE(store.process_runs(theirs));
  ASSERT_EQ(::write(ready[1], "x", 1), 1);
  // A zombie (exited, not reaped yet: WNOWAIT) has ended.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_FALSE(store.process_runs(theirs));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_FALSE(store.process_runs(theirs));
  ::close(ready[0]);
  ::close(ready[1]);
}

// ---- The state directory's rule (files.h), as another local user attacks it ----

constexpr uid_t kNobody = 65534;  // not root, not the caller

// Run as root (CI does): the attacker's files are made with chown.
class StateDirRule : public ::testing::Test {
 protected:
  // A record of one kind: its file and its reader, which tells whether it
  // was found (or the error).
  struct Record {
    std::string kind;
    std::string file;
    std::function<Result<bool>()> read;
  };

  void SetUp() override {
    ASSERT_EQ(::geteuid(), 0u) << "these tests plant files owned by another uid (chown): run them as root";
    base_ = temp_dir("state-rule");
    ASSERT_FALSE(base_.empty());
    base_ = fs::path(base_).lexically_normal().string();  // as messages name the state root's parent
    state_ = base_ + "/state";
    store_ = std::make_unique<FileHostState>(state_);
  }
  void TearDown() override { fs::remove_all(base_); }

  // One record of every kind, kept through the store's own writers.
  void keep_every_record() {
    // An SRK-template key whose point is P-256's generator (SEC 2, 2.4.2):
    // a key a salt may go to, so the kept record reads back.
    Public salt_key = null_key_template(SaltKind::kEcc);
    salt_key.unique_x = testing::H("6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296");
    salt_key.unique_y = testing::H("4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5");
    PersistentSaltKey k{0x81000001, salt_key, compute_name(salt_key).value(), false};
    BindSecret bind{0x01005EC0, {}, SecretBytes(Bytes(32, 0x5e))};
    NullKey::Snapshot kept{SaltKind::kEcc, salt_key, Bytes{0, 0x0b, 1}, Context{}};
    for (const Status& st :
         {store_->put_null_key_pin(tpm_, SaltKind::kEcc, {Bytes{0, 0x0b, 1}, "b1"}),
          store_->put_ek_pin(tpm_, SaltKind::kEcc, {Bytes{0, 0x0b, 2}, "", {}}), store_->put_bind_secret(tpm_, bind),
          store_->put_salt_key(tpm_, k), store_->put_kept_info(tpm_, "b1", TpmInfo{}),
          store_->put_kept_null_key(tpm_, "b1", kept), store_->put_kept_command_count(tpm_, "b1", program_, 3),
          store_->put_kept_caller_session(tpm_, "b1", {kCallerSession, 0x000b, Bytes(32, 7)})}) {
      ASSERT_TRUE(st.ok()) << st.error().message();
    }
  }

  template <typename T>
  static Result<bool> found(Result<std::optional<T>> r) {
    if (!r.ok()) return r.error();
    return r->has_value();
  }
  std::vector<Record> records() const {
    const FileHostState& s = *store_;
    const TpmId& t = tpm_;
    return {
        {"null-key pin", s.where(StateRecord::kNullKeyPin, t),
         [&] { return found(s.null_key_pin(t, SaltKind::kEcc)); }},
        {"EK pin", s.where(StateRecord::kEkPin, t), [&] { return found(s.ek_pin(t, SaltKind::kEcc)); }},
        {"bind secret", s.where(StateRecord::kBindSecret, t), [&] { return found(s.bind_secret(t)); }},
        {"salt key", s.where(StateRecord::kSaltKey, t), [&] { return found(s.salt_key(t)); }},
        {"kept capabilities", s.where(StateRecord::kKeptInfo, t), [&] { return found(s.kept_info(t, "b1")); }},
        {"kept null key context", s.where(StateRecord::kKeptNullKey, t),
         [&] { return found(s.kept_null_key(t, "b1", SaltKind::kEcc)); }},
        {"kept command count", state_ + "/session-cache/" + t.key + "-commands-" + program_.key,
         [&] { return found(s.kept_command_count(t, "b1", program_)); }},
        {"kept caller session", state_ + "/session-cache/" + t.key + "-session-02000000",
         [&] { return found(s.kept_caller_session(t, "b1", kCallerSession)); }},
    };
  }

  // `r` refused: kRuntime, one line holding `line`.
  static void expect_refused(const Result<bool>& r, const std::string& line) {
    ASSERT_FALSE(r.ok()) << "used: " << line;
    EXPECT_EQ(r.error().kind(), ErrorKind::kRuntime) << r.error().message();
    EXPECT_EQ(r.error().message().find('\n'), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find(line), std::string::npos) << r.error().message();
  }
  // Every record reads back.
  void expect_all_found() {
    for (const Record& rec : records()) {
      auto r = rec.read();
      ASSERT_TRUE(r.ok()) << rec.kind << ": " << r.error().message();
      EXPECT_TRUE(*r) << rec.kind << " not read back";
    }
  }
  static void chown_to(const std::string& path, uid_t uid) { ASSERT_EQ(::lchown(path.c_str(), uid, uid), 0) << path; }

  static constexpr uint32_t kCallerSession = 0x02000000;  // a program's HMAC session (KeptCallerSession)
  std::string base_, state_;
  std::unique_ptr<FileHostState> store_;
  const TpmId tpm_ = TpmId::of("swtpm:host=127.0.0.1,port=1");
  const ProgramId program_ = ProgramId::of("/usr/bin/tpm2 (tpm2_pcrextend)");
};

// An existing root-owned state directory keeps working: 0700 as tpmsec
// makes it, or 0755 directories (an administrator's /var/lib/tpmsec), in a
// directory only root can write or in a root-owned sticky one (/tmp).
TEST_F(StateDirRule, RootsOwnDirectoriesKeepWorking) {
  keep_every_record();
  expect_all_found();
  for (mode_t holder : {0700, 0755, 01777}) {
    SCOPED_TRACE(fmt::format("parent {:04o}, directories 0755", holder));
    ASSERT_EQ(::chmod(base_.c_str(), holder), 0);
    for (const auto& e : fs::recursive_directory_iterator(state_)) {
      if (e.is_directory()) ::chmod(e.path().c_str(), 0755);
    }
    ::chmod(state_.c_str(), 0755);
    expect_all_found();
  }
}

// Each kind of state file, planted or loosened: owned by another user, open
// to group or others, a symbolic link (even root's, to a good copy). Each
// is refused before a byte of it is used, with one line naming the file and
// its owner; put back as it was, it reads again.
TEST_F(StateDirRule, AStateFileThatIsNotPrivateIsRefused) {
  keep_every_record();
  for (const Record& rec : records()) {
    SCOPED_TRACE(rec.kind);
    ASSERT_TRUE(fs::is_regular_file(rec.file)) << rec.file;
    chown_to(rec.file, kNobody);
    expect_refused(rec.read(), fmt::format("state file {} (owner uid 65534 (nobody), mode 0600) belongs to neither "
                                           "root nor this user: refused",
                                           rec.file));
    chown_to(rec.file, 0);
    for (mode_t loose : {0644, 0640, 0606, 0700}) {
      ASSERT_EQ(::chmod(rec.file.c_str(), loose), 0);
      expect_refused(rec.read(), fmt::format("state file {} (owner uid 0 (root), mode {:04o}) is not mode 0600 or "
                                             "stricter: refused",
                                             rec.file, loose));
    }
    ASSERT_EQ(::chmod(rec.file.c_str(), 0600), 0);
    const std::string copy = base_ + "/copy";
    fs::rename(rec.file, copy);
    fs::create_symlink(copy, rec.file);
    expect_refused(rec.read(), fmt::format("state file {} (owner uid 0 (root), mode 0777) is a symbolic link, never "
                                           "followed: refused",
                                           rec.file));
    fs::remove(rec.file);
    fs::rename(copy, rec.file);
    auto again = rec.read();
    ASSERT_TRUE(again.ok()) << again.error().message();
    EXPECT_TRUE(*again);
  }
}

// Each directory from the state root down, another user's, open to group or
// others (sticky or not), or a symbolic link to a good copy: every record
// under it is refused, read, written or erased, with one line naming the
// directory; nothing is written through it.
TEST_F(StateDirRule, ADirectoryOnTheWayThatIsNotPrivateIsRefused) {
  keep_every_record();
  for (const Record& rec : records()) {
    for (const std::string dir : {state_, fs::path(rec.file).parent_path().string()}) {
      SCOPED_TRACE(rec.kind + " under " + dir);
      const std::string before = testing::slurp(rec.file);
      chown_to(dir, kNobody);
      expect_refused(rec.read(), fmt::format("state directory {} (owner uid 65534 (nobody), mode 0700) belongs to "
                                             "neither root nor this user: refused",
                                             dir));
      if (rec.kind == "kept command count" || dir == state_) {
        EXPECT_FALSE(store_->put_kept_command_count(tpm_, "b1", program_, 9).ok()) << "written through it";
        EXPECT_EQ(testing::slurp(rec.file), before);
      }
      if (rec.kind == "bind secret" || dir == state_) {
        EXPECT_FALSE(store_->erase(StateRecord::kBindSecret, tpm_).ok()) << "removed from it";
        EXPECT_TRUE(fs::exists(store_->where(StateRecord::kBindSecret, tpm_)));
      }
      chown_to(dir, 0);
      for (mode_t open : {0770, 0707, 0777, 01777}) {
        ASSERT_EQ(::chmod(dir.c_str(), open), 0);
        expect_refused(rec.read(), fmt::format("state directory {} (owner uid 0 (root), mode {:04o}) can be written "
                                               "by group or others: refused",
                                               dir, open));
      }
      ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
      const std::string copy = base_ + "/copy";
      fs::rename(dir, copy);
      fs::create_symlink(copy, dir);
      expect_refused(rec.read(), fmt::format("state directory {} (owner uid 0 (root), mode 0777) is a symbolic link, "
                                             "never followed: refused",
                                             dir));
      fs::remove(dir);
      fs::rename(copy, dir);
      expect_all_found();
    }
  }
}

// The attack: root's TPMSEC_STATE_DIR in a 0777 directory owned by
// nobody, who planted the state directory and a pin in it (0644, theirs).
// The directory holding the state root is checked too, on every read: one
// another user owns, or others can write without the sticky bit, could have
// the root swapped, so every record is refused naming it, and nothing is
// created in it. A root-owned sticky one (/tmp) is fine (the test above).
TEST_F(StateDirRule, AStateDirectoryInADirectoryOthersCanSwapItInIsRefused) {
  const std::string shared = base_ + "/shared";
  fs::create_directory(shared);
  FileHostState planted(shared + "/state");
  ASSERT_TRUE(planted.put_null_key_pin(tpm_, SaltKind::kEcc, {Bytes{0, 0x0b, 6, 6}, "b1"}).ok());
  for (const auto& e : fs::recursive_directory_iterator(shared)) {
    chown_to(e.path().string(), kNobody);
    ::chmod(e.path().c_str(), e.is_directory() ? 0777 : 0644);
  }
  struct Holder {
    mode_t mode;
    uid_t owner;
    const char* why;
  };
  for (const Holder& h : {Holder{0777, kNobody, "belongs to neither root nor this user"},
                          Holder{01777, kNobody, "belongs to neither root nor this user"},
                          Holder{0755, kNobody, "belongs to neither root nor this user"},
                          Holder{0777, 0, "can be written by group or others and is not sticky"},
                          Holder{0770, 0, "can be written by group or others and is not sticky"}}) {
    SCOPED_TRACE(fmt::format("{:04o} uid {}", h.mode, h.owner));
    chown_to(shared, h.owner);
    ASSERT_EQ(::chmod(shared.c_str(), h.mode), 0);
    const std::string line = fmt::format("the state directory's parent {} (owner {}, mode {:04o}) {}: refused", shared,
                                         h.owner == 0 ? "uid 0 (root)" : "uid 65534 (nobody)", h.mode, h.why);
    expect_refused(found(planted.null_key_pin(tpm_, SaltKind::kEcc)), line);
    // Even a state root that does not exist yet: not read as "nothing kept",
    // and not created there.
    FileHostState fresh(shared + "/fresh");
    expect_refused(found(fresh.bind_secret(tpm_)), line);
    expect_refused(found(fresh.kept_info(tpm_, "b1")), line);
    Status put = fresh.put_bind_secret(tpm_, BindSecret{0x01005EC0, {}, SecretBytes(Bytes(32, 1))});
    ASSERT_FALSE(put.ok());
    EXPECT_NE(put.error().message().find(line), std::string::npos) << put.error().message();
    EXPECT_FALSE(fs::exists(shared + "/fresh"));
  }
}

TEST(KernelPin, DevicePathsMapToTheirSysfsFile) {
  std::string root = temp_dir("sysfs");
  fs::create_directories(root + "/class/tpm/tpm0");
  std::ofstream(root + "/class/tpm/tpm0/null_name") << "000b" << std::string(64, 'a') << "\n";
  ::setenv("TPMSEC_SYSFS_ROOT", root.c_str(), 1);
  EXPECT_EQ(kernel_null_name_file("/dev/tpmrm0"), root + "/class/tpm/tpm0/null_name");
  EXPECT_EQ(kernel_null_name_file("/dev/tpm0"), root + "/class/tpm/tpm0/null_name");
  EXPECT_EQ(kernel_null_name_file("/dev/tpm1"), "") << "no pin exported for tpm1";
  EXPECT_EQ(kernel_null_name_file("/dev/tpmrmx"), "");
  EXPECT_EQ(kernel_null_name_file("/tmp/sock"), "");
  EXPECT_EQ(FileHostState("/state").kernel_null_name_file("/dev/tpmrm0"), root + "/class/tpm/tpm0/null_name");
  ::unsetenv("TPMSEC_SYSFS_ROOT");
  fs::remove_all(root);
}

}  // namespace
}  // namespace tpmsec
