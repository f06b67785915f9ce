// Slot and context-gap enforcement of the emulated chip (slot_limits.h), and
// the strategies on a chip that enforces them (issue #11): the embedded
// libtpms behind a SlotLimitTransport, and a second client on the same TPM
// sending raw session traffic between the stream's extends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <random>

#include "tpmsec/constants.h"
#include "tpmsec/emulation/latency_transport.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/emulation/slot_limits.h"
#include "tpmsec/pcr.h"
#include "tpmsec/response_code.h"
#include "tpmsec/strategy.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

constexpr uint32_t kRcSessionHandles = 0x905;

// ------------------------------------------------------------ raw commands

Bytes frame(uint32_t code, const Bytes& body) {
  Bytes c(10);
  c[0] = 0x80;
  c[1] = 0x01;
  store_be32(c.data() + 2, static_cast<uint32_t>(10 + body.size()));
  store_be32(c.data() + 6, code);
  c.insert(c.end(), body.begin(), body.end());
  return c;
}

void put32(Bytes& b, uint32_t v) {
  uint8_t p[4];
  store_be32(p, v);
  b.insert(b.end(), p, p + 4);
}
void put16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}

uint32_t rc_of(const Bytes& r) { return r.size() >= 10 ? load_be32(r.data() + 6) : 0xFFFFFFFF; }

constexpr uint32_t kTransientFirst = 0x80000000;

// What a client without tpmsec's session layer sends: unsalted, unbound HMAC
// sessions, context saves and loads, flushes.
class RawClient {
 public:
  explicit RawClient(Transport& t) : t_(t) {}

  Bytes send(const Bytes& command) {
    auto r = t_.transmit(command);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
    return r.ok() ? *r : Bytes{};
  }
  // StartAuthSession; the handle, or 0 with *code set.
  uint32_t start(uint32_t* code = nullptr) {
    Bytes body;
    put32(body, 0x40000007);  // tpmKey TPM_RH_NULL
    put32(body, 0x40000007);  // bind TPM_RH_NULL
    put16(body, 16);          // nonceCaller
    for (int i = 0; i < 16; ++i) body.push_back(static_cast<uint8_t>(i + 1));
    put16(body, 0);        // encryptedSalt
    body.push_back(0x00);  // TPM_SE_HMAC
    put16(body, 0x0010);   // symmetric TPM_ALG_NULL
    put16(body, 0x000B);   // SHA-256
    Bytes r = send(frame(0x176, body));
    if (code) *code = rc_of(r);
    return rc_of(r) == 0 && r.size() >= 14 ? load_be32(r.data() + 10) : 0;
  }
  // ContextSave; the TPMS_CONTEXT, or empty with *code set.
  Bytes save(uint32_t handle, uint32_t* code = nullptr) {
    Bytes body;
    put32(body, handle);
    Bytes r = send(frame(0x162, body));
    if (code) *code = rc_of(r);
    return rc_of(r) == 0 ? Bytes(r.begin() + 10, r.end()) : Bytes{};
  }
  // ContextLoad; the loaded handle, or 0 with *code set.
  uint32_t load(const Bytes& context, uint32_t* code = nullptr) {
    Bytes r = send(frame(0x161, context));
    if (code) *code = rc_of(r);
    return rc_of(r) == 0 && r.size() >= 14 ? load_be32(r.data() + 10) : 0;
  }
  uint32_t flush(uint32_t handle) {
    Bytes body;
    put32(body, handle);
    return rc_of(send(frame(0x165, body)));
  }
  // HashSequenceStart: a transient sequence object (one object slot).
  uint32_t sequence(uint32_t* code = nullptr) {
    Bytes body;
    put16(body, 0);  // auth
    put16(body, 0x000B);
    Bytes r = send(frame(0x186, body));
    if (code) *code = rc_of(r);
    return rc_of(r) == 0 && r.size() >= 14 ? load_be32(r.data() + 10) : 0;
  }
  // GetCapability(TPM_CAP_HANDLES) from `first`, within its range.
  std::vector<uint32_t> handles(uint32_t first) {
    Bytes body;
    put32(body, 1);
    put32(body, first);
    put32(body, 64);
    Bytes r = send(frame(0x17A, body));
    std::vector<uint32_t> out;
    if (rc_of(r) != 0 || r.size() < 19) return out;
    uint32_t n = load_be32(r.data() + 15);
    for (uint32_t i = 0; i < n && 19 + 4 * i + 4 <= r.size(); ++i) {
      uint32_t h = load_be32(r.data() + 19 + 4 * i);
      // Sessions are listed as 0x02… or 0x03… whichever range was asked for.
      bool session = (h >> 24) == 0x02 || (h >> 24) == 0x03;
      if (first == kTransientFirst ? (h >> 24) == 0x80 : session) out.push_back(h);
    }
    return out;
  }

