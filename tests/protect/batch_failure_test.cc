// A batch (`tpmsec pcr extend 16 -`) whose third PCR_Extend fails, through
// the interposer (support/interposer.h) in front of a real swtpm: the error
// code is forged, after the TPM ran the extend or instead of it. Without
// --recover the batch stops there, naming the line, and does not retry it
// (whether it landed is unknown); with --recover it learns from an audited
// read whether it landed and carries on. Either way no digest is extended
// twice and no handle is left in the TPM; the PCR and the handles are read
// straight from swtpm.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "support/direct_tpm.h"
#include "support/interposer.h"
#include "support/log_builder.h"
#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "support/tpm_frames.h"
#include "tpmsec/commands.h"
#include "tpmsec/null_key.h"
#include "tpmsec/pcr.h"
#include "tpmsec/response_code.h"
#include "tpmsec/tpm.h"

namespace tpmsec::testing {
namespace {

constexpr int kDigests = 5;
constexpr size_t kFailingExtend = 2;  // the third PCR_Extend, from 0

std::string digest_hex(int i) { return fmt::format("{:064x}", i); }

class BatchFailure : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    swtpm_ = new SwtpmProcess();
    ASSERT_TRUE(swtpm_->start()) << swtpm_->error();
    Direct d(swtpm_->spec());
    ASSERT_TRUE(d.ok());
    cmd::CreatePrimary c;
    c.primary_handle = NamedHandle::of(rh::kNull);
    c.in_public.public_area = null_key_template(SaltKind::kEcc);
    auto rsp = d.tpm().run(c, {Auth::password()});
    ASSERT_TRUE(rsp.ok()) << rsp.error().message();
    (void)d.tpm().run(cmd::FlushContext{rsp->object_handle});
    null_name_ = new std::string(to_hex(rsp->name.bytes));
  }
  static void TearDownTestSuite() {
    delete swtpm_;  // stops swtpm by PID
    swtpm_ = nullptr;
    delete null_name_;
    null_name_ = nullptr;
  }

 protected:
  void SetUp() override {
    ASSERT_NE(null_name_, nullptr);
    proxy_ = std::make_unique<Interposer>(swtpm_->port());
    ASSERT_TRUE(proxy_->start().ok());
    state_ = ::testing::TempDir() + "batch-failure-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(state_);
  }
  void TearDown() override {
    if (proxy_) proxy_->stop();
    std::filesystem::remove_all(state_);
  }

  // The batch of digests 1..kDigests through the interposer.
  CommandResult batch(std::vector<std::string> extra) {
    std::string input = "# three digests, then the failing one's neighbours\n";
    for (int i = 1; i <= kDigests; ++i) input += digest_hex(i) + "\n";
    std::vector<std::string> args{"pcr", "extend", "16", "-", "--tpm", proxy_->spec(), "--null-name", *null_name_};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = run_tpmsec(args, {"TPMSEC_STATE_DIR=" + state_}, &input);
    proxy_->wait_idle();
    return r;
  }

  // Resets PCR 16, straight on swtpm; pcr() reads it from there.
  void reset_pcr() {
    Direct d(swtpm_->spec());
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(pcr_reset(d.tpm(), 16).ok());
  }
  std::string pcr() {
    Direct d(swtpm_->spec());
    if (!d.ok()) return "";
    auto rsp = d.tpm().run(cmd::PcrRead{PcrSelectionList{{PcrSelection::single(alg::kSha256, 16)}}});
    EXPECT_TRUE(rsp.ok()) << rsp.error().message();
    if (!rsp.ok() || rsp->pcr_values.digests.size() != 1) return "";
    return to_hex(rsp->pcr_values.digests[0]);
  }
  // Fails when anything is left loaded (or saved), then flushes it.
  void expect_no_handles(const std::string& what) {
    Direct d(swtpm_->spec());
    if (!d.ok()) return;
    std::vector<uint32_t> left = list_handles(d.tpm());
    EXPECT_TRUE(left.empty()) << what << ": left in the TPM: " << fmt::format("{:#010x}", fmt::join(left, " "));
    for (uint32_t h : left) (void)d.tpm().run(cmd::FlushContext{h});
  }

  // Answers the kFailingExtend-th PCR_Extend with `code`, after the TPM ran
  // it (`executed`) or without sending it; passes everything else.
  void fail_third_extend(uint32_t code, bool executed) {
    auto extends = std::make_shared<size_t>(0);
    proxy_->set_rule([code, executed, extends](const ProxiedCommand& c, Upstream& tpm) -> Reply {
      if (c.code != cc::kPcrExtend || (*extends)++ != kFailingExtend) return pass(c, tpm);
      if (executed) {
        Reply r = pass(c, tpm);
        if (!r.response) return r;
      }
      ResponseFrame error;
      error.code = code;
      return Reply::answer(build_response(error));
    });
  }

  static std::string chained(int last) {
    std::string value(64, '0');
    for (int i = 1; i <= last; ++i) value = extended_hex(value, *from_hex(digest_hex(i)));
    return value;
  }

