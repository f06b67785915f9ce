// Interoperability with tpm2-tools on a shared swtpm: what tpmsec extends,
// tpm2_pcrread reads, and the value is the chain computed here independently.
#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <regex>

#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "tpmsec/bytes.h"

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
  auto ext = run_tpmsec({"pcr", "extend", "16", digest, "--tpm", swtpm.tcti()});
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

}  // namespace
}  // namespace tpmsec
