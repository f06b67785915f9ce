// The command table (command_table.h): its shape, the typed definitions
// taken from it, every entry against what the reference TPM (the embedded
// libtpms) reports in TPM_CAP_COMMANDS, and the attributes a session needs
// (auth_count, the TPM2B flags, no_sessions) exercised on that TPM through
// the table alone, as a client that knows no parameter types would.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "support/tpm_frames.h"
#include "testing/transport_doubles.h"
#include "tpmsec/command_table.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/response_code.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport/tracing.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

// Part 2 §6.6.3: TPM_RC_AUTH_MISSING, TPM_RC_AUTH_CONTEXT (RC_VER1 + 0x025, + 0x045).
constexpr uint32_t kRcAuthMissing = 0x125;
constexpr uint32_t kRcAuthContext = 0x145;

// The codes Part 2 §6.5.2 (Table 12, TPM_CC) leaves unassigned in 0x11F..0x1A1.
bool unassigned(uint32_t code) {
  return code == 0x123 || code == 0x15A || code == 0x15F || code == 0x166 || code == 0x175;
}

const CommandInfo& by_name(std::string_view name) {
  for (const CommandInfo& c : all_commands()) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << name << " is not in the command table";
  static const CommandInfo kNone{};
  return kNone;
}

TEST(CommandTable, CodesAscendEachOnce) {
  std::span<const CommandInfo> all = all_commands();
  ASSERT_FALSE(all.empty());
  std::set<uint32_t> codes;
  std::set<std::string_view> names;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_TRUE(codes.insert(all[i].code).second) << all[i].name;
    EXPECT_TRUE(names.insert(all[i].name).second) << all[i].name;
    if (i > 0) EXPECT_LT(all[i - 1].code, all[i].code) << all[i].name;
  }
}

// One command table: every TPM_CC of Part 2 Table 12 has one entry and one
// name, found by find_command() and named by tracing's command_name().
TEST(CommandTable, EveryCommandCodeHasOneName) {
  size_t assigned = 0;
  for (uint32_t code = 0x11F; code <= 0x1A1; ++code) {
    const CommandInfo* c = find_command(code);
    if (unassigned(code)) {
      EXPECT_EQ(c, nullptr) << std::hex << code;
      continue;
    }
    ++assigned;
    ASSERT_NE(c, nullptr) << std::hex << code;
    EXPECT_EQ(c->code, code);
    EXPECT_EQ(command_name(code), c->name);
  }
  EXPECT_EQ(all_commands().size(), assigned);
  EXPECT_EQ(command_name(0x177), "VerifySignature");
  EXPECT_EQ(command_name(0x180), "PolicyRestart");
  EXPECT_EQ(command_name(0x182), "PCR_Extend");
  EXPECT_EQ(find_command(0x11E), nullptr);
  EXPECT_EQ(find_command(0x1A2), nullptr);
  EXPECT_EQ(find_command(0x20000000), nullptr);  // a vendor code (TPMA_CC.V): not Part 3's
  EXPECT_EQ(command_name(0x20000001), "0x20000001");
}

// What Part 3's handle areas and Auth Index annotations imply for every entry.
// command_code() finds each command by its name (a misspelt name is a
// compile error, not a test failure).
static_assert(command_code("PCR_Extend") == 0x182);
static_assert(command_code("NV_UndefineSpaceSpecial") == 0x11F);
TEST(CommandTable, EveryNameGivesItsCode) {
  for (const CommandInfo& c : all_commands()) {
    size_t same = 0;
    for (const CommandInfo& d : all_commands()) same += d.name == c.name;
    EXPECT_EQ(same, 1u) << c.name << ": command_code() would find the first";
  }
}

