// A bus interposer flips bits: every byte of a protected command and of its
// response, with several patterns, against the reference TPM. Each mutation
// must end in an error (our HMAC check, the TPM's authorization check, or a
// parse error); none may return success, and the TPM's state (PCR 16) must be
// exactly what the TPM really did.
//
// Covered: PCR_Extend authorized by a one-shot salted HMAC session (as Linux),
// GetRandom with response encryption, PCR_Read with an audit session that
// authorizes nothing. Only the protected command itself is mutated, never the
// session setup.
#include <openssl/sha.h>

#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <string>

#include <fmt/format.h>

#include "support/fault_injection.h"
#include "support/test_tpm.h"
#include "tpmsec/command_table.h"
#include "tpmsec/pcr.h"
#include "tpmsec/session_factory.h"

namespace tpmsec {
namespace {

constexpr uint32_t kPcr = 16;

// Single bits, all bits, and a few multi-bit patterns: 16 per byte.
constexpr uint8_t kPatterns[] = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80,
                                 0xFF, 0x0F, 0xF0, 0x55, 0xAA, 0x03, 0xC0, 0x81};

Bytes sha256(ByteView a, ByteView b) {
  Bytes in(a.begin(), a.end());
  in.insert(in.end(), b.begin(), b.end());
  Bytes out(32);
  SHA256(in.data(), in.size(), out.data());
  return out;
}

std::string kind_label(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUsage:
      return "usage";
    case ErrorKind::kRuntime:
      return "runtime";
    case ErrorKind::kTpm:
      return "tpm";
    case ErrorKind::kParse:
      return "parse";
    case ErrorKind::kIntegrity:
      return "integrity";
    case ErrorKind::kUnsupported:
      return "unsupported";
  }
  return "?";
}

// What one protected command under test looks like.
struct Target {
  std::string name;
  uint32_t command_code;
  uint8_t attributes;
  bool extends_pcr;
};

// The outcome of one mutated command.
struct Outcome {
  Status status;
  std::optional<uint32_t> tpm_rc;  // what the TPM really answered
  size_t command_size = 0;         // the command as our client built it
  size_t response_size = 0;        // the response as the TPM sent it
};

class TamperTest : public testing::TpmTest {
 protected:
  void SetUp() override {
    TpmTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    faults_ = std::make_unique<FaultInjectingTransport>(transport());
    faulty_tpm_ = std::make_unique<Tpm>(*faults_);
    // The hook fires once, on the first command with the armed code.
    faults_->set_hook([this](size_t, uint32_t code, ByteView command) {
      last_command_size_ = command.size();
      if (!armed_ || code != armed_code_) return Fault::pass();
      armed_ = false;
      return armed_fault_;
    });
    ProtectionConfig config;
    config.trust_first_use = true;  // the faults start after the salt key is known
    auto f = SessionFactory::create(*faulty_tpm_, config);
    ASSERT_TRUE(f.ok()) << f.error().message();
    factory_ = std::move(*f);
  }
  void TearDown() override {
    factory_.reset();
    faulty_tpm_.reset();
    faults_.reset();
    TpmTest::TearDown();
  }

  // No session or transient object may outlive a mutation.
  void expect_no_handles_left(const std::string& where) {
    for (uint32_t first : {ht::kFirstHmacSession, ht::kFirstTransient}) {
      auto r = tpm().run(cmd::GetCapability{cap::kHandles, first, 64});
      ASSERT_TRUE(r.ok()) << r.error().message();
      ASSERT_TRUE(r->capability_data.handles.empty())
          << where << ": " << r->capability_data.handles.size() << " handle(s) left from 0x" << std::hex << first;
    }
  }

  Bytes read_pcr() {
    auto v = pcr_read(tpm(), alg::kSha256, kPcr);
    EXPECT_TRUE(v.ok()) << v.error().message();
    return v.ok() ? *v : Bytes();
  }

  // Runs the target command once on a fresh session with `fault` armed for it.
  Outcome run_once(const Target& t, const Fault& fault, ByteView digest) {
    auto session = factory_->start(t.attributes);
    if (!session.ok()) {
      ADD_FAILURE() << "session setup failed: " << session.error().message();
      return {session.error(), std::nullopt};
    }
    Auth auth{session->get(), {}};
    armed_code_ = t.command_code;
    armed_fault_ = fault;
    armed_ = true;
    Status st;
    if (t.command_code == cc::kPcrExtend) {
      st = pcr_extend(*faulty_tpm_, alg::kSha256, kPcr, digest, auth);
    } else if (t.command_code == cc::kGetRandom) {
      auto r = faulty_tpm_->run(cmd::GetRandom{32}, {auth});
      if (!r.ok())
        st = r.error();
      else if (r->random_bytes.bytes.size() != 32)
        st = parse_error("GetRandom returned a different size");
    } else {
      auto r = pcr_read(*faulty_tpm_, alg::kSha256, kPcr, std::span<const Auth>(&auth, 1));
      if (!r.ok()) st = r.error();
    }
    EXPECT_FALSE(armed_) << t.name << ": the fault never fired";
    armed_ = false;
    Outcome out{st, faults_->last_tpm_response_code(), last_command_size_,
                faults_->last_tpm_response() ? faults_->last_tpm_response()->size() : 0};
    session->reset();  // flushes what the TPM still holds
    return out;
  }

