// No TPM slot may leak when protected commands fail: 10,000 protected
// commands (PCR_Extend, encrypted GetRandom, audited PCR_Read; one-shot and
// resident sessions) through a fault injector that fails ~15% of the session
// setups and protected commands on a fixed pseudo-random schedule
// (transmission errors, forged error codes, corrupted commands and
// responses). Sessions are dropped on error. After every command the TPM may
// hold nothing but the resident sessions; at the end, nothing at all.
//
// FlushContext and ContextSave are never faulted here: a FlushContext whose
// forged success hides that it never ran leaves a handle nobody can find
// without listing (handle_ledger_test.cc covers the other FlushContext faults). In the first schedule,
// session setup (ContextLoad of the null key, StartAuthSession) is faulted
// only in ways that leave the TPM's state known to the client; in
// SetupResponseLostAfterExecution the TPM creates the handle and the
// response naming it is lost, and the handle ledger's sweep
// (tpmsec/handle_ledger.h) must find and flush it.
#include <openssl/sha.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

#include "support/fault_injection.h"
#include "support/test_tpm.h"
#include "testing/transport_doubles.h"
#include "tpmsec/command_table.h"
#include "tpmsec/pcr.h"
#include "tpmsec/session_factory.h"

namespace tpmsec {
namespace {

constexpr uint32_t kPcr = 16;
constexpr int kCommands = 10000;
constexpr uint32_t kFaultPercent = 15;

Bytes sha256(ByteView a, ByteView b) {
  Bytes in(a.begin(), a.end());
  in.insert(in.end(), b.begin(), b.end());
  Bytes out(32);
  SHA256(in.data(), in.size(), out.data());
  return out;
}

// splitmix64: the same schedule on every platform and standard library.
class Schedule {
 public:
  explicit Schedule(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
  uint8_t mask() { return static_cast<uint8_t>(1 + below(255)); }

 private:
  uint64_t state_;
};

// What the TPM really did, as a RecordingTransport (testing/transport_doubles.h)
// in front of it sees: the ground truth for PCR 16 (a PCR_Extend whose
// response was lost still extended).
struct Witness {
  void operator()(ByteView command, const Result<Bytes>& r) {
    if (testing::command_code_of(command) == cc::kPcrExtend && testing::succeeded(r)) {
      ++extends;
      // The digest is the last 32 bytes of a one-digest SHA-256 PCR_Extend.
      pcr = sha256(pcr, ByteView(command).last(32));
    }
  }
  Bytes pcr = Bytes(32, 0);
  size_t extends = 0;
};

enum class Kind { kExtendOneShot, kRandomOneShot, kReadResident, kExtendResident };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kExtendOneShot:
      return "PCR_Extend one-shot";
    case Kind::kRandomOneShot:
      return "GetRandom(encrypt) one-shot";
    case Kind::kReadResident:
      return "PCR_Read(audit) resident";
    case Kind::kExtendResident:
      return "PCR_Extend resident";
  }
  return "?";
}

bool is_protected(uint32_t code) { return code == cc::kPcrExtend || code == cc::kGetRandom || code == cc::kPcrRead; }
bool is_setup(uint32_t code) { return code == cc::kContextLoad || code == cc::kStartAuthSession; }

struct PickedFault {
  Fault fault;
  std::string label;
};

// A fault for a protected command: anything an interposer or a broken bus can do.
PickedFault pick_command_fault(Schedule& s, size_t command_size) {
  uint32_t r = s.below(100);
  bool executed = s.below(2) == 1;
  std::string when = executed ? "after execution" : "not sent";
  if (r < 30) return {Fault::fail(executed), "transmission error " + when};
  if (r < 58) return {Fault::forge_error(rc::kFailure, executed), "forged TPM_RC_FAILURE " + when};
  if (r < 60) return {Fault::forge_error(rc::kRetry, executed), "forged TPM_RC_RETRY " + when};
  if (r < 78) {
    size_t pos = s.below(83);  // the shortest response (PCR_Extend) is 83 bytes
    return {Fault::flip_response(pos, s.mask()), fmt::format("response byte {} flipped", pos)};
  }
  if (r < 88) {
    size_t n = s.below(83);
    return {Fault::truncate_response(n), fmt::format("response truncated to {}", n)};
  }
  if (r < 93) return {Fault::append_response(Bytes(1 + s.below(8), 0)), "response extended"};
  size_t pos = s.below(static_cast<uint32_t>(command_size));
  return {Fault::flip_command(pos, s.mask()), fmt::format("command byte {} flipped", pos)};
}

// A fault for a session setup command that leaves the TPM's state known to
// the client; with `lost_after_execution`, also the ones that do not.
PickedFault pick_setup_fault(Schedule& s, size_t command_size, bool lost_after_execution) {
  if (lost_after_execution) {
    uint32_t r = s.below(4);
    if (r == 0) return {Fault::fail(true), "transmission error after execution"};
    if (r == 1) return {Fault::forge_error(rc::kFailure, true), "forged TPM_RC_FAILURE after execution"};
    if (r == 2) {
      size_t n = 10 + s.below(10);
      return {Fault::truncate_response(n), fmt::format("response truncated to {}", n)};
    }
    return {Fault::append_response({0}), "response extended"};
  }
  uint32_t r = s.below(100);
  if (r < 35) return {Fault::fail(false), "transmission error not sent"};
  if (r < 70) return {Fault::forge_error(rc::kFailure, false), "forged TPM_RC_FAILURE not sent"};
  if (r < 72) return {Fault::forge_error(rc::kRetry, false), "forged TPM_RC_RETRY not sent"};
  size_t pos = s.below(static_cast<uint32_t>(command_size));
  return {Fault::flip_command(pos, s.mask()), fmt::format("command byte {} flipped", pos)};
}

class LeakTest : public testing::TpmTest {
 protected:
  void SetUp() override {
    TpmTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    witness_ = std::make_unique<testing::RecordingTransport>(
        transport(), [this](ByteView c, const Result<Bytes>& r) { seen_(c, r); });
    faults_ = std::make_unique<FaultInjectingTransport>(*witness_);
    faulty_tpm_ = std::make_unique<Tpm>(*faults_);
    ProtectionConfig config;
    config.trust_first_use = true;  // behind an interposer: the test accepts the first null key
    auto f = SessionFactory::create(*faulty_tpm_, config);
    ASSERT_TRUE(f.ok()) << f.error().message();
    factory_ = std::move(*f);
  }
  void TearDown() override {
    factory_.reset();
    faulty_tpm_.reset();
    faults_.reset();
    witness_.reset();
    TpmTest::TearDown();
  }

