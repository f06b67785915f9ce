// Interoperability with tpm2-tools on a shared swtpm: what tpmsec extends,
// tpm2_pcrread reads, and the value is the chain computed here independently.
#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <regex>

#include "support/log_builder.h"
#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "tpmsec/bytes.h"
#include "tpmsec/constants.h"

#include <fstream>

namespace tpmsec {
namespace {

using testing::run_command;
using testing::run_tpmsec;

// Parses "  sha256:\n    16: 0xABCD..." from tpm2_pcrread.
std::string pcrread_value(const std::string& out, int pcr) {
  std::smatch m;
  std::regex re("\\b" + std::to_string(pcr) + "\\s*:\\s*0x([0-9A-Fa-f]+)");
  if (!std::regex_search(out, m, re)) return "";
  std::string v = m[1];
  for (char& c : v) c = static_cast<char>(std::tolower(c));
  return v;
}

TEST(Interop, PlainExtendMatchesTpm2Pcrread) {
  if (!testing::have_program("tpm2_pcrread")) GTEST_SKIP() << "tpm2-tools not installed";
  testing::SwtpmProcess swtpm;
  if (!swtpm.start()) GTEST_SKIP() << swtpm.error();
  const std::string tcti = "TPM2TOOLS_TCTI=" + swtpm.tcti();

  auto before = run_command({"tpm2_pcrread", "sha256:16"}, {tcti});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  Bytes old = *from_hex(pcrread_value(before.out, 16));
  ASSERT_EQ(old.size(), 32u) << before.out;

  const std::string digest = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  auto ext = run_tpmsec({"pcr", "extend", "16", digest, "--tpm", swtpm.tcti(), "--tofu"},
                        {"TPMSEC_STATE_DIR=" + ::testing::TempDir() + "/interop-extend-state"});
  ASSERT_EQ(ext.exit_code, 0) << ext.err;

  Bytes in = old;
  Bytes d = *from_hex(digest);
  in.insert(in.end(), d.begin(), d.end());
  Bytes expected(32);
  SHA256(in.data(), in.size(), expected.data());

  auto after = run_command({"tpm2_pcrread", "sha256:16"}, {tcti});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(pcrread_value(after.out, 16), to_hex(expected)) << after.out;

  // And tpmsec reads what tpm2-tools reads.
  auto ours = run_tpmsec({"pcr", "read", "16", "--tpm", swtpm.tcti()});
  EXPECT_EQ(ours.out, to_hex(expected) + "\n");
}

// An IMA log of thousands of entries replayed into swtpm's PCR 23 through a
// protected strategy: tpm2_pcrread reads the value the log implies.
TEST(Interop, ImaReplayReadsBackWithTpm2Pcrread) {
  if (!testing::have_program("tpm2_pcrread")) GTEST_SKIP() << "tpm2-tools not installed";
  testing::SwtpmProcess swtpm;
  if (!swtpm.start()) GTEST_SKIP() << swtpm.error();
  std::vector<testing::ImaRecord> records;
  const char* templates[] = {"ima-ng", "ima-sig", "ima-buf", "ima"};
  for (int i = 0; i < 3000; ++i) records.push_back(testing::sample_ima_record(templates[i % 4], i));
  std::string path = ::testing::TempDir() + "/interop-ima.bin";
  {
    Bytes log = testing::ima_binary_log(records);
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(log.data()), static_cast<std::streamsize>(log.size()));
  }
  // The test's own swtpm: its first answer is trusted (--tofu, pinned in a
  // state directory of the test's own).
  auto r =
      run_tpmsec({"replay", "--ima", path, "--pcr", "23", "--strategy", "resident", "--tpm", swtpm.tcti(), "--tofu"},
                 {"TPMSEC_STATE_DIR=" + ::testing::TempDir() + "/interop-state"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  std::string expected = to_hex(testing::ima_expected_pcr(records, alg::kSha256, 10));
  auto read = run_command({"tpm2_pcrread", "sha256:23"}, {"TPM2TOOLS_TCTI=" + swtpm.tcti()});
  ASSERT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(pcrread_value(read.out, 23), expected) << read.out;
}

}  // namespace
}  // namespace tpmsec
