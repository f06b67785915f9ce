// The command wrapper's test fixture (tpmsec/wrap.h): a caller (tpmsec's own
// Tpm, with password sessions as tpm2-tools sends them) whose every frame
// goes through a CommandWrapper onto a bus an attacker controls
// (InterposingTransport), and a Tpm beside it that the attacker cannot touch
// to see what the TPM really holds. Shared by wrap_test.cc and
// wrap_trust_test.cc.
#ifndef TPMSEC_TESTS_SUPPORT_WRAP_FIXTURE_H_
#define TPMSEC_TESTS_SUPPORT_WRAP_FIXTURE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "support/test_data.h"
#include "support/test_tpm.h"
#include "testing/transport_doubles.h"
#include "tpmsec/command_table.h"
#include "tpmsec/pcr.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/wire.h"
#include "tpmsec/wrap.h"

namespace tpmsec::testing {

constexpr uint32_t kPcr = 16;

// What the caller talks to: every frame through the wrapper onto the bus.
class WrappedTransport final : public Transport {
 public:
  WrappedTransport(CommandWrapper& wrapper, Transport& bus) : wrapper_(&wrapper), bus_(&bus) {}
  Result<Bytes> transmit(ByteView command) override { return wrapper_->exchange(*bus_, command); }
  std::string describe() const override { return "wrapped"; }

 private:
  CommandWrapper* wrapper_;
  Transport* bus_;
};

class WrapTest : public TpmTest {
 protected:
  using Rule = std::function<Result<Bytes>(ByteView command, Transport& tpm)>;

  void SetUp() override {
    TpmTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    bus_ = std::make_unique<InterposingTransport>(transport(), [this](ByteView c, Transport& inner) {
      seen_.emplace_back(c.begin(), c.end());
      auto r = rule_ ? rule_(c, inner) : inner.transmit(c);
      if (r.ok()) seen_.push_back(*r);
      return r;
    });
    ours_ = std::make_unique<Tpm>(*bus_);
    ProtectionConfig config;
    config.trust_first_use = true;  // the attacker here leaves the null key alone
    auto f = SessionFactory::create(*ours_, config);
    ASSERT_TRUE(f.ok()) << f.error().message();
    factory_ = std::move(*f);
    wrapper_ = std::make_unique<CommandWrapper>(*factory_);
    wrapped_ = std::make_unique<WrappedTransport>(*wrapper_, *bus_);
    caller_ = std::make_unique<Tpm>(*wrapped_);
    seen_.clear();
  }
  void TearDown() override {
    end_wrapper();
    factory_.reset();
    ours_.reset();
    bus_.reset();
    TpmTest::TearDown();
  }

  // The caller goes, then the wrapper (which flushes a session it still has).
  void end_wrapper() {
    caller_.reset();
    wrapped_.reset();
    wrapper_.reset();
  }

  Bytes pcr_value() {
    auto v = pcr_read(tpm(), alg::kSha256, kPcr);
    EXPECT_TRUE(v.ok()) << v.error().message();
    return v.ok() ? *v : Bytes();
  }
  // Every byte the bus carried, both ways.
  Bytes bus_bytes() const {
    Bytes all;
    for (const Bytes& b : seen_) all.insert(all.end(), b.begin(), b.end());
    return all;
  }
  const WrapCounts& counts(uint32_t code) { return wrapper_->counts().at(code); }
  // A SHA-256 hash sequence with an empty authValue, started by the caller
  // through the wrapper; its Name is the Empty Buffer.
  Result<NamedHandle> start_hash_sequence() {
    Writer sp;
    sp.u16(0);  // auth: empty
    sp.u16(alg::kSha256);
    auto started = caller_->execute(*find_command(command_code("HashSequenceStart")), {}, *sp.finish(), {});
    if (!started.ok()) return started.error();
    if (started->handles.size() != 1) return parse_error("HashSequenceStart answered no handle");
    return NamedHandle{started->handles[0], {}};
  }

  std::unique_ptr<InterposingTransport> bus_;
  Rule rule_;
  std::vector<Bytes> seen_;
  std::unique_ptr<Tpm> ours_;
  std::unique_ptr<SessionFactory> factory_;
  std::unique_ptr<CommandWrapper> wrapper_;
  std::unique_ptr<WrappedTransport> wrapped_;
  std::unique_ptr<Tpm> caller_;
};

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_WRAP_FIXTURE_H_