  static SwtpmProcess* swtpm_;
  static std::string* null_name_;
  std::unique_ptr<Interposer> proxy_;
  std::string state_;
};

SwtpmProcess* BatchFailure::swtpm_ = nullptr;
std::string* BatchFailure::null_name_ = nullptr;

const std::vector<std::string> kPreventing = {"", "per-command", "saved-context", "resident"};

std::vector<std::string> strategy_args(const std::string& strategy) {
  if (strategy.empty()) return {};
  return {"--strategy", strategy};
}

// A batch that succeeds leaves nothing in the TPM: the last extend ended the
// session (resident, saved-context) and nothing was flushed twice.
TEST_F(BatchFailure, ABatchLeavesNoHandle) {
  for (const std::string& strategy : kPreventing) {
    for (bool recover : {false, true}) {
      SCOPED_TRACE(fmt::format("{}{}", strategy.empty() ? "policy default" : strategy, recover ? " --recover" : ""));
      ASSERT_NO_FATAL_FAILURE(reset_pcr());
      auto args = strategy_args(strategy);
      if (recover) args.push_back("--recover");
      auto r = batch(args);
      EXPECT_EQ(r.exit_code, 0) << describe(r);
      EXPECT_EQ(pcr(), chained(kDigests));
      expect_no_handles("a batch");
    }
  }
}

// The third extend fails with an error code the interposer forged, after the
// TPM ran it or instead: the batch stops at its line (line 4: a comment comes
// first), exit 1, "not retried", and the PCR holds digests 1-2, plus 3 when
// the TPM ran it. Nothing after it is extended, nothing twice.
TEST_F(BatchFailure, AnUnknownOutcomeStopsTheBatchAtItsLine) {
  for (uint32_t code : {rc::kFailure, rc::kRetry}) {
    for (bool executed : {true, false}) {
      for (const std::string& strategy : kPreventing) {
        SCOPED_TRACE(fmt::format("0x{:x} {} the TPM ran it, {}", code, executed ? "after" : "before",
                                 strategy.empty() ? "policy default" : strategy));
        ASSERT_NO_FATAL_FAILURE(reset_pcr());
        fail_third_extend(code, executed);
        auto r = batch(strategy_args(strategy));
        EXPECT_EQ(r.exit_code, 1) << describe(r);
        EXPECT_NE(r.err.find("standard input line 4 (lines 2-3 were extended, nothing after it): PCR 16 extend "
                             "(not retried: whether it landed is unknown"),
                  std::string::npos)
            << r.err;
        EXPECT_EQ(pcr(), chained(executed ? 3 : 2)) << describe(r);
        expect_no_handles("a stopped batch");
      }
    }
  }
}

// With --recover the same failures are recovered: the stream learns from an
// audited read whether the extend landed, and every digest is in the PCR once.
TEST_F(BatchFailure, RecoverCarriesOnWithEveryDigestOnce) {
  for (uint32_t code : {rc::kFailure, rc::kRetry}) {
    for (bool executed : {true, false}) {
      for (const std::string& strategy : kPreventing) {
        SCOPED_TRACE(fmt::format("0x{:x} {} the TPM ran it, {}", code, executed ? "after" : "before",
                                 strategy.empty() ? "policy default" : strategy));
        ASSERT_NO_FATAL_FAILURE(reset_pcr());
        fail_third_extend(code, executed);
        auto args = strategy_args(strategy);
        args.push_back("--recover");
        auto r = batch(args);
        EXPECT_EQ(r.exit_code, 0) << describe(r);
        EXPECT_EQ(pcr(), chained(kDigests)) << describe(r);
        expect_no_handles("a recovered batch");
      }
    }
  }
}

// The last digest's extend fails: it ended the session when the TPM ran it
// (no continueSession), and the session is retired either way.
TEST_F(BatchFailure, AFailedLastExtendLeavesNoHandle) {
  for (bool executed : {true, false}) {
    for (const std::string& strategy : kPreventing) {
      SCOPED_TRACE(fmt::format("{} the TPM ran it, {}", executed ? "after" : "before",
                               strategy.empty() ? "policy default" : strategy));
      ASSERT_NO_FATAL_FAILURE(reset_pcr());
      auto extends = std::make_shared<size_t>(0);
      proxy_->set_rule([executed, extends](const ProxiedCommand& c, Upstream& tpm) -> Reply {
        if (c.code != cc::kPcrExtend || (*extends)++ != kDigests - 1) return pass(c, tpm);
        if (executed && !pass(c, tpm).response) return Reply::close();
        ResponseFrame error;
        error.code = rc::kFailure;
        return Reply::answer(build_response(error));
      });
      auto r = batch(strategy_args(strategy));
      EXPECT_EQ(r.exit_code, 1) << describe(r);
      EXPECT_NE(r.err.find("standard input line 6 (lines 2-5 were extended"), std::string::npos) << r.err;
      EXPECT_EQ(pcr(), chained(executed ? kDigests : kDigests - 1)) << describe(r);
      expect_no_handles("a failed last extend");
    }
  }
}

}  // namespace
}  // namespace tpmsec::testing

