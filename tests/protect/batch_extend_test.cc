// `tpmsec pcr extend INDEX -`: digests from standard input through one stream.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "support/log_builder.h"
#include "support/run_command.h"
#include "tpmsec/bytes.h"

namespace tpmsec {
namespace {

using testing::describe;
using testing::run_tpmsec;

std::string digest_hex(int i) {
  std::string d(64, '0');
  std::string n = std::to_string(i);
  d.replace(64 - n.size(), n.size(), n);
  return d;
}

// The PCR value after extending digest_hex(first..last) into zeros.
std::string chained(int first, int last, std::string value = std::string(64, '0')) {
  for (int i = first; i <= last; ++i) value = testing::extended_hex(value, *from_hex(digest_hex(i)));
  return value;
}

const std::vector<std::string> kStrategies = {"per-command", "saved-context", "resident", "checkpoint", "plain"};

// Blank lines, comments, surrounding blanks and CRLF are skipped; every
// strategy extends every digest once, in order.
TEST(BatchExtend, EveryStrategyExtendsEachLineOnce) {
  std::string input = "# IMA digests\n" + digest_hex(1) + "\n\n  " + digest_hex(2) + "\t\r\n" + digest_hex(3) +
                      "\r\n# done\n" + digest_hex(4);  // no newline at the end
  for (const std::string& strategy : kStrategies) {
    SCOPED_TRACE(strategy);
    auto r = run_tpmsec({"pcr", "extend", "16", "-", "--strategy", strategy, "--read-back"}, {}, &input);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.out, chained(1, 4) + "\n");
    EXPECT_NE(r.err.find("tpmsec: extended 4 digests into PCR 16 (" + strategy + ")"), std::string::npos) << r.err;
  }
}

TEST(BatchExtend, EmptyInputExtendsNothing) {
  std::string input = "\n# nothing\n";
  auto r = run_tpmsec({"pcr", "extend", "16", "-", "--strategy", "resident", "--read-back"}, {}, &input);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, std::string(64, '0') + "\n");
  EXPECT_NE(r.err.find("extended 0 digests"), std::string::npos) << r.err;
}

// A bad line is a usage error naming its number; what came before it stays
// extended, nothing after it is. PCR 8 of a state-keeping embedded TPM
// survives the process, so another process can read what landed.
TEST(BatchExtend, ABadLineIsNamedAndNothingAfterItIsExtended) {
  struct Case {
    std::string bad;
    std::string message;
  };
  for (const Case& c : {Case{"xyzw", "invalid hex digit"}, Case{std::string(62, 'a'), "must be 32 bytes"},
                        Case{std::string(2000, 'a'), "longer than 1024 characters"}}) {
    SCOPED_TRACE(c.message);
    for (const std::string& strategy : {std::string("resident"), std::string("checkpoint")}) {
      SCOPED_TRACE(strategy);
      char dir[] = "/tmp/tpmsec-batch-XXXXXX";
      ASSERT_NE(::mkdtemp(dir), nullptr);
      std::string tpm = std::string("embedded:state=") + dir;
      std::string input = digest_hex(1) + "\n# comment\n" + digest_hex(2) + "\n" + c.bad + "\n" + digest_hex(3) + "\n";
      auto r = run_tpmsec({"pcr", "extend", "8", "-", "--tpm", tpm, "--strategy", strategy}, {}, &input);
      EXPECT_EQ(r.exit_code, testing::kExitUsage) << describe(r);
      EXPECT_NE(r.err.find("tpmsec: standard input line 4: "), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("nothing after it was extended"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("extended 2 digests"), std::string::npos) << r.err;
      auto read = run_tpmsec({"pcr", "read", "8", "--tpm", tpm});
      EXPECT_EQ(read.out, chained(1, 2) + "\n") << describe(read);
      std::system((std::string("rm -rf ") + dir).c_str());
    }
  }
}

// One stream: setup once, then the strategy's steady state per digest. On the
// emulated SLB9670, resident pays one TPM command per extend (the HMAC'd
// PCR_Extend) beyond a fixed set-up, and checkpoint one plain extend plus an
// audited read per --checkpoint-every.
TEST(BatchExtend, OneStreamPaysTheSteadyStatePerDigest) {
  constexpr int kDigests = 200;
  std::string input;
  for (int i = 1; i <= kDigests; ++i) input += digest_hex(i) + "\n";
  struct Case {
    std::vector<std::string> args;
    int max_commands;
    bool read_back = true;
  };
  // Set-up: 4 GetCapability, null key, session, checkpoint's audited reads, flushes.
  // plain is counted without --read-back: its read-back is audited, so it
  // brings a salted session (null key, StartAuthSession) and an opening
  // audited read into a stream that otherwise has no session at all
  // (EveryStrategyExtendsEachLineOnce checks plain's read-back value).
  for (const Case& c : {Case{{"--strategy", "resident"}, kDigests + 20},
                        Case{{"--strategy", "checkpoint", "--checkpoint-every", "0"}, kDigests + 20},
                        Case{{"--strategy", "checkpoint", "--checkpoint-every", "50"}, kDigests + 24},
                        Case{{"--strategy", "plain"}, kDigests + 8, false}}) {
    SCOPED_TRACE(c.args[1]);
    std::vector<std::string> args{"pcr", "extend", "16", "-", "--emulate", "slb9670"};
    if (c.read_back) args.push_back("--read-back");
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = run_tpmsec(args, {}, &input);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.out, c.read_back ? chained(1, kDigests) + "\n" : "");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.err, m, std::regex("emulated slb9670: ([0-9]+) TPM commands"))) << r.err;
    int commands = std::stoi(m[1]);
    EXPECT_GE(commands, kDigests);
    EXPECT_LE(commands, c.max_commands) << r.err;
    EXPECT_NE(r.err.find("ms of TPM time per extend on the emulated slb9670"), std::string::npos) << r.err;
  }
}