TEST(CommandTable, EntriesAreConsistent) {
  for (const CommandInfo& c : all_commands()) {
    SCOPED_TRACE(c.name);
    EXPECT_FALSE(c.name.empty());
    EXPECT_LE(c.auth_count, c.handle_count) << "authorizations are for handles in the handle area";
    EXPECT_LE(c.handle_count, 3);
    EXPECT_LE(c.response_handle_count, 1);
    EXPECT_EQ(c.creates_handle, c.response_handle_count == 1);
    if (c.no_sessions) {
      EXPECT_EQ(c.auth_count, 0);
      EXPECT_FALSE(c.command_param_tpm2b);
      EXPECT_FALSE(c.response_param_tpm2b);
    }
  }
}

// Each typed definition's kInfo is its table entry, the object itself.
template <class... C>
void expect_table_entries() {
  (
      [] {
        const CommandInfo* entry = find_command(C::kInfo.code);
        ASSERT_NE(entry, nullptr) << C::kInfo.name;
        EXPECT_EQ(&C::kInfo, entry) << C::kInfo.name;
      }(),
      ...);
}

TEST(CommandTable, TypedDefinitionsAreTheirTableEntries) {
  expect_table_entries<cmd::Startup, cmd::Shutdown, cmd::GetCapability, cmd::GetRandom, cmd::PcrRead, cmd::PcrExtend,
                       cmd::PcrReset, cmd::CreatePrimary, cmd::Create, cmd::Load, cmd::Unseal, cmd::EvictControl,
                       cmd::ReadPublic, cmd::NvReadPublic, cmd::NvDefineSpace, cmd::NvUndefineSpace, cmd::NvRead,
                       cmd::ContextSave, cmd::ContextLoad, cmd::FlushContext, cmd::StartAuthSession, cmd::Hash>();
  static_assert(&command_info<0x17B>() == &cmd::GetRandom::kInfo);
  static_assert(cmd::GetRandom::kInfo.name == "GetRandom" && cmd::GetRandom::kInfo.retry_safe);
}

// ---------------------------------------------------------------------------
// Against the reference TPM.

class ReferenceTpm : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = open_embedded();
    ASSERT_TRUE(t.ok()) << t.error().message();
    embedded_ = std::move(*t);
    recorder_ = std::make_unique<testing::RecordingTransport>(*embedded_, [this](ByteView c, const Result<Bytes>& r) {
      last_command_.assign(c.begin(), c.end());
      last_response_ = r.ok() ? *r : Bytes{};
    });
    tpm_ = std::make_unique<Tpm>(*recorder_);
  }

  // Every TPMA_CC the TPM lists (Part 3 §30.2, TPM_CAP_COMMANDS), by command index.
  std::map<uint32_t, uint32_t> reported_commands() {
    std::map<uint32_t, uint32_t> by_code;
    uint32_t next = 0x11F;  // TPM_CC_FIRST
    for (int round = 0; round < 16; ++round) {
      auto r = tpm_->run(cmd::GetCapability{cap::kCommands, next, 256});
      EXPECT_TRUE(r.ok()) << r.error().message();
      if (!r.ok() || r->capability_data.commands.empty()) break;
      for (uint32_t a : r->capability_data.commands) by_code[(a & 0xFFFF) | (a & kV)] = a;
      uint32_t last = r->capability_data.commands.back();
      next = ((last & 0xFFFF) | (last & kV)) + 1;
      if (!r->more_data) break;
    }
    return by_code;
  }

  // TPMA_CC (Part 2 §8.9).
  static constexpr uint32_t kNv = 1u << 22;
  static constexpr uint32_t kExtensive = 1u << 23;
  static constexpr uint32_t kFlushed = 1u << 24;
  static constexpr uint32_t kRHandle = 1u << 28;
  static constexpr uint32_t kV = 1u << 29;
  static uint32_t c_handles(uint32_t a) { return (a >> 25) & 0x7; }

  // What the table says a TPM must report for an entry.
  static uint32_t tpma_cc(const CommandInfo& c) {
    return (c.code & 0xFFFF) | (c.writes_nv ? kNv : 0) | (c.extensive ? kExtensive : 0) |
           (c.flushes_handles ? kFlushed : 0) | static_cast<uint32_t>(c.handle_count) << 25 |
           (c.response_handle_count ? kRHandle : 0);
  }

  std::unique_ptr<Transport> embedded_;
  std::unique_ptr<testing::RecordingTransport> recorder_;
  std::unique_ptr<Tpm> tpm_;
  Bytes last_command_;
  Bytes last_response_;
};