  // An unmutated run: the sizes of the command and response to mutate.
  void measure(const Target& t, size_t* command_size, size_t* response_size) {
    Bytes digest(32, 0x5a);
    Outcome o = run_once(t, Fault::pass(), digest);
    ASSERT_TRUE(o.status.ok()) << t.name << ": " << o.status.error().message();
    *command_size = o.command_size;
    *response_size = o.response_size;
    if (t.extends_pcr) expected_pcr_ = sha256(expected_pcr_, digest);
    ASSERT_EQ(to_hex(read_pcr()), to_hex(expected_pcr_));
  }

  std::unique_ptr<FaultInjectingTransport> faults_;
  std::unique_ptr<Tpm> faulty_tpm_;
  std::unique_ptr<SessionFactory> factory_;
  bool armed_ = false;
  uint32_t armed_code_ = 0;
  Fault armed_fault_;
  size_t last_command_size_ = 0;
  Bytes expected_pcr_;
};

TEST_P(TamperTest, EveryMutationOfAProtectedCommandFails) {
  const Target targets[] = {
      {"PCR_Extend (HMAC)", cc::kPcrExtend, 0, true},
      {"GetRandom (encrypt)", cc::kGetRandom, attr::kEncrypt, false},
      {"PCR_Read (audit)", cc::kPcrRead, attr::kAudit | attr::kContinueSession, false},
  };
  auto start = std::chrono::steady_clock::now();
  // command -> "command"/"response" -> outcome -> count
  std::map<std::string, std::map<std::string, std::map<std::string, size_t>>> tally;
  std::map<std::string, std::map<std::string, size_t>> tpm_codes;  // command -> TPM rc -> count
  size_t total = 0, successes = 0, accepted_mutations = 0;
  expected_pcr_ = read_pcr();

  for (const Target& t : targets) {
    size_t command_size = 0, response_size = 0;
    ASSERT_NO_FATAL_FAILURE(measure(t, &command_size, &response_size));

    // Every mutation, as (where, fault, label).
    struct Mutation {
      bool on_command;
      Fault fault;
      std::string label;
    };
    std::vector<Mutation> mutations;
    for (size_t pos = 0; pos < command_size; ++pos) {
      for (uint8_t p : kPatterns) {
        mutations.push_back({true, Fault::flip_command(pos, p), fmt::format("command[{}]^=0x{:02x}", pos, p)});
      }
    }
    for (size_t pos = 0; pos < response_size; ++pos) {
      for (uint8_t p : kPatterns) {
        mutations.push_back({false, Fault::flip_response(pos, p), fmt::format("response[{}]^=0x{:02x}", pos, p)});
      }
    }
    for (size_t n = 0; n < response_size; ++n) {
      mutations.push_back({false, Fault::truncate_response(n), fmt::format("response truncated to {}", n)});
    }
    mutations.push_back({false, Fault::append_response({0x00}), "response + 00"});
    mutations.push_back({false, Fault::append_response(Bytes(32, 0xa5)), "response + 32 bytes"});

    uint64_t counter = 0;
    for (const Mutation& m : mutations) {
      Bytes before = expected_pcr_;
      Bytes digest = sha256(be32(static_cast<uint32_t>(++counter)), as_bytes(t.name));
      FaultCounters c0 = faults_->counters();
      Outcome o = run_once(t, m.fault, digest);
      if (HasFatalFailure()) return;
      const FaultCounters& c1 = faults_->counters();
      size_t applied = (c1.command_flips - c0.command_flips) + (c1.response_flips - c0.response_flips) +
                       (c1.truncated - c0.truncated) + (c1.appended - c0.appended);
      ASSERT_EQ(applied, 1u) << t.name << " " << m.label << ": the mutation was not applied";
      ++total;

      std::string outcome = o.status.ok() ? "SUCCESS" : kind_label(o.status.error().kind());
      tally[t.name][m.on_command ? "command" : "response"][outcome]++;
      if (!o.status.ok() && o.status.error().kind() == ErrorKind::kTpm) {
        tpm_codes[t.name][describe_rc(o.status.error().tpm_rc())]++;
      }
      if (o.status.ok()) {
        ++successes;
        ADD_FAILURE() << t.name << " " << m.label << ": succeeded despite the mutation";
      } else {
        ErrorKind k = o.status.error().kind();
        EXPECT_TRUE(k == ErrorKind::kIntegrity || k == ErrorKind::kTpm || k == ErrorKind::kParse)
            << t.name << " " << m.label << ": unexpected error " << o.status.error().message();
      }
      if (m.on_command && o.tpm_rc == rc::kSuccess) {
        // The TPM executed a command an interposer altered.
        ++accepted_mutations;
        ADD_FAILURE() << t.name << " " << m.label << ": the TPM accepted the mutated command ("
                      << (o.status.ok() ? "success" : o.status.error().message()) << ")";
      }
      if (!m.on_command) {
        EXPECT_EQ(o.tpm_rc, std::optional<uint32_t>(rc::kSuccess)) << t.name << " " << m.label;
      }

      // The PCR moved exactly when the TPM executed a PCR_Extend.
      if (t.extends_pcr && o.tpm_rc == rc::kSuccess) expected_pcr_ = sha256(before, digest);
      Bytes now = read_pcr();
      if (now != expected_pcr_) {
        ADD_FAILURE() << t.name << " " << m.label << ": PCR " << kPcr << " is " << to_hex(now) << ", expected "
                      << to_hex(expected_pcr_) << " (TPM rc "
                      << (o.tpm_rc ? describe_rc(*o.tpm_rc) : std::string("none")) << ")";
        expected_pcr_ = now;  // one report per divergence
      }
      ASSERT_NO_FATAL_FAILURE(expect_no_handles_left(t.name + " " + m.label));
    }
  }

  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "tamper: " << total << " mutations in " << fmt::format("{:.1f}", seconds) << " s\n";
  for (const auto& [command, by_side] : tally) {
    for (const auto& [side, by_outcome] : by_side) {
      std::string line;
      size_t sum = 0;
      for (const auto& [outcome, n] : by_outcome) {
        line += fmt::format(" {}={}", outcome, n);
        sum += n;
        RecordProperty(fmt::format("{} {} {}", command, side, outcome), std::to_string(n));
      }
      std::cout << fmt::format("  {:<20} {:<8} {:>5}:{}\n", command, side, sum, line);
    }
    std::string codes;
    for (const auto& [code, n] : tpm_codes[command]) codes += fmt::format(" {}={}", code, n);
    std::cout << fmt::format("  {:<20} TPM codes:{}\n", command, codes);
  }
  RecordProperty("mutations", std::to_string(total));
  EXPECT_GE(total, 10000u);
  EXPECT_EQ(successes, 0u);
  EXPECT_EQ(accepted_mutations, 0u);
}