 private:
  Transport& t_;
};

constexpr uint32_t kLoaded = 0x02000000, kSaved = ht::kFirstSavedSession, kTransient = 0x80000000;

// ------------------------------------------------------------ enforcement

class SlotLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = open_embedded();
    ASSERT_TRUE(t.ok()) << t.error().message();
    embedded_ = std::move(*t);
  }
  LatencyProfile profile(const std::string& name) {
    auto p = load_profile(name);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message());
    return p.ok() ? *p : LatencyProfile{};
  }
  void expect_empty() {
    RawClient direct(*embedded_);
    EXPECT_TRUE(direct.handles(kLoaded).empty());
    EXPECT_TRUE(direct.handles(kSaved).empty());
    EXPECT_TRUE(direct.handles(kTransient).empty());
  }
  std::unique_ptr<Transport> embedded_;
};

TEST_F(SlotLimitsTest, TheAmdProfilesGapIsEnforcedAsTheReferenceImplementationDoes) {
  LatencyProfile amd = profile("amd-ftpm-3");
  ASSERT_EQ(amd.slots.context_gap_max, 255u);
  ASSERT_EQ(amd.slots.max_loaded_sessions, 3u);
  SlotLimitTransport chip(*embedded_, amd.slots);
  RawClient c(chip);

  // One session saved and kept saved: the oldest.
  uint32_t old_session = c.start();
  ASSERT_NE(old_session, 0u);
  Bytes old_context = c.save(old_session);
  ASSERT_FALSE(old_context.empty());
  EXPECT_EQ(chip.enforced().context_gap_max, 255u);
  EXPECT_EQ(chip.enforced().max_loaded_sessions, 0u);  // libtpms's own 3 are in force anyway

  // Other sessions saved after it, each replacing the last: the counter's
  // low 8 bits run through the 256 - (3 + 1) values that do not mark a
  // loaded slot, so 251 more saves fit before it is the oldest's again.
  const int expected_saves = 255 + 1 - (3 + 1) - 1;
  uint32_t code = 0, last = 0, current = 0;
  Bytes last_context;
  int saves = 0;
  for (int i = 0; i < 300; ++i) {
    current = c.start(&code);
    ASSERT_NE(current, 0u) << "start " << i << " rc 0x" << std::hex << code;
    Bytes ctx = c.save(current, &code);
    if (ctx.empty()) break;
    ++saves;
    if (last) {
      EXPECT_EQ(c.flush(last), 0u);
    }
    last = current;
    last_context = ctx;
  }
  EXPECT_EQ(saves, expected_saves);
  EXPECT_EQ(code, rc::kContextGap);
  // The refused session is still loaded; the oldest and the last saved one are saved.
  RawClient direct(*embedded_);
  EXPECT_EQ(direct.handles(kLoaded).size(), 1u);
  EXPECT_EQ(direct.handles(kSaved).size(), 2u);

  // A second loaded session fits; the last free slot is kept for recycling
  // the oldest: a new session there is refused, and so is loading any saved
  // session but the oldest.
  uint32_t second = c.start(&code);
  ASSERT_NE(second, 0u);
  EXPECT_EQ(c.start(&code), 0u);
  EXPECT_EQ(code, rc::kContextGap);
  EXPECT_EQ(c.load(last_context, &code), 0u);
  EXPECT_EQ(code, rc::kContextGap);

  // Part 1 §30's remedy: load the oldest; then saving works again.
  EXPECT_EQ(c.load(old_context, &code), old_session) << std::hex << code;
  EXPECT_FALSE(c.save(current, &code).empty()) << std::hex << code;

  // Loaded slots: three loaded (second, the old one, and one more) is the limit.
  uint32_t third = c.start(&code);
  ASSERT_NE(third, 0u) << std::hex << code;
  EXPECT_EQ(c.start(&code), 0u);
  EXPECT_EQ(code, rc::kSessionMemory);
  EXPECT_EQ(c.load(last_context, &code), 0u);
  EXPECT_EQ(code, rc::kSessionMemory);
  EXPECT_EQ(direct.handles(kLoaded).size(), 3u);

  // The gap refusals were the emulated chip's; the slot ones libtpms's own
  // (3 loaded sessions, as the profile says: nothing to add there).
  EXPECT_EQ(chip.refusals(rc::kContextGap), 3u);
  EXPECT_EQ(chip.refusals(rc::kSessionMemory), 0u);
  for (uint32_t h : {old_session, second, third, current, last}) EXPECT_EQ(c.flush(h), 0u);
  expect_empty();
}