// The table's commands libtpms 0.9 (the embedded reference TPM) does not
// implement, and why. Anything else in the table it must implement.
const std::map<std::string_view, std::string_view>& not_in_libtpms() {
  static const std::map<std::string_view, std::string_view> kWhy = {
      {"FieldUpgradeStart", "no field upgrade in a software TPM"},
      {"FieldUpgradeData", "no field upgrade in a software TPM"},
      {"FirmwareRead", "no field upgrade in a software TPM"},
      {"AC_GetCapability", "no Attached Components"},
      {"AC_Send", "no Attached Components"},
      {"Policy_AC_SendSelect", "no Attached Components"},
      {"ACT_SetTimeout", "no Authenticated Countdown Timers"},
      {"ECC_Encrypt", "libtpms 0.9 leaves it disabled"},
      {"ECC_Decrypt", "libtpms 0.9 leaves it disabled"},
      {"PolicyCapability", "later than the Library revision libtpms 0.9 implements"},
      {"PolicyParameters", "later than the Library revision libtpms 0.9 implements"},
      {"NV_DefineSpace2", "later than the Library revision libtpms 0.9 implements"},
      {"NV_ReadPublic2", "later than the Library revision libtpms 0.9 implements"},
      {"SetCapability", "later than the Library revision libtpms 0.9 implements"},
      {"ReadOnlyControl", "later than the Library revision libtpms 0.9 implements"},
      {"PolicyTransportSPDM", "later than the Library revision libtpms 0.9 implements"},
  };
  return kWhy;
}

TEST_F(ReferenceTpm, ReportsEveryCommandAsTheTableDescribesIt) {
  std::map<uint32_t, uint32_t> reported = reported_commands();
  ASSERT_GT(reported.size(), 100u);
  for (const auto& [code, a] : reported) {
    SCOPED_TRACE(fmt::format("0x{:x}", code));
    if (a & kV) continue;  // vendor commands are not Part 3's
    const CommandInfo* c = find_command(code);
    ASSERT_NE(c, nullptr) << "the TPM implements a command the table lacks";
    SCOPED_TRACE(c->name);
    EXPECT_EQ(c_handles(a), c->handle_count) << "cHandles";
    EXPECT_EQ((a & kRHandle) != 0, c->response_handle_count == 1) << "rHandle";
    EXPECT_EQ((a & kNv) != 0, c->writes_nv) << "nv";
    EXPECT_EQ((a & kExtensive) != 0, c->extensive) << "extensive";
    EXPECT_EQ((a & kFlushed) != 0, c->flushes_handles) << "flushed";
    EXPECT_EQ(a, tpma_cc(*c)) << "the whole TPMA_CC";
  }
  for (const CommandInfo& c : all_commands()) {
    SCOPED_TRACE(c.name);
    bool implemented = reported.count(c.code) > 0;
    bool excused = not_in_libtpms().count(c.name) > 0;
    EXPECT_NE(implemented, excused) << (implemented ? "listed as not implemented, but the TPM has it"
                                                    : "the TPM does not implement it, and no reason is given");
  }
  for (const auto& [name, why] : not_in_libtpms()) EXPECT_NE(find_command(by_name(name).code), nullptr) << name;
}