namespace tpmsec::testing {
namespace {

// The audit: the interposer withholds the second PCR_Extend (answering an
// error), keeps its session alive (every FlushContext of it is answered
// success and not sent), and renames the next new session on the bus, the
// audit session tpmsec starts to learn whether the extend landed, to the
// withheld session's handle (no HMAC covers a session handle), translating
// that name back on the way to the TPM. If tpmsec took the name as proof
// that the old session is gone, it would retry, and the withheld command,
// replayed later, would land the digest a second time.
struct RenamedAuditSession {
  size_t extends = 0;
  std::optional<Bytes> withheld;
  uint32_t victim = 0;   // the withheld command's session
  uint32_t renamed = 0;  // the real handle of the session renamed to `victim`
  int flushes_dropped = 0;
};

Reply rename_audit_session(RenamedAuditSession& a, const ProxiedCommand& c, Upstream& tpm) {
  if (c.code == cc::kPcrExtend && a.extends++ == 1) {
    auto f = parse_command(c.bytes);
    if (!f.ok() || f->sessions.empty()) return Reply::close();
    a.withheld = c.bytes;
    a.victim = f->sessions[0].handle;
    ResponseFrame error;
    error.code = rc::kFailure;
    return Reply::answer(build_response(error));
  }
  if (!a.withheld) return pass(c, tpm);
  if (c.code == cc::kFlushContext && c.bytes.size() == 14 && load_be32(c.bytes.data() + 10) == a.victim) {
    ++a.flushes_dropped;
    ResponseFrame ok;
    ok.code = rc::kSuccess;
    return Reply::answer(build_response(ok));
  }
  if (c.code == cc::kStartAuthSession && a.renamed == 0) {
    Reply r = pass(c, tpm);
    if (!r.response) return r;
    auto f = parse_response(*r.response, c.code);
    if (!f.ok() || f->code != rc::kSuccess || f->handles.size() != 1) return r;
    a.renamed = f->handles[0];
    f->handles[0] = a.victim;
    r.response = build_response(*f);
    return r;
  }
  if (a.renamed == 0) return pass(c, tpm);
  // The renamed session's commands reach the TPM under its real handle.
  auto f = parse_command(c.bytes);
  if (!f.ok()) return pass(c, tpm);
  bool changed = false;
  for (SessionEntry& s : f->sessions) {
    if (s.handle == a.victim) {
      s.handle = a.renamed;
      changed = true;
    }
  }
  if (!changed) return pass(c, tpm);
  ProxiedCommand rewritten = c;
  rewritten.bytes = build_command(*f);
  return pass(rewritten, tpm);
}

TEST_F(BatchFailure, ARenamedAuditSessionNeverAppliesADigestTwice) {
  std::vector<std::string> prefixes;  // the PCR after digests 1..k, k = 0..kDigests
  for (int k = 0; k <= kDigests; ++k) prefixes.push_back(chained(k));
  for (const std::string& strategy : kPreventing) {
    SCOPED_TRACE(strategy.empty() ? "policy default" : strategy);
    ASSERT_NO_FATAL_FAILURE(reset_pcr());
    auto attack = std::make_shared<RenamedAuditSession>();
    proxy_->set_rule(
        [attack](const ProxiedCommand& c, Upstream& tpm) { return rename_audit_session(*attack, c, tpm); });
    auto args = strategy_args(strategy);
    args.push_back("--recover");
    auto r = batch(args);
    proxy_->set_rule(nullptr);
    ASSERT_TRUE(attack->withheld.has_value()) << describe(r);
    EXPECT_NE(attack->renamed, 0u) << "the attack renamed no session; " << describe(r);
    // The interposer replays the withheld command, straight to the TPM.
    {
      Direct d(swtpm_->spec());
      ASSERT_TRUE(d.ok());
      (void)d.tpm().transport().transmit(*attack->withheld);
    }
    const std::string after = pcr();
    auto k = std::find(prefixes.begin(), prefixes.end(), after);
    EXPECT_NE(k, prefixes.end()) << "PCR 16 holds " << after << ": not digests 1..k once each; " << describe(r);
    if (r.exit_code == 0) {
      EXPECT_EQ(after, chained(kDigests)) << describe(r);
    } else {
      EXPECT_TRUE(r.exit_code == 1 || r.exit_code == 3) << describe(r);
      EXPECT_NE(r.err.find("still in the TPM"), std::string::npos) << describe(r);
    }
    // The withheld command's session may be left alive by the interposer: flush whatever is left.
    Direct d(swtpm_->spec());
    ASSERT_TRUE(d.ok());
    for (uint32_t h : list_handles(d.tpm())) (void)d.tpm().run(cmd::FlushContext{h});
  }
}

}  // namespace
}  // namespace tpmsec::testing
