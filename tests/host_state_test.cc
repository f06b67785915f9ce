// The host-state layer's file system (FileHostState, file_host_state.h, the
// tpmsec_host target): each record kept whole in its file where it always
// was, 0600 in a 0700 directory, a malformed file an error naming it and how
// to forget it, the kernel's pins found under /sys. The protect path over
// host state in memory, with no state directory, is in trust_anchor_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tpmsec/host/file_host_state.h"
#include "tpmsec/host/kernel_pin.h"

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