// The TPM refuses a command it does not implement the way it refuses an
// unassigned code: the exception list above is what it says, not a guess.
TEST_F(ReferenceTpm, RefusesWhatItDoesNotImplement) {
  for (const auto& [name, why] : not_in_libtpms()) {
    SCOPED_TRACE(name);
    const CommandInfo& c = by_name(name);
    Writer w;
    w.u16(st::kNoSessions);
    auto size = w.begin_total_size32("commandSize");
    w.u32(c.code);
    w.end_size(size);
    auto r = embedded_->transmit(*w.finish());
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(testing::response_code_of(*r), rc::kCommandCode);
  }
}

// ---------------------------------------------------------------------------
// Sessions on commands tpmsec has no definition for, framed by the table
// alone: handle and auth counts, and the TPM2B flags for encryption.

constexpr uint32_t kIndex = 0x01500031;

class TableDriven : public ReferenceTpm {
 protected:
  void SetUp() override {
    ReferenceTpm::SetUp();
    if (HasFatalFailure()) return;
    cmd::NvDefineSpace define;
    define.auth_handle = NamedHandle::of(rh::kOwner);
    define.auth.bytes = index_auth_;
    define.public_info.nv_public = {kIndex,
                                    alg::kSha256,
                                    nv_attr::kAuthWrite | nv_attr::kAuthRead | nv_attr::kNoDa,
                                    {},
                                    static_cast<uint16_t>(secret_.size())};
    auto defined = tpm_->run(define, {Auth::password()});
    ASSERT_TRUE(defined.ok()) << defined.error().message();
  }
  NamedHandle index() {
    auto r = tpm_->run(cmd::NvReadPublic{NamedHandle::of(kIndex)});
    EXPECT_TRUE(r.ok()) << r.error().message();
    return {kIndex, r.ok() ? r->nv_name.bytes : Bytes{}};
  }
  // An unsalted HMAC session with these attributes (nullptr and a failure if it cannot start).
  std::unique_ptr<HmacSession> start_session(uint8_t attributes) {
    SessionOptions options;
    options.attributes = attributes;
    auto session = HmacSession::start(*tpm_, options);
    EXPECT_TRUE(session.ok()) << session.error().message();
    return session.ok() ? std::move(*session) : nullptr;
  }
  // NV_Write's parameters: data (TPM2B_MAX_NV_BUFFER), offset 0.
  Bytes write_parameters() const {
    Writer w;
    w.tpm2b(secret_, "data");
    w.u16(0);
    return *w.finish();
  }
  // What the pipeline refused before anything reached the TPM.
  template <class R>
  void expect_refused_unsent(const R& r) {
    ASSERT_FALSE(r.ok()) << "sent and answered";
    EXPECT_EQ(r.error().kind(), ErrorKind::kUsage) << r.error().message();
    EXPECT_TRUE(last_command_.empty()) << "sent anyway";
  }
  static bool contains(const Bytes& haystack, const Bytes& needle) {
    return std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end()) != haystack.end();
  }

  const Bytes index_auth_ = Bytes{'i', 'n', 'd', 'e', 'x'};
  const Bytes secret_ = Bytes{'n', 'o', 't', ' ', 'o', 'n', ' ', 't', 'h', 'e', ' ', 'b', 'u', 's', '!', '!'};
};