  // Loaded sessions (HMAC and policy) and transient objects.
  std::vector<uint32_t> loaded_handles() {
    std::vector<uint32_t> out;
    for (uint32_t first : {ht::kFirstHmacSession, ht::kFirstPolicySession, ht::kFirstTransient}) {
      auto r = tpm().run(cmd::GetCapability{cap::kHandles, first, 64});
      EXPECT_TRUE(r.ok()) << r.error().message();
      if (!r.ok()) continue;
      for (uint32_t h : r->capability_data.handles) {
        if ((h >> 24) == (first >> 24)) out.push_back(h);
      }
    }
    return out;
  }

  // TPM_PT_HR_LOADED and TPM_PT_HR_ACTIVE.
  std::map<uint32_t, uint32_t> session_counts() {
    std::map<uint32_t, uint32_t> out;
    auto r = tpm().run(cmd::GetCapability{cap::kTpmProperties, pt::kHrLoaded, 3});
    EXPECT_TRUE(r.ok()) << r.error().message();
    if (r.ok()) {
      for (const auto& p : r->capability_data.properties) out[p.property] = p.value;
    }
    return out;
  }

 public:
  struct Report {
    std::map<std::string, size_t> outcomes;      // kind -> "ok"/"error kind"
    std::map<std::string, size_t> faults;        // fault label class -> count
    std::map<std::string, size_t> ok_despite;    // faults after which the command still succeeded
    std::map<std::string, size_t> leaked_after;  // faults of the commands that leaked a handle
    size_t leaks = 0;
    std::string first_leak;
  };