// The commands a batch sent, as -v lists them.
std::vector<std::string> commands_listed(const std::string& err) {
  std::vector<std::string> out;
  static const std::regex line(R"(tpmsec:   (\S+)\s+[0-9.]+ ms)");
  for (std::sregex_iterator it(err.begin(), err.end(), line), end; it != end; ++it) out.push_back((*it)[1]);
  return out;
}

// A state-keeping embedded TPM with the emulated SLB9670: the second run of
// a batch finds the null key kept, so what it sends is the batch's own cost.
// PCR 8 survives the process: each run extends on top of the last.
class BatchSequence : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "batch-sequence-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/tpm");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string tpm() const { return "embedded:state=" + dir_ + "/tpm"; }
  std::vector<std::string> env() const { return {"TPMSEC_STATE_DIR=" + dir_ + "/state"}; }

  // Extends digest_hex(first..last) into PCR 8 as one batch; the commands it sent.
  std::vector<std::string> batch(int first, int last, const std::vector<std::string>& extra) {
    std::string input;
    for (int i = first; i <= last; ++i) input += digest_hex(i) + "\n";
    std::vector<std::string> args{"pcr", "extend", "8", "-", "--tpm", tpm(), "--emulate", "slb9670", "-v"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_tpmsec(args, env(), &input);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    pcr_ = chained(first, last, pcr_);
    return commands_listed(r.err);
  }
  std::string pcr() {
    auto r = run_tpmsec({"pcr", "read", "8", "--tpm", tpm()}, env());
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return r.out;
  }

  std::string dir_;
  std::string pcr_ = std::string(64, '0');  // what PCR 8 must hold
};

const std::vector<std::string> kLinuxSequence = {"ContextLoad.object", "StartAuthSession.ecc", "FlushContext",
                                                 "PCR_Extend"};

std::vector<std::string> then_extends(std::vector<std::string> head, int extends) {
  head.insert(head.end(), extends, "PCR_Extend");
  return head;
}

