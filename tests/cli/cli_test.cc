// The command line as a user meets it: outputs, one-line errors, exit codes.
#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "tpmsec/bytes.h"
#include "tpmsec/pcr.h"

namespace tpmsec {
namespace {

using testing::run_command;
using testing::run_tpmsec;

const std::string kDigest(64, 'a');

// Exactly one line on stderr, starting "tpmsec: ".
void expect_one_line_error(const testing::CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.err.rfind("tpmsec: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

// `tpmsec --tpm embedded info`: CLI11 only says the arguments were not
// expected; the line also says where options go.
TEST(Cli, OptionsBeforeTheCommandAreSaidToGoAfterIt) {
  auto r = run_tpmsec({"--tpm", "embedded", "info"});
  EXPECT_EQ(r.exit_code, testing::kExitUsage);
  expect_one_line_error(r, "options go after the command: tpmsec info --tpm");
}

// A file the CLI cannot read: the line says why (here: another user's 0600
// file, read as nobody).
TEST(Cli, AFileItCannotReadIsRefusedWithTheReason) {
  std::string dir = ::testing::TempDir() + "tpmsec-cli-unreadable-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all | std::filesystem::perms::group_exec |
                                        std::filesystem::perms::others_exec);
  std::string file = dir + "/bench.json";
  std::ofstream(file) << "{}";
  std::filesystem::permissions(file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto r = run_command(
      {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", TPMSEC_CLI_PATH, "compare", file, file});
  // A latency profile is an input file too: the same exit and reason.
  auto profile = run_command(
      {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", TPMSEC_CLI_PATH, "profiles", "show", file});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.exit_code, testing::kExitUsage) << testing::describe(r);
  expect_one_line_error(r, "cannot read " + file + ": Permission denied");
  EXPECT_EQ(profile.exit_code, testing::kExitUsage) << testing::describe(profile);
  EXPECT_NE(profile.err.find("cannot read " + file + ": Permission denied"), std::string::npos) << profile.err;
}

TEST(Cli, InfoOnEmbeddedShowsIbm) {
  auto r = run_tpmsec({"info"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("0x49424D00 \"IBM\""), std::string::npos) << r.out;
}

TEST(Cli, InfoJsonHasDocumentedKeys) {
  auto r = run_tpmsec({"info", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"manufacturer", "manufacturer_raw", "vendor", "vendor_strings", "firmware_version", "spec",
                          "pcr_banks", "ecc_p256", "rsa_2048", "max_loaded_sessions", "max_transient_objects"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["manufacturer"], "IBM");
  EXPECT_EQ(j["manufacturer_raw"], "0x49424D00");
  EXPECT_EQ(j["vendor"], "SW   TPM");
  EXPECT_EQ(j["vendor_strings"].size(), 4u);
}

TEST(Cli, ExtendReadBackPrintsTheChainedValue) {
  auto r = run_tpmsec({"pcr", "extend", "16", kDigest, "--read-back"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Bytes in(32, 0);
  Bytes d = *from_hex(kDigest);
  in.insert(in.end(), d.begin(), d.end());
  Bytes out(32);
  SHA256(in.data(), in.size(), out.data());
  EXPECT_EQ(r.out, to_hex(out) + "\n");
}

TEST(Cli, StateDirectoryKeepsTheTpmAcrossProcesses) {
  char tmpl[] = "/tmp/tpmsec-cli-state-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string tpm = std::string("embedded:state=") + tmpl;
  // PCR 8 is preserved by an orderly Shutdown(STATE); PCR 16 is not (PC Client).
  ASSERT_EQ(run_tpmsec({"pcr", "extend", "8", kDigest, "--tpm", tpm}).exit_code, 0);
  auto r = run_tpmsec({"pcr", "read", "8", "--tpm", tpm});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out, std::string(64, '0') + "\n");
  auto again = run_tpmsec({"pcr", "read", "8"});  // a fresh embedded TPM
  EXPECT_EQ(again.out, std::string(64, '0') + "\n");
  std::system((std::string("rm -rf ") + tmpl).c_str());
}

// The issue-31 attack as a user meets it: root's TPMSEC_STATE_DIR in a 0777
// directory owned by nobody, who planted the state directory and a pin in it
// (0644, theirs). Refused before any of it is used: exit 1, one line naming
// the directory and its owner; nothing written there.
TEST(Cli, AStateDirectoryAnotherUserCanSwapIsRefused) {
  ASSERT_EQ(::geteuid(), 0u) << "this test plants files owned by another uid (chown): run it as root";
  char tmpl[] = "/tmp/tpmsec-cli-planted-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string base = tmpl, shared = base + "/shared", state = shared + "/state";
  const std::string pins = state + "/null-key-pins";
  ASSERT_EQ(std::system(("mkdir -p " + pins + " && echo tpm=x > " + pins + "/planted && chmod 0777 " + shared + " " +
                         state + " " + pins + " && chmod 0644 " + pins + "/planted && chown -R 65534:65534 " + shared)
                            .c_str()),
            0);
  auto listing = [&] { return run_command({"ls", "-lnR", shared}).out; };
  const std::string before = listing();
  // A TPM whose state outlives the process: what is kept for it is read.
  auto r =
      run_tpmsec({"pcr", "extend", "16", kDigest, "--tpm", "embedded:state=" + base}, {"TPMSEC_STATE_DIR=" + state});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  expect_one_line_error(r, "tpmsec: the state directory's parent " + shared +
                               " (owner uid 65534 (nobody), mode 0777) belongs to neither root nor this user: refused");
  EXPECT_EQ(listing(), before);
  // The same command with the state directory in root's own directory runs.
  auto ok = run_tpmsec({"pcr", "extend", "16", kDigest, "--tpm", "embedded:state=" + base},
                       {"TPMSEC_STATE_DIR=" + base + "/kept"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  std::system(("rm -rf " + base).c_str());
}

TEST(Cli, TpmEnvironmentVariableSelectsTransport) {
  auto r = run_tpmsec({"info"}, {"TPMSEC_TPM=bogus:x"});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_line_error(r, "unknown TPM transport 'bogus'");
}

struct ErrorCase {
  std::vector<std::string> args;
  int exit_code;
  std::string message;
};

class CliErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(CliErrors, OneLineAndExitCode) {
  auto r = run_tpmsec(GetParam().args);
  EXPECT_EQ(r.exit_code, GetParam().exit_code) << r.err;
  expect_one_line_error(r, GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliErrors,
    ::testing::Values(
        ErrorCase{{"pcr", "read", "24"}, 2, "tpmsec: PCR 24 does not exist (this TPM has 24 PCRs)"},
        ErrorCase{
            {"pcr", "extend", "16", std::string(62, 'a')}, 2, "tpmsec: digest must be 32 bytes for sha256, got 31"},
        ErrorCase{{"pcr", "extend", "16", "xyz1"}, 2, "invalid hex digit"},
        ErrorCase{{"pcr", "read", "sixteen"}, 2, "PCR index must be a decimal number"},
        ErrorCase{{"pcr", "read", "16", "--bank", "md5"}, 2, "unknown PCR bank 'md5'"},
        ErrorCase{{"pcr", "read", "16", "--tpm", "nope"}, 2, "unknown TPM transport 'nope'"},
        ErrorCase{{"pcr", "read", "16", "--tpm", "swtpm:host=127.0.0.1,port=99999"}, 2, "port=99999 is outside"},
        ErrorCase{{"pcr", "read", "16", "--tpm", "swtpm:colour=blue"}, 2, "unknown option 'colour'"},
        ErrorCase{{"pcr", "read", "16", "--tpm", "swtpm:host"}, 2, "malformed option 'host'"},
        ErrorCase{{"info", "--tpm", "swtpm:host=127.0.0.1,port=1"},
                  1,
                  "tpmsec: cannot connect to swtpm at 127.0.0.1:1: Connection refused"},
        ErrorCase{{"info", "--tpm", "device:/nonexistent/tpm0"}, 1, "cannot open /nonexistent/tpm0"},
        ErrorCase{{"pcr", "reset", "0"},
                  1,
                  "tpmsec: PCR 0 cannot be reset from locality 0 (TPM_RC_LOCALITY): on PC Client TPMs only PCRs 16 "
                  "and 23 can"},
        ErrorCase{{"frobnicate"}, 2, "unknown command 'frobnicate'"},
        // No argument at all: a usage error, never a read past argv's end.
        ErrorCase{{}, 2, "A subcommand is required"}, ErrorCase{{"info", "--colour"}, 2, "--colour"},
        ErrorCase{{"info", "--tpm", "embedded:state=/nonexistent/dir"},
                  2,
                  "embedded TPM state /nonexistent/dir: directory /nonexistent does not exist"},
        ErrorCase{{"bench", "--pcr", "24", "--force-pcr"}, 2, "tpmsec: PCR 24 does not exist (this TPM has 24 PCRs)"},
        ErrorCase{{"info", "--tpm", "embedded:state=/dev/null"}, 2, "embedded TPM state /dev/null: not a directory"}));

// Every command that reads an input file: a missing file and a garbage file
// are unusable input (exit 2, one line naming the file), never a runtime error.
std::string garbage_file() {
  static const std::string path = [] {
    std::string p = ::testing::TempDir() + "tpmsec-cli-garbage.txt";
    std::FILE* f = std::fopen(p.c_str(), "wb");
    std::fputs("\x01\x02 this is [[ not { any format \xff\xfe\n", f);
    std::fclose(f);
    return p;
  }();
  return path;
}

const std::string kMissing = "/nonexistent/tpmsec-input";

std::vector<std::vector<std::string>> input_file_commands(const std::string& f) {
  return {{"policy", "check", f},
          {"policy", "show", "--policy", f},
          {"profiles", "show", f + ".json"},
          {"compare", f},
          {"profile", "from-bench", f},
          {"replay", "--ima", f},
          {"replay", "--eventlog", f},
          {"predict", "--ima", f},
          {"verify", "--ima", f, "--expected", f},
          {"verify", "--eventlog", f, "--quote", f},
          {"trace", "import", f}};
}

TEST(Cli, EveryInputFileCommandRejectsAMissingFileAsUsage) {
  for (const auto& args : input_file_commands(kMissing)) {
    SCOPED_TRACE(args[0] + " " + args[1]);
    auto r = run_tpmsec(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    expect_one_line_error(r, kMissing);
  }
}

TEST(Cli, EveryInputFileCommandRejectsAGarbageFileAsUsage) {
  std::string g = garbage_file();
  std::vector<std::vector<std::string>> cmds = input_file_commands(g);
  cmds.erase(cmds.begin() + 2);  // profiles show takes NAME.json; garbage below
  std::string gj = g + ".json";
  std::system(("cp " + g + " " + gj).c_str());
  cmds.push_back({"profiles", "show", gj});
  for (const auto& args : cmds) {
    SCOPED_TRACE(args[0] + " " + args[1]);
    auto r = run_tpmsec(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("tpmsec: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// A profile the user names that is not valid JSON: unusable input (exit 2),
// one line naming the file and where the JSON breaks.
TEST(Cli, MalformedProfileIsAUsageErrorNamingFileAndPosition) {
  std::string path = ::testing::TempDir() + "tpmsec-cli-bad-profile.json";
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("{\n  \"id\": \"broken\",\n  \"commands\": [1, 2,\n}\n", f);
    std::fclose(f);
  }
  for (std::vector<std::string> args : {std::vector<std::string>{"info", "--emulate", path},
                                        std::vector<std::string>{"pcr", "extend", "16", kDigest, "--emulate", path},
                                        std::vector<std::string>{"bench", "--emulate", path, "--iterations", "2"}}) {
    SCOPED_TRACE(args[0]);
    auto r = run_tpmsec(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    expect_one_line_error(r, path + ": bad JSON at line 4");
  }
  std::remove(path.c_str());
}

// The bash completion (packaging/tpmsec.bash), run as bash runs it: the
// words so far in COMP_WORDS, the candidates in COMPREPLY.
std::vector<std::string> complete(const std::vector<std::string>& words) {
  std::string script = std::string(TPMSEC_DATA_DIR) + "/../packaging/tpmsec.bash";
  std::string cmd = "source '" + script + "'; COMP_WORDS=('" TPMSEC_CLI_PATH "'";
  for (const std::string& w : words) cmd += " '" + w + "'";
  cmd += fmt::format("); COMP_CWORD={}; _tpmsec; printf '%s\\n' \"${{COMPREPLY[@]}}\"", words.size());
  auto r = testing::run_command({"bash", "-c", cmd}, {"TPMSEC_DATA_DIR=" TPMSEC_DATA_DIR});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) out.push_back(line);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Cli, CompletionOffersProfileAndStrategyNames) {
  auto names = run_tpmsec({"profiles", "--names"});
  ASSERT_EQ(names.exit_code, 0) << names.err;
  EXPECT_NE(names.out.find("slb9670\n"), std::string::npos) << names.out;
  EXPECT_EQ(names.out.find(' '), std::string::npos) << names.out;  // names only
  using V = std::vector<std::string>;
  EXPECT_EQ(complete({"bench", "--emulate", "slb967"}), (V{"slb9670", "slb9672", "slb9673"}));
  EXPECT_EQ(complete({"emulate", "slb9670"}), (V{"slb9670"}));
  EXPECT_EQ(complete({"profiles", "show", "slb9670"}), (V{"slb9670"}));
  EXPECT_EQ(complete({"pcr", "extend", "16", "--strategy", "re"}), (V{"resident"}));
  EXPECT_EQ(complete({"bench", "--strategies", "resident,p"}), (V{"resident,per-command", "resident,plain"}));
  auto tpm = complete({"info", "--tpm", "m"});
  ASSERT_EQ(tpm.size(), 1u);
  EXPECT_EQ(tpm[0].rfind("mssim:", 0), 0u) << tpm[0];
  // Options still come from --help.
  auto options = complete({"bench", "--open"});
  EXPECT_EQ(options, (V{"--openmetrics"}));
}

// The sha1 bank extended: on a fresh embedded TPM PCR 16 goes from zeros to
// SHA-1(zeros || digest), and --read-back prints that.
TEST(Cli, Sha1BankExtend) {
  const Bytes digest(20, 0xaa);
  auto r = run_tpmsec({"pcr", "extend", "16", to_hex(digest), "--bank", "sha1", "--read-back"});
  ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  auto expected = pcr_extended_value(alg::kSha1, Bytes(20, 0), digest);
  ASSERT_TRUE(expected.ok());
  EXPECT_NE(r.out.find(to_hex(*expected)), std::string::npos) << r.out;
}

TEST(Cli, HelpOnEveryCommand) {
  for (auto args : std::vector<std::vector<std::string>>{{"--help"},
                                                         {"info", "--help"},
                                                         {"pcr", "--help"},
                                                         {"pcr", "read", "--help"},
                                                         {"pcr", "extend", "--help"},
                                                         {"pcr", "reset", "--help"},
                                                         {"policy", "--help"},
                                                         {"policy", "show", "--help"},
                                                         {"policy", "check", "--help"},
                                                         {"policy", "calibrate", "--help"},
                                                         {"policy", "derive", "--help"},
                                                         {"random", "--help"},
                                                         {"null-key", "--help"},
                                                         {"bench", "--help"},
                                                         {"profiles", "--help"},
                                                         {"replay", "--help"},
                                                         {"predict", "--help"},
                                                         {"compare", "--help"},
                                                         {"trace", "--help"},
                                                         {"trace", "import", "--help"},
                                                         {"profile", "from-bench", "--help"}}) {
    auto r = run_tpmsec(args);
    EXPECT_EQ(r.exit_code, 0) << args[0];
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << r.out;
  }
}

// serve applies the TPM string's policy= (it is not named as ignored) and
// holds --policy to the rule every command follows: both given and unlike
// is one usage line naming both, before anything is served or opened.
TEST(Cli, ServeHoldsPolicyAndItsItemToTheOneRule) {
  auto r = run_tpmsec({"serve", "--allow-root", "--dbus", "none", "--socket", "/nonexistent/tpmsec.sock", "--tpm",
                       "embedded,policy=/nonexistent/a.toml", "--policy", "/nonexistent/b.toml"});
  EXPECT_EQ(r.exit_code, testing::kExitUsage) << r.err;
  EXPECT_NE(r.err.find("--policy /nonexistent/b.toml and --tpm's policy=/nonexistent/a.toml disagree"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("ignores policy="), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(Cli, SwtpmInfoJsonReportsIbm) {
  testing::SwtpmProcess swtpm;
  if (!swtpm.start()) GTEST_SKIP() << swtpm.error();
  auto r = run_tpmsec({"info", "--json", "--tpm", swtpm.tcti()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["manufacturer"], "IBM");
}

}  // namespace
}  // namespace tpmsec
