// The kernel's other built-in IMA templates (ima-ngv2, ima-sigv2, ima-modsig,
// evm-sig) and CRLF line endings: each entry is written here by hand, its
// template data assembled byte by byte as the kernel lays it out
// (security/integrity/ima/ima_template_lib.c), hashed with OpenSSL directly,
// and compared with what tpmsec parses and what the TPM's PCR holds after
// `tpmsec replay`.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/run_command.h"
#include "tpmsec/constants.h"
#include "tpmsec/replay/ima_log.h"

namespace tpmsec {
namespace {

using ima::extend_digest;
using ima::parse_ascii_log;
using ima::parse_binary_log;
using ima::ParsedLog;
using testing::describe;
using testing::run_tpmsec;

Bytes digest_of(const EVP_MD* md, ByteView data) {
  Bytes out(EVP_MD_size(md));
  unsigned int n = 0;
  EXPECT_EQ(EVP_Digest(data.data(), data.size(), out.data(), &n, md, nullptr), 1);
  return out;
}

Bytes bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }

// One field as the template data holds it: u32 little-endian length, data.
void field(Bytes& out, const Bytes& data) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(data.size() >> (8 * i)));
  out.insert(out.end(), data.begin(), data.end());
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

struct HandEntry {
  std::string template_name;
  std::string ascii_fields;  // as ascii_runtime_measurements shows them, space-separated
  Bytes template_data;       // as the kernel hashes it
};

std::vector<HandEntry> entries() {
  Bytes file(32);
  for (int i = 0; i < 32; ++i) file[i] = static_cast<uint8_t>(0x10 + i);
  std::string file_hex;
  for (uint8_t b : file) file_hex += fmt::format("{:02x}", b);
  const Bytes name = bytes("/usr/bin/bash");
  const Bytes name_nul = cat({name, Bytes{0}});
  const Bytes sig{0x03, 0x02, 0x04, 0xaa, 0xbb};
  std::vector<HandEntry> out;

  // ima-ngv2: d-ngv2 = "ima:sha256" ':' NUL digest.
  {
    Bytes td;
    field(td, cat({bytes("ima:sha256:"), Bytes{0}, file}));
    field(td, name_nul);
    out.push_back({"ima-ngv2", "ima:sha256:" + file_hex + " /usr/bin/bash", td});
  }
  // ima-ngv2 with an fs-verity digest.
  {
    Bytes td;
    field(td, cat({bytes("verity:sha256:"), Bytes{0}, file}));
    field(td, name_nul);
    out.push_back({"ima-ngv2", "verity:sha256:" + file_hex + " /usr/bin/bash", td});
  }
  // ima-sigv2, signed.
  {
    Bytes td;
    field(td, cat({bytes("ima:sha256:"), Bytes{0}, file}));
    field(td, name_nul);
    field(td, sig);
    out.push_back({"ima-sigv2", "ima:sha256:" + file_hex + " /usr/bin/bash 030204aabb", td});
  }
  // ima-modsig with an appended signature: d-modsig and modsig filled.
  {
    Bytes td;
    field(td, cat({bytes("sha256:"), Bytes{0}, file}));
    field(td, name_nul);
    field(td, {});
    field(td, cat({bytes("sha256:"), Bytes{0}, Bytes(32, 0x77)}));
    field(td, Bytes{0x30, 0x82, 0x01});
    out.push_back(
        {"ima-modsig", "sha256:" + file_hex + " /usr/bin/bash  sha256:" + std::string(64, '7') + " 308201", td});
  }
  // ima-modsig without one: three empty fields at the end of the line.
  {
    Bytes td;
    field(td, cat({bytes("sha256:"), Bytes{0}, file}));
    field(td, name_nul);
    field(td, {});
    field(td, {});
    field(td, {});
    out.push_back({"ima-modsig", "sha256:" + file_hex + " /usr/bin/bash   ", td});
  }
  // evm-sig: evmsig, xattr names/lengths/values, uid, gid (u32) and mode (u16).
  {
    Bytes td;
    field(td, cat({bytes("sha256:"), Bytes{0}, file}));
    field(td, name_nul);
    field(td, Bytes{0x05, 0x02, 0x04});
    field(td, bytes("security.ima|security.selinux"));
    field(td, Bytes{0x05, 0x00, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00});
    field(td, Bytes{0xde, 0xad});
    field(td, Bytes{0xe8, 0x03, 0x00, 0x00});  // 1000
    field(td, Bytes{0x00, 0x00, 0x00, 0x00});  // 0
    field(td, Bytes{0xed, 0x81});              // 0100755 = 33261
    out.push_back({"evm-sig",
                   "sha256:" + file_hex +
                       " /usr/bin/bash 050204 security.ima|security.selinux 050000001c000000 dead 1000 0 33261",
                   td});
  }
  return out;
}

