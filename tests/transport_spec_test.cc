// TPM strings (transport.h): the swtpm: option handles=private, which says
// the server flushes a connection's handles when it closes.
#include <gtest/gtest.h>

#include "support/run_command.h"
#include "tpmsec/transport.h"

namespace tpmsec {
namespace {

using testing::describe;
using testing::run_tpmsec;

TEST(TransportSpec, HandlesPrivateParses) {
  auto spec = parse_transport_spec("swtpm:host=127.0.0.1,port=2321,ctrl=2322,handles=private");
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->scheme, "swtpm");
  EXPECT_EQ(spec->options.at("handles"), "private");
  EXPECT_EQ(spec->options.at("port"), "2321");
}

TEST(TransportSpec, HandlesTakesOnlyPrivate) {
  for (const char* text : {"swtpm:host=127.0.0.1,port=2321,handles=shared", "swtpm:port=2321,handles=",
                           "swtpm:port=2321,handles=PRIVATE", "swtpm:port=2321,handles=private,handles=private"}) {
    SCOPED_TRACE(text);
    auto spec = parse_transport_spec(text);
    ASSERT_FALSE(spec.ok());
    EXPECT_EQ(spec.error().kind(), ErrorKind::kUsage);
    EXPECT_EQ(spec.error().message().find('\n'), std::string::npos) << spec.error().message();
  }
  auto shared = parse_transport_spec("swtpm:port=2321,handles=shared");
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.error().message().find("handles=private"), std::string::npos) << shared.error().message();
  // Only the swtpm: transport takes it: /dev/tpmrm0 is recognized by itself.
  for (const char* text : {"device:path=/dev/tpmrm0,handles=private", "embedded:handles=private"}) {
    SCOPED_TRACE(text);
    auto spec = parse_transport_spec(text);
    ASSERT_FALSE(spec.ok());
    EXPECT_EQ(spec.error().kind(), ErrorKind::kUsage);
  }
}

// The CLI refuses a bad value before it connects: exit 2, one line.
TEST(TransportSpec, CliRefusesABadHandlesValue) {
  auto r = run_tpmsec({"pcr", "read", "16", "--tpm", "swtpm:host=127.0.0.1,port=1,handles=shared"});
  EXPECT_EQ(r.exit_code, testing::kExitUsage) << describe(r);
  EXPECT_NE(r.err.find("handles=private"), std::string::npos) << describe(r);
  size_t lines = 0;
  for (char c : r.err) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << describe(r);
  auto help = run_tpmsec({"pcr", "read", "--help"});
  EXPECT_NE(help.out.find("handles=private"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace tpmsec