// StartAuthSession travels without any session, and its `symmetric` field
// enters neither the session key nor any HMAC: an interposer who rewrites
// AES-128-CFB into AES-256-CFB (two bits) makes the TPM decrypt command
// parameters and encrypt response parameters with another cipher while every
// HMAC still verifies (they cover ciphertext). The client then returns
// success with data the TPM never produced (here: a wrong digest), and the
// TPM acted on parameters the client never sent. SessionFactory::start
// detects it with a known-answer Hash round trip on sessions that carry
// decrypt/encrypt.
TEST_P(TamperTest, RewrittenSessionCipherIsDetected) {
  faults_->set_hook([](size_t, uint32_t code, ByteView command) {
    if (code != cc::kStartAuthSession || command.size() < 8) return Fault::pass();
    // ... symmetric (algorithm, keyBits, mode) || authHash ends the command.
    size_t key_bits = command.size() - 6;
    Fault f;
    f.command_flips = {{key_bits, 0x01}, {key_bits + 1, 0x80}};  // 0x0080 -> 0x0100
    return f;
  });
  auto s = factory_->start(attr::kDecrypt | attr::kEncrypt | attr::kContinueSession);
  faults_->set_hook(nullptr);
  EXPECT_EQ(faults_->counters().command_flips, 2u);
  // The factory's cipher check catches it before the session is used.
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind(), ErrorKind::kIntegrity) << s.error().message();
}

INSTANTIATE_TEST_SUITE_P(Embedded, TamperTest, ::testing::Values(testing::TpmKind::kEmbedded),
                         testing::tpm_kind_param_name);

}  // namespace
}  // namespace tpmsec