TEST_F(SlotLimitsTest, ObjectSlotsAnswerObjectMemory) {
  SlotLimits limits;
  limits.max_transient_objects = 2;
  SlotLimitTransport chip(*embedded_, limits);
  RawClient c(chip);
  uint32_t code = 0;
  uint32_t a = c.sequence(), b = c.sequence();
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  EXPECT_EQ(chip.enforced().max_transient_objects, 2u);
  EXPECT_EQ(c.sequence(&code), 0u);
  EXPECT_EQ(code, rc::kObjectMemory);
  // An object's context saves without a slot; loading it needs one.
  Bytes ctx = c.save(a, &code);
  ASSERT_FALSE(ctx.empty()) << std::hex << code;
  EXPECT_EQ(c.load(ctx, &code), 0u);
  EXPECT_EQ(code, rc::kObjectMemory);
  EXPECT_EQ(c.flush(a), 0u);
  uint32_t reloaded = c.load(ctx, &code);
  EXPECT_NE(reloaded, 0u) << std::hex << code;
  EXPECT_EQ(chip.refusals(), 2u);
  EXPECT_EQ(c.flush(b), 0u);
  EXPECT_EQ(c.flush(reloaded), 0u);
  expect_empty();
}

TEST_F(SlotLimitsTest, LoadedAndActiveSessionsAnswerSessionMemoryAndSessionHandles) {
  SlotLimits limits;
  limits.max_loaded_sessions = 2;  // below libtpms's 3
  limits.active_sessions_max = 4;  // below libtpms's 64
  SlotLimitTransport chip(*embedded_, limits);
  RawClient c(chip);
  uint32_t code = 0;
  uint32_t a = c.start(), b = c.start();
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  EXPECT_EQ(c.start(&code), 0u);
  EXPECT_EQ(code, rc::kSessionMemory);
  Bytes ctx_a = c.save(a), ctx_b = c.save(b);
  ASSERT_FALSE(ctx_a.empty());
  ASSERT_FALSE(ctx_b.empty());
  uint32_t d = c.start(), e = c.start();
  ASSERT_NE(d, 0u);
  ASSERT_NE(e, 0u);
  EXPECT_EQ(c.load(ctx_a, &code), 0u);  // two loaded: no slot for a third
  EXPECT_EQ(code, rc::kSessionMemory);
  ASSERT_FALSE(c.save(d).empty());
  // Loaded e, saved a, b, d: four active.
  EXPECT_EQ(c.start(&code), 0u);
  EXPECT_EQ(code, kRcSessionHandles);
  EXPECT_EQ(c.load(ctx_a, &code), a) << std::hex << code;  // loading makes no new active session
  EXPECT_EQ(chip.refusals(), 3u);
  for (uint32_t h : {a, b, d, e}) EXPECT_EQ(c.flush(h), 0u);
  expect_empty();
}

