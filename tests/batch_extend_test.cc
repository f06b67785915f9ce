// `tpmsec pcr extend INDEX -`: digests from standard input through one stream.
#include <gtest/gtest.h>

#include <cstdlib>
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
  };
  // Set-up: 4 GetCapability, null key, session, audited reads at open and finish, flushes.
  for (const Case& c : {Case{{"--strategy", "resident"}, kDigests + 20},
                        Case{{"--strategy", "checkpoint", "--checkpoint-every", "0"}, kDigests + 20},
                        Case{{"--strategy", "checkpoint", "--checkpoint-every", "50"}, kDigests + 24},
                        Case{{"--strategy", "plain"}, kDigests + 8}}) {
    SCOPED_TRACE(c.args[1]);
    std::vector<std::string> args{"pcr", "extend", "16", "-", "--emulate", "slb9670", "--read-back"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = run_tpmsec(args, {}, &input);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.out, chained(1, kDigests) + "\n");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.err, m, std::regex("emulated slb9670: ([0-9]+) TPM commands"))) << r.err;
    int commands = std::stoi(m[1]);
    EXPECT_GE(commands, kDigests);
    EXPECT_LE(commands, c.max_commands) << r.err;
    EXPECT_NE(r.err.find("ms of TPM time per extend on the emulated slb9670"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace tpmsec
