// The fault-injecting transport decorator on a scripted inner transport.
#include "support/fault_injection.h"

#include <gtest/gtest.h>

#include "tpmsec/constants.h"
#include "tpmsec/response_code.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

// Answers every command with a fixed response and records what it received.
class ScriptedTransport final : public Transport {
 public:
  Result<Bytes> transmit(ByteView command) override {
    received.emplace_back(command.begin(), command.end());
    if (fail) return runtime_error("inner failure");
    return response;
  }
  Status reset_tpm() override {
    ++resets;
    return ok_status();
  }
  std::string describe() const override { return "scripted"; }

  std::vector<Bytes> received;
  Bytes response = {0x80, 0x01, 0, 0, 0, 14, 0, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd};
  bool fail = false;
  int resets = 0;
};

const Bytes kCommand = {0x80, 0x01, 0, 0, 0, 12, 0, 0, 0x01, 0x7b, 0x00, 0x20};  // GetRandom(32)

TEST(FaultInjectionTest, TransparentWithoutHookAndDescribesItself) {
  ScriptedTransport inner;
  FaultInjectingTransport t(inner);
  auto r = t.transmit(kCommand);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, inner.response);
  EXPECT_EQ(inner.received.at(0), kCommand);
  EXPECT_EQ(t.describe(), "scripted+faults");
  EXPECT_EQ(t.last_tpm_response_code(), std::optional<uint32_t>(0));
  ASSERT_TRUE(t.reset_tpm().ok());
  EXPECT_EQ(inner.resets, 1);
  EXPECT_EQ(t.counters().commands, 1u);
  EXPECT_EQ(t.counters().faulted, 0u);
}

TEST(FaultInjectionTest, HookSeesIndexCodeAndBytes) {
  ScriptedTransport inner;
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
  EXPECT_EQ(command_code_of(ByteView(kCommand).first(9)), 0u);
}

TEST(FaultInjectionTest, MutatesCommandAndResponse) {
  ScriptedTransport inner;
  FaultInjectingTransport t(inner, [](size_t, uint32_t, ByteView) {
    Fault f = Fault::flip_command(11, 0xff);
    f.response_flips = {{10, 0x0f}, {99, 0x01}};  // the second is out of range: skipped
    f.truncate_response_to = 12;
    f.append_to_response = {0x42};
    return f;
  });
  auto r = t.transmit(kCommand);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(inner.received.at(0).back(), 0x20 ^ 0xff);
  EXPECT_EQ(*r, (Bytes{0x80, 0x01, 0, 0, 0, 14, 0, 0, 0, 0, 0xa5, 0xbb, 0x42}));
  EXPECT_EQ(t.counters().command_flips, 1u);
  EXPECT_EQ(t.counters().response_flips, 1u);
  EXPECT_EQ(t.counters().truncated, 1u);
  EXPECT_EQ(t.counters().appended, 1u);
  // The ground truth is the inner response, before the faults.
  EXPECT_EQ(t.last_tpm_response(), std::optional<Bytes>(inner.response));
}

TEST(FaultInjectionTest, ForgedErrorWithAndWithoutExecution) {
  ScriptedTransport inner;
  bool executed = false;
  FaultInjectingTransport t(inner, [&](size_t, uint32_t, ByteView) { return Fault::forge_error(rc::kRetry, executed); });
  auto r = t.transmit(kCommand);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, error_response(rc::kRetry));
  EXPECT_EQ(load_be32(r->data() + 6), rc::kRetry);
  EXPECT_TRUE(inner.received.empty());
  EXPECT_FALSE(t.last_tpm_response_code().has_value());

  executed = true;
  r = t.transmit(kCommand);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, error_response(rc::kRetry));
  EXPECT_EQ(inner.received.size(), 1u);
  EXPECT_EQ(t.last_tpm_response_code(), std::optional<uint32_t>(0));
  EXPECT_EQ(t.counters().forged, 2u);
  EXPECT_EQ(t.counters().executed, 1u);
}

TEST(FaultInjectionTest, FailedTransmissionWithAndWithoutExecution) {
  ScriptedTransport inner;
  bool executed = false;
  FaultInjectingTransport t(inner, [&](size_t, uint32_t, ByteView) { return Fault::fail(executed); });
  auto r = t.transmit(kCommand);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kRuntime);
  EXPECT_TRUE(inner.received.empty());
  executed = true;
  r = t.transmit(kCommand);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(inner.received.size(), 1u);
  EXPECT_EQ(t.counters().failed, 2u);
}

TEST(FaultInjectionTest, InnerFailureAndInvalidFault) {
  ScriptedTransport inner;
  inner.fail = true;
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
  EXPECT_EQ(inner.received.size(), 1u);
}

}  // namespace
}  // namespace tpmsec