 protected:
  Report run_schedule(uint64_t seed, int commands, bool setup_lost_after_execution) {
    Report report;
    Schedule schedule(seed);
    std::vector<std::string> faults_this_command;
    bool faulting = false;
    faults_->set_hook([&](size_t, uint32_t code, ByteView command) -> Fault {
      if (!faulting || !(is_protected(code) || is_setup(code))) return Fault::pass();
      if (schedule.below(100) >= kFaultPercent) return Fault::pass();
      PickedFault p = is_protected(code) ? pick_command_fault(schedule, command.size())
                                         : pick_setup_fault(schedule, command.size(), setup_lost_after_execution);
      std::string label = fmt::format("{:03x}: {}", code, p.label);
      faults_this_command.push_back(label);
      std::string kind = p.label.substr(0, p.label.find_first_of("0123456789"));
      report.faults[fmt::format("{:03x} {}", code, kind)]++;
      return p.fault;
    });

    std::unique_ptr<HmacSession> resident_read, resident_extend;
    for (int i = 0; i < commands; ++i) {
      Kind kind = static_cast<Kind>(schedule.below(4));
      faults_this_command.clear();
      faulting = true;
      Status st;
      Bytes digest = sha256(be32(static_cast<uint32_t>(i)), as_bytes("leak"));
      switch (kind) {
        case Kind::kExtendOneShot: {
          auto s = factory_->start(0);
          if (!s.ok()) {
            st = s.error();
            break;
          }
          st = pcr_extend(*faulty_tpm_, alg::kSha256, kPcr, digest, Auth{s->get(), {}});
          break;  // the session is dropped here: flushed unless the TPM ended it
        }
        case Kind::kRandomOneShot: {
          auto s = factory_->start(attr::kEncrypt);
          if (!s.ok()) {
            st = s.error();
            break;
          }
          auto r = faulty_tpm_->run(cmd::GetRandom{32}, {Auth{s->get(), {}}});
          if (!r.ok()) st = r.error();
          break;
        }
        case Kind::kReadResident:
        case Kind::kExtendResident: {
          bool read = kind == Kind::kReadResident;
          std::unique_ptr<HmacSession>& slot = read ? resident_read : resident_extend;
          if (!slot) {
            auto s = factory_->start(read ? attr::kAudit | attr::kContinueSession : attr::kContinueSession);
            if (!s.ok()) {
              st = s.error();
              break;
            }
            slot = std::move(*s);
          }
          Auth a{slot.get(), {}};
          if (read) {
            auto r = pcr_read(*faulty_tpm_, alg::kSha256, kPcr, std::span<const Auth>(&a, 1));
            if (!r.ok()) {
              st = r.error();
            } else if (*r != seen_.pcr) {
              ADD_FAILURE() << "command " << i << ": audited PCR_Read returned " << to_hex(*r) << ", the TPM holds "
                            << to_hex(seen_.pcr);
            }
          } else {
            st = pcr_extend(*faulty_tpm_, alg::kSha256, kPcr, digest, a);
          }
          if (!st.ok()) slot.reset();  // dropped on error
          break;
        }
      }
      faulting = false;
      std::string outcome = st.ok() ? (faults_this_command.empty() ? "ok" : "ok despite a fault") : "error";
      report.outcomes[fmt::format("{:<28} {}", kind_name(kind), outcome)]++;
      if (st.ok()) {
        for (const auto& f : faults_this_command) report.ok_despite[f]++;
      }

      // Nothing but the resident sessions may be loaded.
      std::set<uint32_t> allowed;
      if (resident_read) allowed.insert(resident_read->handle());
      if (resident_extend) allowed.insert(resident_extend->handle());
      for (uint32_t h : loaded_handles()) {
        if (allowed.count(h)) continue;
        ++report.leaks;
        for (const auto& f : faults_this_command) report.leaked_after[f.substr(0, f.find_first_of("0123456789", 5))]++;
        std::string faults;
        for (const auto& f : faults_this_command) faults += " [" + f + "]";
        std::string what = fmt::format("command {} ({}) leaked 0x{:08x}; result: {}; faults:{}", i, kind_name(kind), h,
                                       st.ok() ? "ok" : st.error().message(), faults);
        if (report.first_leak.empty()) report.first_leak = what;
        if (report.leaks <= 5) ADD_FAILURE() << what;
        // Clean up so one leak is reported once and does not exhaust the TPM.
        (void)tpm().run(cmd::FlushContext{h});
      }
    }
    resident_read.reset();
    resident_extend.reset();
    faults_->set_hook(nullptr);
    return report;
  }