std::string line_of(const HandEntry& e) {
  std::string hash;
  for (uint8_t b : digest_of(EVP_sha1(), e.template_data)) hash += fmt::format("{:02x}", b);
  return "10 " + hash + " " + e.template_name + " " + e.ascii_fields;
}

TEST(ImaTemplates, EachParsesToTheKernelsTemplateData) {
  for (const HandEntry& e : entries()) {
    SCOPED_TRACE(line_of(e));
    ParsedLog log = parse_ascii_log(line_of(e) + "\n");
    ASSERT_TRUE(log.ok()) << log.problems[0].error.message();
    ASSERT_EQ(log.entries.size(), 1u);
    EXPECT_EQ(log.entries[0].template_data, e.template_data);
    EXPECT_EQ(log.entries[0].template_name, e.template_name);
    EXPECT_EQ(*extend_digest(log.entries[0], alg::kSha256), digest_of(EVP_sha256(), e.template_data));

    // The binary rendering of the same entry: PCR, SHA-1, name, data (LE).
    Bytes bin;
    for (int i = 0; i < 4; ++i) bin.push_back(i == 0 ? 10 : 0);
    Bytes sha1 = digest_of(EVP_sha1(), e.template_data);
    bin.insert(bin.end(), sha1.begin(), sha1.end());
    field(bin, bytes(e.template_name));
    field(bin, e.template_data);
    ParsedLog binary = parse_binary_log(bin);
    ASSERT_TRUE(binary.ok()) << binary.problems[0].error.message();
    ASSERT_EQ(binary.entries.size(), 1u);
    EXPECT_EQ(binary.entries[0].template_data, e.template_data);
  }
}

TEST(ImaTemplates, BadFieldsAreRejectedByName) {
  const std::string hash(40, '0');
  for (const auto& [line, what] : std::vector<std::pair<std::string, std::string>>{
           {"10 " + hash + " ima-ngv2 sha256:" + std::string(64, 'a') + " /x", "d-ngv2"},
           {"10 " + hash + " ima-ngv2 md:sha256:" + std::string(64, 'a') + " /x", "digest type"},
           {"10 " + hash + " evm-sig sha256:" + std::string(64, 'a') + " /x     4294967296 0 0", "iuid"},
           {"10 " + hash + " evm-sig sha256:" + std::string(64, 'a') + " /x     0 0 70000", "imode"}}) {
    ParsedLog log = parse_ascii_log(line + "\n");
    ASSERT_EQ(log.problems.size(), 1u) << line;
    EXPECT_NE(log.problems[0].error.message().find(what), std::string::npos) << log.problems[0].error.message();
  }
}

// A log copied through a system with CRLF line endings reads the same, and the
// TPM's PCR after replaying it is what OpenSSL computes from the hand-built data.
TEST(ImaTemplates, ReplayedWithCrlfTheTpmHoldsTheIndependentValue) {
  std::string text;
  Bytes pcr(32, 0);
  for (const HandEntry& e : entries()) {
    text += line_of(e) + "\r\n";
    pcr = digest_of(EVP_sha256(), cat({pcr, digest_of(EVP_sha256(), e.template_data)}));
  }
  const std::string path = ::testing::TempDir() + "ima-templates-crlf.txt";
  std::ofstream(path, std::ios::binary) << text;
  auto r = run_tpmsec({"replay", "--ima", path, "--strategy", "plain", "--pcr", "16"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  std::string expected;
  for (uint8_t b : pcr) expected += fmt::format("{:02x}", b);
  // The embedded TPM ends with the process: the replay's own check is what
  // compares, and it prints the value it found.
  EXPECT_NE(r.out.find(expected), std::string::npos) << r.out;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tpmsec