// NV_Write: two handles, the first authorized (auth_count 1), its first
// parameter a TPM2B (command_param_tpm2b): a decrypt session hides the data.
// NV_Read: its first response parameter a TPM2B (response_param_tpm2b): an
// encrypt session hides it on the way back. Both parsed by the table's counts.
TEST_F(TableDriven, EncryptsNvDataBothWays) {
  auto session = start_session(attr::kContinueSession | attr::kDecrypt);
  ASSERT_NE(session, nullptr);
  Auth auth{session.get(), index_auth_};
  NamedHandle nv = index();
  const NamedHandle* handles[] = {&nv, &nv};
  auto written = tpm_->execute(by_name("NV_Write"), handles, write_parameters(), {&auth, 1});
  ASSERT_TRUE(written.ok()) << written.error().message();
  EXPECT_FALSE(contains(last_command_, secret_)) << "NV_Write's data crossed the bus in the clear";

  nv = index();  // TPMA_NV_WRITTEN is set now: another Name
  session->set_attributes(attr::kContinueSession | attr::kEncrypt);
  Writer read_params;
  read_params.u16(static_cast<uint16_t>(secret_.size()));
  read_params.u16(0);
  auto read = tpm_->execute(by_name("NV_Read"), handles, *read_params.finish(), {&auth, 1});
  ASSERT_TRUE(read.ok()) << read.error().message();
  EXPECT_FALSE(contains(last_response_, secret_)) << "NV_Read's data crossed the bus in the clear";
  Reader r(read->parameters);
  ByteView data = r.tpm2b("data");
  r.expect_end("NV_Read response");
  ASSERT_TRUE(r.ok()) << r.status().error().message();
  EXPECT_EQ(Bytes(data.begin(), data.end()), secret_);
}

// The flags are what the pipeline goes by: without command_param_tpm2b the
// same decrypt session is refused before anything is sent.
TEST_F(TableDriven, TheFlagsDecideWhatMayBeEncrypted) {
  auto session = start_session(attr::kContinueSession | attr::kDecrypt);
  ASSERT_NE(session, nullptr);
  Auth auth{session.get(), index_auth_};
  NamedHandle nv = index();
  const NamedHandle* handles[] = {&nv, &nv};
  CommandInfo not_tpm2b = by_name("NV_Write");
  not_tpm2b.command_param_tpm2b = false;
  last_command_.clear();
  expect_refused_unsent(tpm_->execute(not_tpm2b, handles, write_parameters(), {&auth, 1}));
}

// auth_count: what the table says needs authorization, the TPM will not run
// without it (TPM_RC_AUTH_MISSING); what it says needs none runs bare.
TEST_F(TableDriven, TheTpmDemandsTheAuthorizationsTheTableCounts) {
  NamedHandle nv = index();
  const NamedHandle* two[] = {&nv, &nv};
  CommandInfo unauthorized = by_name("NV_Write");
  ASSERT_EQ(unauthorized.auth_count, 1);
  unauthorized.auth_count = 0;  // lie to the pipeline: send it without a session
  auto r = tpm_->execute(unauthorized, two, write_parameters(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().tpm_rc(), kRcAuthMissing) << r.error().message();

  const NamedHandle* one[] = {&nv};
  ASSERT_EQ(by_name("NV_ReadPublic").auth_count, 0);
  auto bare = tpm_->execute(by_name("NV_ReadPublic"), one, {}, {});
  EXPECT_TRUE(bare.ok()) << bare.error().message();
}

// no_sessions: the pipeline adds no session to such a command, and the TPM
// would refuse one (TPM_RC_AUTH_CONTEXT) -- a TCTI must not add its own.
TEST_F(TableDriven, CommandsWithoutSessionsTakeNone) {
  auto session = start_session(attr::kContinueSession | attr::kAudit);
  ASSERT_NE(session, nullptr);
  Auth audit{session.get(), {}};
  const CommandInfo& save = by_name("ContextSave");
  ASSERT_TRUE(save.no_sessions);
  NamedHandle s = NamedHandle::of(session->handle());
  const NamedHandle* handles[] = {&s};
  last_command_.clear();
  expect_refused_unsent(tpm_->execute(save, handles, {}, {&audit, 1}));

  // The TPM's side: a session area on ContextSave, framed by hand.
  testing::CommandFrame f;
  f.code = save.code;
  f.handles = {session->handle()};
  f.sessions.push_back(testing::SessionEntry{rh::kPasswordSession, {}, attr::kContinueSession, {}});
  auto answer = embedded_->transmit(testing::build_command(f));
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ(testing::response_code_of(*answer) & 0xFFF, kRcAuthContext)
      << fmt::format("0x{:x}", testing::response_code_of(*answer));
}

}  // namespace
}  // namespace tpmsec
