// The fault-injecting transport decorator on a scripted inner transport (no TPM).
#include "support/fault_injection.h"
#include "testing/transport_doubles.h"

#include <gtest/gtest.h>

#include "tpmsec/constants.h"
#include "tpmsec/response_code.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

// What the scripted inner transport (testing/transport_doubles.h) answers.
const Bytes kResponse = {0x80, 0x01, 0, 0, 0, 14, 0, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd};

const Bytes kCommand = {0x80, 0x01, 0, 0, 0, 12, 0, 0, 0x01, 0x7b, 0x00, 0x20};  // GetRandom(32)

TEST(FaultInjectionTest, TransparentWithoutHookAndDescribesItself) {
  testing::ScriptedTransport inner;
  inner.always(kResponse);
  FaultInjectingTransport t(inner);
  auto r = t.transmit(kCommand);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, kResponse);
  EXPECT_EQ(inner.sent().at(0), kCommand);
  EXPECT_EQ(t.describe(), "scripted+faults");
  EXPECT_EQ(t.last_tpm_response_code(), std::optional<uint32_t>(0));
  ASSERT_TRUE(t.reset_tpm().ok());
  EXPECT_EQ(inner.resets(), 1u);
  EXPECT_EQ(t.counters().commands, 1u);
  EXPECT_EQ(t.counters().faulted, 0u);
}

TEST(FaultInjectionTest, HookSeesIndexCodeAndBytes) {
  testing::ScriptedTransport inner;
  inner.always(kResponse);
  std::vector<std::pair<size_t, uint32_t>> seen;
  FaultInjectingTransport t(inner, [&](size_t i, uint32_t code, ByteView command) {
    EXPECT_EQ(Bytes(command.begin(), command.end()), kCommand);
    seen.emplace_back(i, code);
    return Fault::pass();
  });
  ASSERT_TRUE(t.transmit(kCommand).ok());
  ASSERT_TRUE(t.transmit(kCommand).ok());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], std::make_pair(size_t{1}, uint32_t{0x17b}));
  EXPECT_EQ(testing::command_code_of(ByteView(kCommand).first(9)), 0u);
}

TEST(FaultInjectionTest, MutatesCommandAndResponse) {
  testing::ScriptedTransport inner;
  inner.always(kResponse);
  FaultInjectingTransport t(inner, [](size_t, uint32_t, ByteView) {
    Fault f = Fault::flip_command(11, 0xff);
    f.response_flips = {{10, 0x0f}, {99, 0x01}};  // the second is out of range: skipped
    f.truncate_response_to = 12;
    f.append_to_response = {0x42};
    return f;
  });
  auto r = t.transmit(kCommand);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(inner.sent().at(0).back(), 0x20 ^ 0xff);
  EXPECT_EQ(*r, (Bytes{0x80, 0x01, 0, 0, 0, 14, 0, 0, 0, 0, 0xa5, 0xbb, 0x42}));
  EXPECT_EQ(t.counters().command_flips, 1u);
  EXPECT_EQ(t.counters().response_flips, 1u);
  EXPECT_EQ(t.counters().truncated, 1u);
  EXPECT_EQ(t.counters().appended, 1u);
  // The ground truth is the inner response, before the faults.
  EXPECT_EQ(t.last_tpm_response(), std::optional<Bytes>(kResponse));
}

TEST(FaultInjectionTest, ForgedErrorWithAndWithoutExecution) {
  testing::ScriptedTransport inner;
  inner.always(kResponse);
  bool executed = false;
  FaultInjectingTransport t(inner,
                            [&](size_t, uint32_t, ByteView) { return Fault::forge_error(rc::kRetry, executed); });
  auto r = t.transmit(kCommand);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, error_response(rc::kRetry));
  EXPECT_EQ(load_be32(r->data() + 6), rc::kRetry);
  EXPECT_TRUE(inner.sent().empty());
  EXPECT_FALSE(t.last_tpm_response_code().has_value());

  executed = true;
  r = t.transmit(kCommand);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, error_response(rc::kRetry));
  EXPECT_EQ(inner.sent().size(), 1u);
  EXPECT_EQ(t.last_tpm_response_code(), std::optional<uint32_t>(0));
  EXPECT_EQ(t.counters().forged, 2u);
  EXPECT_EQ(t.counters().executed, 1u);
}

TEST(FaultInjectionTest, FailedTransmissionWithAndWithoutExecution) {
  testing::ScriptedTransport inner;
  inner.always(kResponse);
  bool executed = false;
  FaultInjectingTransport t(inner, [&](size_t, uint32_t, ByteView) { return Fault::fail(executed); });
  auto r = t.transmit(kCommand);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kRuntime);
  EXPECT_TRUE(inner.sent().empty());
  executed = true;
  r = t.transmit(kCommand);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(inner.sent().size(), 1u);
  EXPECT_EQ(t.counters().failed, 2u);
}

TEST(FaultInjectionTest, InnerFailureAndInvalidFault) {
  testing::ScriptedTransport inner;
  inner.respond_with([](ByteView) -> Result<Bytes> { return runtime_error("inner failure"); });
  FaultInjectingTransport t(inner, [](size_t i, uint32_t, ByteView) {
    if (i == 0) return Fault::flip_response(0, 1);
    Fault f;
    f.execute = false;  // no response to give
    return f;
  });
  auto r = t.transmit(kCommand);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "inner failure");
  r = t.transmit(kCommand);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kUsage);
  EXPECT_EQ(inner.sent().size(), 1u);
}

}  // namespace
}  // namespace tpmsec