  Witness seen_;
  std::unique_ptr<testing::RecordingTransport> witness_;
  std::unique_ptr<FaultInjectingTransport> faults_;
  std::unique_ptr<Tpm> faulty_tpm_;
  std::unique_ptr<SessionFactory> factory_;
};

void print(const char* title, const LeakTest::Report& report, double seconds) {
  std::cout << title << fmt::format(" ({:.1f} s)\n", seconds);
  for (const auto& [k, n] : report.outcomes) std::cout << fmt::format("  {:<36} {:>5}\n", k, n);
  size_t faults = 0;
  for (const auto& [k, n] : report.faults) {
    std::cout << fmt::format("  fault {:<48} {:>5}\n", k, n);
    faults += n;
  }
  for (const auto& [k, n] : report.ok_despite) std::cout << fmt::format("  succeeded despite [{}] x{}\n", k, n);
  for (const auto& [k, n] : report.leaked_after) std::cout << fmt::format("  leaked after [{}] x{}\n", k, n);
  std::cout << fmt::format("  faults injected: {}, leaked handles: {}\n", faults, report.leaks);
}

TEST_P(LeakTest, NoSlotLeaksUnderFaults) {
  auto start = std::chrono::steady_clock::now();
  Report report = run_schedule(0x7470'6d73'6563ULL, kCommands, /*setup_lost_after_execution=*/false);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print("leak: 10,000 protected commands under faults", report, seconds);

  EXPECT_EQ(report.leaks, 0u) << report.first_leak;
  std::vector<uint32_t> left = loaded_handles();
  EXPECT_TRUE(left.empty()) << left.size() << " handle(s) left, first 0x" << std::hex << left.front();
  auto counts = session_counts();
  EXPECT_EQ(counts[pt::kHrLoaded], 0u) << "TPM_PT_HR_LOADED";
  EXPECT_EQ(counts[pt::kHrActive], 0u) << "TPM_PT_HR_ACTIVE";
  std::cout << fmt::format("  TPM_PT_HR_LOADED={} TPM_PT_HR_ACTIVE={} TPM_PT_HR_LOADED_AVAIL={}\n",
                           counts[pt::kHrLoaded], counts[pt::kHrActive], counts[pt::kHrLoadedAvail]);

  // PCR 16 holds exactly the extends the TPM really executed, whatever the client was told.
  auto pcr = pcr_read(tpm(), alg::kSha256, kPcr);
  ASSERT_TRUE(pcr.ok()) << pcr.error().message();
  EXPECT_EQ(to_hex(*pcr), to_hex(seen_.pcr)) << seen_.extends << " extends executed";
  RecordProperty("faults", std::to_string(faults_->counters().faulted));
  RecordProperty("leaks", std::to_string(report.leaks));
}

// The TPM created a session or loaded the null key and the response naming
// the new handle is lost (transmission error, forged error, or a response
// whose frame is broken, after execution): the client never learns the
// handle. Its Tpm knows a creation's outcome is unknown and sweeps: it lists
// the TPM's handles and flushes those it neither owns nor found there
// before its first creation.
TEST_P(LeakTest, SetupResponseLostAfterExecution) {
  auto start = std::chrono::steady_clock::now();
  Report report = run_schedule(0x5e7u, 5000, /*setup_lost_after_execution=*/true);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print("leak: setup responses lost after execution", report, seconds);
  EXPECT_EQ(report.leaks, 0u) << report.first_leak;
}

// A success response whose handle area is intact but whose parameters do
// not parse. The handle it names is not trusted (it may be forged to name a
// live handle); the sweep finds the one the TPM created.
TEST_P(LeakTest, HandleOfAResponseThatFailsToParseIsFlushed) {
  struct Case {
    uint32_t command_code;
    Fault fault;
    const char* what;
  };
  Fault trailing_byte = Fault::append_response({0});
  trailing_byte.response_flips = {{5, 0x01}};  // size 14 -> 15: the frame stays consistent
  const Case cases[] = {
      {cc::kStartAuthSession, Fault::flip_response(15, 0x01), "StartAuthSession nonceTPM size 32 -> 33"},
      {cc::kStartAuthSession, Fault::flip_response(14, 0x01), "StartAuthSession nonceTPM size 32 -> 288"},
      {cc::kContextLoad, trailing_byte, "ContextLoad with one trailing byte"},
  };
  for (const Case& c : cases) {
    faults_->set_hook(
        [&](size_t, uint32_t code, ByteView) { return code == c.command_code ? c.fault : Fault::pass(); });
    auto s = factory_->start(0);
    faults_->set_hook(nullptr);
    EXPECT_FALSE(s.ok()) << c.what;
    std::vector<uint32_t> left = loaded_handles();
    EXPECT_TRUE(left.empty()) << c.what << ": leaked 0x" << std::hex << (left.empty() ? 0 : left.front());
    for (uint32_t h : left) (void)tpm().run(cmd::FlushContext{h});
  }
}

INSTANTIATE_TEST_SUITE_P(Embedded, LeakTest, ::testing::Values(testing::TpmKind::kEmbedded),
                         testing::tpm_kind_param_name);

}  // namespace
}  // namespace tpmsec