// Issue 13: a batch's first extend costs what Linux 6.10's per-command
// extend does (4 commands), each further one the resident steady state (1):
// no opening PCR_Read, and the last extend ends the session, so no
// FlushContext follows it. --recover adds the opening audited read.
TEST_F(BatchSequence, TheFirstExtendCostsLinuxsSequenceAndNothingFollowsTheLast) {
  batch(1, 1, {});  // creates and keeps the null key
  EXPECT_EQ(batch(2, 2, {}), kLinuxSequence);
  EXPECT_EQ(batch(3, 5, {}), then_extends(kLinuxSequence, 2));
  EXPECT_EQ(batch(6, 6, {"--strategy", "resident"}), kLinuxSequence);
  EXPECT_EQ(batch(7, 9, {"--strategy", "resident"}), then_extends(kLinuxSequence, 2));
  EXPECT_EQ(batch(10, 10, {"--strategy", "saved-context"}), kLinuxSequence);
  EXPECT_EQ(batch(11, 13, {"--strategy", "saved-context"}),
            (std::vector<std::string>{"ContextLoad.object", "StartAuthSession.ecc", "FlushContext", "PCR_Extend",
                                      "ContextSave.session", "ContextLoad.session", "PCR_Extend", "ContextSave.session",
                                      "ContextLoad.session", "PCR_Extend"}));
  EXPECT_EQ(batch(14, 14, {"--strategy", "per-command"}), kLinuxSequence);
  std::vector<std::string> per_command;
  for (int i = 0; i < 3; ++i) per_command.insert(per_command.end(), kLinuxSequence.begin(), kLinuxSequence.end());
  EXPECT_EQ(batch(15, 17, {"--strategy", "per-command"}), per_command);
  std::vector<std::string> recovering{"ContextLoad.object", "StartAuthSession.ecc", "FlushContext", "PCR_Read",
                                      "PCR_Extend"};
  EXPECT_EQ(batch(18, 18, {"--recover"}), recovering);
  EXPECT_EQ(batch(19, 21, {"--recover"}), then_extends(recovering, 2));
  EXPECT_EQ(batch(22, 24, {"--recover", "--strategy", "resident"}), then_extends(recovering, 2));
  EXPECT_EQ(pcr(), pcr_ + "\n");
}

// checkpoint keeps its opening audited read (it needs the value it starts
// from) and its closing one; --recover changes nothing for it.
TEST_F(BatchSequence, CheckpointStillReadsFirstAndLast) {
  batch(1, 1, {"--strategy", "checkpoint"});
  const std::vector<std::string> expected{"ContextLoad.object", "StartAuthSession.ecc", "FlushContext", "PCR_Read",
                                          "PCR_Extend",         "PCR_Extend",           "PCR_Extend",   "PCR_Read",
                                          "FlushContext"};
  EXPECT_EQ(batch(2, 4, {"--strategy", "checkpoint"}), expected);
  EXPECT_EQ(batch(5, 7, {"--strategy", "checkpoint", "--recover"}), expected);
  EXPECT_EQ(batch(8, 10, {"--strategy", "plain"}), then_extends({}, 3));
  EXPECT_EQ(pcr(), pcr_ + "\n");
}

// A bad line learnt while reading ahead: the good line before it is still
// extended (as the last: it ends the session), nothing after it is.
TEST_F(BatchSequence, ABadLineReadAheadStillLetsTheLineBeforeItEndTheBatch) {
  batch(1, 1, {});
  std::string input = digest_hex(2) + "\n" + digest_hex(3) + "\nnot a digest\n" + digest_hex(4) + "\n";
  auto r = run_tpmsec({"pcr", "extend", "8", "-", "--tpm", tpm(), "--emulate", "slb9670", "-v"}, env(), &input);
  EXPECT_EQ(r.exit_code, testing::kExitUsage) << describe(r);
  EXPECT_NE(r.err.find("standard input line 3: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("extended 2 digests"), std::string::npos) << r.err;
  EXPECT_EQ(commands_listed(r.err), then_extends(kLinuxSequence, 1));
  EXPECT_EQ(pcr(), chained(2, 3, pcr_) + "\n");
}

TEST(BatchExtend, RecoverIsForAPreventingBatch) {
  std::string input = digest_hex(1) + "\n";
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"pcr", "extend", "16", digest_hex(1), "--recover"},
                                             {"pcr", "extend", "16", "-", "--recover", "--strategy", "plain"},
                                             {"pcr", "extend", "16", "-", "--recover", "--protect", "none"}}) {
    auto r = run_tpmsec(args, {}, &input);
    EXPECT_EQ(r.exit_code, testing::kExitUsage) << describe(r);
    EXPECT_NE(r.err.find("--recover"), std::string::npos) << r.err;
  }
  auto help = run_tpmsec({"pcr", "extend", "--help"});
  EXPECT_NE(help.out.find("--recover"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("one audited PCR_Read per batch"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace tpmsec