TEST_F(SlotLimitsTest, LimitsTheTpmAlreadyHasAreLeftToIt) {
  // slb9670: a 16-bit gap, as libtpms's own; nothing of it is enforced here.
  SlotLimitTransport chip(*embedded_, profile("slb9670").slots);
  RawClient c(chip);
  uint32_t h = c.start();
  ASSERT_NE(h, 0u);
  EXPECT_EQ(chip.enforced().context_gap_max, 0u);
  EXPECT_EQ(chip.enforced().max_loaded_sessions, 0u);    // 3, as libtpms
  EXPECT_EQ(chip.enforced().max_transient_objects, 0u);  // 4, above libtpms's 3
  EXPECT_EQ(c.flush(h), 0u);
  // Unknown limits (0) are never enforced.
  SlotLimitTransport unknown(*embedded_, profile("attpm20p").slots);
  RawClient u(unknown);
  std::vector<uint32_t> hs;
  for (int i = 0; i < 5; ++i) {
    hs.push_back(u.start());
    EXPECT_FALSE(u.save(hs.back()).empty());
  }
  for (uint32_t x : hs) {
    EXPECT_NE(x, 0u);
    u.flush(x);
  }
  EXPECT_EQ(unknown.refusals(), 0u);
  expect_empty();
}

TEST_F(SlotLimitsTest, ATpmResetRestartsTheCounter) {
  SlotLimitTransport chip(*embedded_, profile("amd-ftpm-3").slots);
  RawClient c(chip);
  uint32_t h = c.start();
  ASSERT_FALSE(c.save(h).empty());
  uint64_t start = 3 + 1;
  EXPECT_EQ(chip.context_counter(), start + 1);
  ASSERT_TRUE(chip.reset_tpm().ok());
  EXPECT_EQ(chip.context_counter(), start);
  expect_empty();
}

TEST_F(SlotLimitsTest, OddAndHostileCommandsAreForwardedOrRefusedNeverMisread) {
  SlotLimits limits;
  limits.max_loaded_sessions = 1;
  limits.max_transient_objects = 1;
  limits.active_sessions_max = 2;
  limits.context_gap_max = 7;
  SlotLimitTransport chip(*embedded_, limits);
  RawClient c(chip);
  std::mt19937 rng(11);
  const uint32_t codes[] = {0x176, 0x161, 0x162, 0x131, 0x157, 0x167, 0x191, 0x186, 0x15B, 0x165, 0x144};
  for (int i = 0; i < 3000; ++i) {
    size_t n = rng() % 48;
    Bytes cmd(n);
    for (auto& b : cmd) b = static_cast<uint8_t>(rng());
    if (n >= 10 && rng() % 4 != 0) {
      cmd[0] = 0x80;
      cmd[1] = rng() % 2 ? 0x01 : 0x02;
      store_be32(cmd.data() + 2, rng() % 8 ? static_cast<uint32_t>(n) : static_cast<uint32_t>(rng()));
      store_be32(cmd.data() + 6, codes[rng() % std::size(codes)]);
      // Handles that name sessions and objects, saved or not.
      if (n >= 22 && rng() % 2) store_be32(cmd.data() + 18, rng() % 2 ? 0x02000000u + rng() % 4 : 0x80000000u);
      if (n >= 14 && rng() % 2) store_be32(cmd.data() + 10, 0x02000000u + rng() % 4);
    }
    auto r = chip.transmit(cmd);
    if (r.ok()) {
      EXPECT_GE(r->size(), 10u);
    }
    if (i % 100 == 0) {
      // Real traffic in between, so the hostile commands meet live state.
      uint32_t h = c.start();
      if (h) {
        c.save(h);
        if (i % 300 == 0) c.flush(h);
      }
    }
  }
  // Whatever the noise left, the counts still come from the TPM: a flush of
  // everything restores every slot.
  RawClient direct(*embedded_);
  for (uint32_t first : {kLoaded, kSaved, kTransient}) {
    for (uint32_t h : direct.handles(first)) direct.flush(h);
  }
  uint32_t h = c.start();
  EXPECT_NE(h, 0u);
  c.flush(h);
}

// ------------------------------------------------------------ strategies

// Two clients on one TPM: each Tpm's handle ledger must not take the other's
// handles for its own strays (as on /dev/tpmrm*, where sessions are global),
// so the stream's transport says its handles are private.
class SharedTpm final : public Transport {
 public:
  explicit SharedTpm(Transport& inner) : inner_(inner) {}
  Result<Bytes> transmit(ByteView command) override { return inner_.transmit(command); }
  std::string describe() const override { return inner_.describe(); }
  bool in_process() const override { return inner_.in_process(); }
  bool private_handles() const override { return true; }

 private:
  Transport& inner_;
};

// The other client: between two of the stream's extends it starts a session
// and saves it, keeps a few saved (flushing its oldest of those), now and then
// loads one back and flushes it, keeps one session saved for a long time
// (which is what maxes out the gap), and every so often bursts through
// hundreds of saves. On a refusal it does what it can with its own sessions
// (Part 1 §30: load and re-save its oldest), never touching anyone else's.
class OtherClient {
 public:
  explicit OtherClient(Transport& t) : c_(t) {}

  void step(int i) {
    if (i % 400 == 0) recycle_old();
    uint32_t code = 0;
    uint32_t h = c_.start(&code);
    if (!h) {
      ++refused_;
      return;
    }
    Bytes ctx = c_.save(h, &code);
    if (ctx.empty()) {
      ++refused_;
      c_.flush(h);
      if (code == rc::kContextGap && i % 2 == 0) recycle_old();
    } else {
      ring_.push_back({h, ctx});
    }
    if (ring_.size() > 4) {
      c_.flush(ring_.front().first);
      ring_.pop_front();
    }
    if (i % 3 == 0 && !ring_.empty()) {
      auto [handle, context] = ring_.back();
      ring_.pop_back();
      if (c_.load(context, &code)) {
        c_.flush(handle);
      } else {
        ++refused_;
      }
    }
    if (i % 2500 == 1250) burst();
  }
  void finish() {
    for (auto& [h, ctx] : ring_) c_.flush(h);
    ring_.clear();
    if (old_) c_.flush(old_);
    old_ = 0;
  }
  uint64_t refused() const { return refused_; }

 private:
  // The long-held saved session: load it back and flush it, then start and save a new one.
  void recycle_old() {
    if (old_) {
      uint32_t code = 0;
      if (!c_.load(old_context_, &code)) ++refused_;
      c_.flush(old_);
      old_ = 0;
    }
    uint32_t h = c_.start();
    if (!h) return;
    old_context_ = c_.save(h);
    if (old_context_.empty()) {
      c_.flush(h);
      return;
    }
    old_ = h;
  }
  void burst() {
    for (int j = 0; j < 260; ++j) {
      uint32_t h = c_.start();
      if (!h) continue;
      if (c_.save(h).empty()) ++refused_;
      c_.flush(h);
    }
  }

  RawClient c_;
  std::deque<std::pair<uint32_t, Bytes>> ring_;
  uint32_t old_ = 0;
  Bytes old_context_;
  uint64_t refused_ = 0;
};

class GapChipStrategies : public ::testing::TestWithParam<std::pair<StrategyKind, int>> {
 protected:
  void SetUp() override {
    auto t = open_embedded();
    ASSERT_TRUE(t.ok()) << t.error().message();
    embedded_ = std::move(*t);
    auto p = load_profile("amd-ftpm-3");
    ASSERT_TRUE(p.ok()) << p.error().message();
    latency_ = std::make_unique<LatencyTransport>(*embedded_, LatencyModel(*p), clock_);
    shared_ = std::make_unique<SharedTpm>(*latency_);
    tpm_ = std::make_unique<Tpm>(*shared_);
  }
  std::unique_ptr<Transport> embedded_;
  VirtualClock clock_;
  std::unique_ptr<LatencyTransport> latency_;
  std::unique_ptr<SharedTpm> shared_;
  std::unique_ptr<Tpm> tpm_;
};

Bytes digest_of(int i) {
  Bytes d(32, static_cast<uint8_t>(0xA5));
  store_be32(d.data(), static_cast<uint32_t>(i));
  return d;
}

TEST_P(GapChipStrategies, KeepsEveryExtendExactlyOnceAmongOtherSessionTraffic) {
  const auto [kind, extends] = GetParam();
  StreamOptions options;
  options.protection.trust_first_use = true;  // the test's own in-process TPM
  options.checkpoint_every = 250;
  auto start = pcr_read(*tpm_, alg::kSha256, options.pcr);
  ASSERT_TRUE(start.ok()) << start.error().message();
  auto stream = ExtendStream::open(*tpm_, kind, options);
  ASSERT_TRUE(stream.ok()) << stream.error().message();

  OtherClient other(*latency_);
  const int64_t loop_start = clock_.now_ns();
  Bytes chain = *start;
  for (int i = 0; i < extends; ++i) {
    other.step(i);
    Bytes d = digest_of(i);
    Status st = (*stream)->extend(d);
    ASSERT_TRUE(st.ok()) << "extend " << i << ": " << st.error().message();
    auto next = pcr_extended_value(alg::kSha256, chain, d);
    ASSERT_TRUE(next.ok());
    chain = *next;
  }
  const int64_t loop_end = clock_.now_ns();
  const StreamStats stats = (*stream)->stats();
  ASSERT_TRUE((*stream)->finish().ok());
  other.finish();

  // Every extend landed once: the PCR is the chain of all of them.
  auto end = pcr_read(*tpm_, alg::kSha256, options.pcr);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(to_hex(*end), to_hex(chain));
  EXPECT_EQ(to_hex((*stream)->expected()), to_hex(chain));
  EXPECT_EQ(stats.extends, static_cast<uint64_t>(extends));
  // The chip refused what a 0xFF-gap chip refuses, and the other client met it.
  SlotLimitTransport& chip = latency_->slots();
  EXPECT_GT(chip.refusals(rc::kContextGap), 0u);
  EXPECT_GT(other.refused(), 0u);
  if (kind == StrategyKind::kSavedContext) {
    // Its own saves were refused, and it kept the session loaded instead of
    // failing the extend: no rebuild, no landed-check.
    EXPECT_GT(stats.saves_refused, 0u);
    EXPECT_EQ(stats.landed_checks, 0u);
    EXPECT_EQ(stats.rebuilds, 0u);
  }
  std::printf(
      "%s, %d extends on amd-ftpm-3 among other traffic: chip refused %llu ContextSave/StartAuthSession/"
      "ContextLoad with TPM_RC_CONTEXT_GAP (other client: %llu refusals); stream: %llu saves refused, "
      "%llu rebuilds, %llu landed-checks; %.3f modelled ms per step (both clients)\n",
      std::string(strategy_name(kind)).c_str(), extends,
      static_cast<unsigned long long>(chip.refusals(rc::kContextGap)), static_cast<unsigned long long>(other.refused()),
      static_cast<unsigned long long>(stats.saves_refused), static_cast<unsigned long long>(stats.rebuilds),
      static_cast<unsigned long long>(stats.landed_checks), static_cast<double>(loop_end - loop_start) / 1e6 / extends);

  // Nothing left behind by either client.
  stream->reset();
  tpm_.reset();
  RawClient direct(*embedded_);
  EXPECT_TRUE(direct.handles(kLoaded).empty());
  EXPECT_TRUE(direct.handles(kSaved).empty());
  EXPECT_TRUE(direct.handles(kTransient).empty());
}

INSTANTIATE_TEST_SUITE_P(AmdFtpm, GapChipStrategies,
                         ::testing::Values(std::pair{StrategyKind::kSavedContext, 10000},
                                           std::pair{StrategyKind::kResident, 10000},
                                           std::pair{StrategyKind::kPerCommand, 1000},
                                           std::pair{StrategyKind::kCheckpoint, 1000}),
                         [](const auto& info) {
                           std::string n(strategy_name(info.param.first));
                           n.erase(std::remove(n.begin(), n.end(), '-'), n.end());
                           return n;
                         });

}  // namespace
}  // namespace tpmsec
