// Latency emulation: the shipped profiles load, validate and round-trip;
// malformed profiles are refused with the file and the problem; the model is
// deterministic; real commands from the embedded TPM are classified into the
// right variants; and the SLB9670 profile reproduces the seed thread's
// figures in virtual time when real command sequences run through it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "testing/transport_doubles.h"
#include "tpmsec/emulation/command_variant.h"
#include "tpmsec/emulation/emulated_identity.h"
#include "tpmsec/emulation/latency_transport.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/emulation/profile_summary.h"
#include "tpmsec/pcr.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/tpm_info.h"
#include "tpmsec/transport/transports.h"

namespace tpmsec {
namespace {

using nlohmann::json;

const std::vector<std::string> kShipped = {"amd-ftpm-3",    "attpm20p",    "intel-ptt-11", "intel-ptt-400",
                                           "intel-ptt-600", "jetson-ftpm", "npct650",      "npct750",
                                           "ns350",         "pluton",      "slb9665",      "slb9670",
                                           "slb9672",       "slb9673",     "st33ktpm2x",   "st33tphf2x"};

LatencyProfile must_load(const std::string& name) {
  auto p = load_profile(name);
  EXPECT_TRUE(p.ok()) << p.error().message();
  return p.ok() ? *p : LatencyProfile{};
}

bool within(double value, double target, double fraction) {
  return value >= target * (1 - fraction) && value <= target * (1 + fraction);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// ------------------------------------------------------------ shipped profiles

TEST(LatencyProfiles, EveryShippedProfileLoadsAndRoundTrips) {
  auto all = load_all_profiles();
  ASSERT_TRUE(all.ok()) << all.error().message();
  std::set<std::string> ids;
  for (const LatencyProfile& p : *all) {
    ids.insert(p.id);
    SCOPED_TRACE(p.id);
    EXPECT_EQ(profile_path(p.id), profiles_dir() + "/" + p.id + ".json");
    EXPECT_FALSE(p.name.empty());
    for (std::string_view v : kRequiredVariants) EXPECT_TRUE(p.commands.count(std::string(v))) << v;
    for (const auto& [variant, value] : p.commands) {
      EXPECT_TRUE(is_valid_tag(value.tag)) << variant;
      EXPECT_FALSE(value.source.empty()) << variant;
      EXPECT_FALSE(value.note.empty()) << variant;
      // E values say which rule made them.
      if (value.tag == kTagEstimate) {
        EXPECT_NE(value.note.find("rule"), std::string::npos) << variant;
      }
      EXPECT_LE(value.jitter_ms, value.ms * 0.3 + 1e-3) << variant;
    }
    auto again = profile_from_json(to_json(p), "round trip");
    ASSERT_TRUE(again.ok()) << again.error().message();
    EXPECT_EQ(*again, p);
    // And through text.
    auto reparsed = parse_profile(to_json(p).dump(2), "round trip text");
    ASSERT_TRUE(reparsed.ok()) << reparsed.error().message();
    EXPECT_EQ(*reparsed, p);
    ProfileSummary s = summarize(p);
    EXPECT_EQ(s.values, p.commands.size() + 2 + p.tail_events.size());
    EXPECT_GE(s.measured_or_derived(), 1u);  // every shipped profile has at least GetRandom (D)
    EXPECT_TRUE(provenance_warning(p).empty());
  }
  for (const std::string& id : kShipped) EXPECT_TRUE(ids.count(id)) << id;
}

TEST(LatencyProfiles, Slb9670ImpliesTheSeedThreadFigures) {
  LatencyProfile p = must_load("slb9670");
  EXPECT_EQ(p.commands.at("PCR_Extend").tag, kTagMeasured);
  EXPECT_DOUBLE_EQ(p.commands.at("PCR_Extend").ms, 6.36);
  EXPECT_DOUBLE_EQ(p.commands.at("ContextLoad.object").ms, 36.98);
  EXPECT_DOUBLE_EQ(p.commands.at("StartAuthSession.ecc").ms, 84.75);
  EXPECT_DOUBLE_EQ(p.commands.at("FlushContext").ms, 3.20);
  EXPECT_EQ(p.hmac_session.tag, kTagDerived);
  EXPECT_EQ(p.commands.at("ContextLoad.session").tag, kTagEstimate);
  EXPECT_EQ(p.commands.at("ContextSave.session").tag, kTagEstimate);
  ExtendFigures f = extend_figures(p);
  EXPECT_NEAR(f.plain_ms, 6.36, 1e-9);
  EXPECT_NEAR(f.hmac_ms, 24.36, 1e-9);
  EXPECT_NEAR(f.per_command_ms, 149.29, 1e-9);
  EXPECT_TRUE(within(f.per_command_ms, 151.2, 0.05));
  // Tail events exist but stay off by default so the figures above hold.
  ASSERT_FALSE(p.tail_events.empty());
  for (const TailEvent& t : p.tail_events) {
    if (t.variant.rfind("Context", 0) == 0) {
      EXPECT_FALSE(t.enabled);
      EXPECT_DOUBLE_EQ(t.extra_ms, 2250);
    }
  }
  EXPECT_EQ(p.slots.max_loaded_sessions, 3u);
}

TEST(LatencyProfiles, UnknownNameIsAUsageErrorListingTheKnownOnes) {
  auto p = load_profile("no-such-tpm");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().kind(), ErrorKind::kUsage);
  EXPECT_NE(p.error().message().find("unknown profile 'no-such-tpm'"), std::string::npos);
  EXPECT_NE(p.error().message().find("slb9670"), std::string::npos);
}

// ------------------------------------------------------------ malformed profiles

class MalformedProfile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("latency_model_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ifstream in(profile_path("slb9670"));
    base_ = json::parse(in);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `text` to a file and loads it; returns the error message (empty if it loaded).
  std::string load_text(const std::string& text, const std::string& name = "bad.json") {
    path_ = (dir_ / name).string();
    std::ofstream(path_) << text;
    auto p = load_profile(path_);
    if (p.ok()) return "";
    EXPECT_EQ(p.error().kind(), ErrorKind::kParse) << p.error().message();
    return p.error().message();
  }
  std::string load_json(const json& j) { return load_text(j.dump(2)); }

  std::filesystem::path dir_;
  std::string path_;
  json base_;
};

TEST_F(MalformedProfile, TheBaseLoads) { EXPECT_EQ(load_json(base_), ""); }

TEST_F(MalformedProfile, BadJsonNamesFileAndLine) {
  std::string msg = load_text("{\n  \"id\": \"x\",\n  \"name\": oops\n}\n");
  EXPECT_NE(msg.find(path_), std::string::npos) << msg;
  EXPECT_NE(msg.find("bad JSON at line 3"), std::string::npos) << msg;
}

TEST_F(MalformedProfile, MissingTopLevelKey) {
  base_.erase("hmac_session");
  std::string msg = load_json(base_);
  EXPECT_NE(msg.find(path_), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing key 'hmac_session'"), std::string::npos) << msg;
}

TEST_F(MalformedProfile, MissingVariant) {
  base_["commands"].erase("ContextLoad.session");
  std::string msg = load_json(base_);
  EXPECT_NE(msg.find("commands: missing key 'ContextLoad.session'"), std::string::npos) << msg;
}

TEST_F(MalformedProfile, MissingTagOrSource) {
  base_["commands"]["PCR_Extend"].erase("tag");
  EXPECT_NE(load_json(base_).find("commands.PCR_Extend: missing key 'tag'"), std::string::npos);
  base_ = json::parse(std::ifstream(profile_path("slb9670")));
  base_["hmac_session"]["source"] = "";
  EXPECT_NE(load_json(base_).find("hmac_session.source: empty source"), std::string::npos);
}

TEST_F(MalformedProfile, NegativeLatency) {
  base_["commands"]["PCR_Extend"]["ms"] = -1.5;
  std::string msg = load_json(base_);
  EXPECT_NE(msg.find(path_), std::string::npos) << msg;
  EXPECT_NE(msg.find("commands.PCR_Extend.ms: negative latency -1.5"), std::string::npos) << msg;
}

TEST_F(MalformedProfile, UnknownTag) {
  base_["commands"]["GetRandom"]["tag"] = "X";
  std::string msg = load_json(base_);
  EXPECT_NE(msg.find("commands.GetRandom.tag: unknown tag 'X'"), std::string::npos) << msg;
}

TEST_F(MalformedProfile, WrongTypesUnknownKeysAndBadProbabilities) {
  base_["commands"]["GetRandom"]["ms"] = "2.23";
  EXPECT_NE(load_json(base_).find("commands.GetRandom.ms: expected a number, got string"), std::string::npos);
  base_ = json::parse(std::ifstream(profile_path("slb9670")));
  base_["commands"]["GetRandom"]["jiter_ms"] = 1;
  EXPECT_NE(load_json(base_).find("commands.GetRandom.jiter_ms: unknown key"), std::string::npos);
  base_ = json::parse(std::ifstream(profile_path("slb9670")));
  base_["tail_events"][0]["probability"] = 1.5;
  EXPECT_NE(load_json(base_).find("tail_events[0].probability: probability 1.5 above 1"), std::string::npos);
  base_ = json::parse(std::ifstream(profile_path("slb9670")));
  base_["seed"] = -3;
  EXPECT_NE(load_json(base_).find("seed: expected an unsigned integer"), std::string::npos);
  base_ = json::parse(std::ifstream(profile_path("slb9670")));
  base_["identity"]["manufacturer"] = "INFINEON";
  EXPECT_NE(load_json(base_).find("identity.manufacturer: 'INFINEON' is longer than 4 bytes"), std::string::npos);
  base_ = json::parse(std::ifstream(profile_path("slb9670")));
  base_["_comment"] = "comments are ignored";
  EXPECT_EQ(load_json(base_), "");
}

TEST_F(MalformedProfile, NotAnObject) {
  EXPECT_NE(load_text("[1, 2]").find("expected an object, got array"), std::string::npos);
}

// ------------------------------------------------------------ the model

CommandShape shape(uint32_t code, bool hmac = false) {
  CommandShape s;
  s.command_code = code;
  s.hmac_session = hmac;
  s.command_bytes = 60;
  s.response_bytes = 40;
  return s;
}

std::vector<CommandShape> sample_sequence() {
  CommandShape load = shape(0x161);
  load.context_handle = 0x80000000;
  CommandShape sas = shape(0x176);
  sas.salted = true;
  sas.first_handle = 0x80000000;
  sas.encrypted_salt_bytes = 68;
  return {load, sas, shape(0x165), shape(0x182, true), shape(0x182), shape(0x17B)};
}

TEST(LatencyModelTest, DeterministicForASeed) {
  LatencyProfile p = must_load("slb9670");
  auto run = [&](std::optional<uint64_t> seed) {
    LatencyModel m(p, ModelOptions{seed, true, 1.0});
    std::vector<double> out;
    for (int i = 0; i < 20; ++i) {
      for (const CommandShape& s : sample_sequence()) out.push_back(m.latency_ms(s));
    }
    return out;
  };
  EXPECT_EQ(run(std::nullopt), run(std::nullopt));
  EXPECT_EQ(run(p.seed), run(std::nullopt));
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));

  LatencyModel m(p);
  double first = m.latency_ms(sample_sequence()[0]);
  m.latency_ms(sample_sequence()[1]);
  m.reseed(p.seed);
  EXPECT_EQ(m.latency_ms(sample_sequence()[0]), first);
}

TEST(LatencyModelTest, ComponentsAddUp) {
  LatencyProfile p = must_load("slb9670");
  LatencyModel exact(p, ModelOptions{std::nullopt, false, 0.0});  // no jitter, no tails
  EXPECT_DOUBLE_EQ(exact.latency_ms(shape(0x182)), 6.36);
  EXPECT_DOUBLE_EQ(exact.latency_ms(shape(0x182, true)), 24.36);
  EXPECT_DOUBLE_EQ(exact.latency_ms(shape(0x17A)), p.commands.at("default").ms);  // GetCapability

  // Parameter encryption: per byte of the parameter areas (approximated).
  CommandShape enc = shape(0x17B, true);
  enc.session_count = 1;
  enc.session_attributes = attr::kEncrypt;
  enc.response_bytes = 10 + 4 + 2 + 32 + 69;  // header, parameterSize, TPM2B of 32 bytes, one auth
  EXPECT_EQ(encrypted_parameter_bytes(enc), 34u);
  ModelledLatency m = exact.model(enc);
  EXPECT_EQ(m.variant, "GetRandom");
  EXPECT_DOUBLE_EQ(m.encryption_ms, 34 * p.param_encryption_per_byte.ms);
  // GetRandom 4.255 ms (M, TPMScan fw 7.85 runs) + the seed's HMAC session 18.0 ms.
  EXPECT_DOUBLE_EQ(m.total_ms, 4.255 + 18.0 + 34 * p.param_encryption_per_byte.ms);

  // Jitter stays around the mean and never makes a latency negative.
  LatencyModel jittery(p, ModelOptions{std::nullopt, false, 50.0});
  for (int i = 0; i < 200; ++i) EXPECT_GE(jittery.latency_ms(shape(0x182)), 0.0);
}

TEST(LatencyModelTest, TailEventsFireOnlyWhenEnabled) {
  LatencyProfile p = must_load("slb9670");
  for (TailEvent& t : p.tail_events) t.probability = 1.0;
  CommandShape load = sample_sequence()[0];
  LatencyModel off(p, ModelOptions{std::nullopt, std::nullopt, 0.0});  // the profile's choice: off
  EXPECT_DOUBLE_EQ(off.latency_ms(load), 36.98);
  LatencyModel on(p, ModelOptions{std::nullopt, true, 0.0});
  ModelledLatency m = on.model(load);
  EXPECT_EQ(m.variant, "ContextLoad.object");
  EXPECT_DOUBLE_EQ(m.tail_ms, 2250);
  EXPECT_DOUBLE_EQ(m.total_ms, 36.98 + 2250);
  EXPECT_DOUBLE_EQ(on.model(shape(0x182)).tail_ms, 0);  // PCR_Extend matches no pattern
}

TEST(LatencyModelTest, ValueLookupFallsBack) {
  LatencyModel m(must_load("slb9670"));
  EXPECT_DOUBLE_EQ(m.value_for("PCR_Extend").ms, 6.36);
  EXPECT_DOUBLE_EQ(m.value_for("CreatePrimary").ms, m.value_for("default").ms);
  EXPECT_DOUBLE_EQ(m.value_for("Unseal").ms, m.value_for("default").ms);
}

// ------------------------------------------------------------ real commands

// The shape and variant of every command a RecordingTransport
// (testing/transport_doubles.h) saw answered. The recorder only observes (as
// TracingTransport measures): the TPM stays in process.
struct Shapes {
  void operator()(ByteView command, const Result<Bytes>& r) {
    if (!r.ok()) return;
    CommandShape s = shape_of(command, *r);
    shapes.push_back(s);
    variants.push_back(variant_of(s));
  }
  void clear() {
    shapes.clear();
    variants.clear();
  }
  std::vector<CommandShape> shapes;
  std::vector<std::string> variants;
};

class EmbeddedTpm : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = open_embedded();
    ASSERT_TRUE(t.ok()) << t.error().message();
    embedded_ = std::move(*t);
  }
  std::unique_ptr<Transport> embedded_;
};

using Variants = std::vector<std::string>;

TEST_F(EmbeddedTpm, VariantOfClassifiesRealCommands) {
  Shapes rec;
  testing::RecordingTransport recorder(*embedded_, [&rec](ByteView c, const Result<Bytes>& r) { rec(c, r); });
  Tpm tpm(recorder);

  auto ecc = SessionFactory::create(tpm, {});
  ASSERT_TRUE(ecc.ok()) << ecc.error().message();
  EXPECT_EQ(rec.variants, (Variants{"CreatePrimary.ecc", "ContextSave.object", "FlushContext"}));
  // The shape carries the key type, so a trace alone classifies CreatePrimary.
  EXPECT_EQ(rec.shapes[0].object_type, alg::kEcc);

  rec.clear();
  auto s = (*ecc)->start(0);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(rec.variants, (Variants{"ContextLoad.object", "StartAuthSession.ecc", "FlushContext"}));
  EXPECT_EQ(rec.shapes[1].encrypted_salt_bytes, 68u);
  rec.clear();
  ASSERT_TRUE(pcr_extend(tpm, alg::kSha256, 16, Bytes(32, 1), Auth{s->get(), {}}).ok());
  ASSERT_EQ(rec.variants, (Variants{"PCR_Extend"}));
  EXPECT_TRUE(rec.shapes[0].hmac_session);

  ProtectionConfig rsa_config;
  rsa_config.salt = SaltKind::kRsa;
  rec.clear();
  auto rsa = SessionFactory::create(tpm, rsa_config);
  ASSERT_TRUE(rsa.ok()) << rsa.error().message();
  EXPECT_EQ(rec.variants, (Variants{"CreatePrimary.rsa", "ContextSave.object", "FlushContext"}));
  rec.clear();
  auto rs = (*rsa)->start(0);
  ASSERT_TRUE(rs.ok()) << rs.error().message();
  EXPECT_EQ(rec.variants, (Variants{"ContextLoad.object", "StartAuthSession.rsa", "FlushContext"}));
  EXPECT_EQ(rec.shapes[1].encrypted_salt_bytes, 256u);
  ASSERT_TRUE((*rs)->flush().ok());

  ProtectionConfig unsalted;
  unsalted.unsalted = true;
  auto plain_factory = SessionFactory::create(tpm, unsalted);
  ASSERT_TRUE(plain_factory.ok());
  rec.clear();
  auto us = (*plain_factory)->start(attr::kContinueSession);
  ASSERT_TRUE(us.ok()) << us.error().message();
  EXPECT_EQ(rec.variants, (Variants{"StartAuthSession.unsalted"}));

  // A session context saved and loaded.
  rec.clear();
  auto ctx = (*us)->save(tpm);
  ASSERT_TRUE(ctx.ok()) << ctx.error().message();
  ASSERT_TRUE((*us)->load(tpm, *ctx).ok());
  EXPECT_EQ(rec.variants, (Variants{"ContextSave.session", "ContextLoad.session"}));

  rec.clear();
  ASSERT_TRUE(tpm.run(cmd::GetRandom{16}).ok());
  ASSERT_TRUE(pcr_read(tpm, alg::kSha256, 16).ok());
  cmd::Hash h;
  h.data.bytes = Bytes(8, 'a');
  h.hash_alg = alg::kSha256;
  h.hierarchy = rh::kNull;
  ASSERT_TRUE(tpm.run(h).ok());
  EXPECT_EQ(rec.variants, (Variants{"GetRandom", "PCR_Read", "Hash"}));
  ASSERT_TRUE((*us)->flush().ok());
}

TEST_F(EmbeddedTpm, EmulatedIdentityIsTheProfilesPartMarkedEmulated) {
  Tpm tpm(*embedded_);
  auto real = read_tpm_info(tpm);
  ASSERT_TRUE(real.ok()) << real.error().message();
  EmulatedIdentity e = emulated_info(must_load("slb9670"), *real);
  EXPECT_TRUE(e.emulated);
  EXPECT_EQ(e.profile, "slb9670");
  EXPECT_EQ(e.info.manufacturer, "IFX");
  EXPECT_EQ(e.info.manufacturer_raw, 0x49465800u);
  EXPECT_EQ(e.info.vendor_raw[0], 0x534C4239u);  // as the seed thread quotes it
  EXPECT_EQ(e.info.vendor_raw[1], 0x36373000u);
  EXPECT_EQ(e.info.vendor(), "SLB9670");
  EXPECT_EQ(e.info.firmware_version(), "7.85");
  EXPECT_EQ(e.info.pcr_banks.size(), real->pcr_banks.size());  // capabilities stay real
  EXPECT_EQ(e.real_manufacturer, real->manufacturer);
  json j = to_json(e);
  EXPECT_EQ(j["emulated"], true);
  EXPECT_EQ(j["vendor"], "SLB9670");
  EXPECT_EQ(j["bus"], "SPI 43 MHz");
  EXPECT_NE(to_text(e).find("emulated"), std::string::npos);
}

// ------------------------------------------------------------ SLB9670 in virtual time

class Slb9670Emulation : public EmbeddedTpm {
 protected:
  void SetUp() override {
    EmbeddedTpm::SetUp();
    if (HasFatalFailure()) return;
    latency_ = std::make_unique<LatencyTransport>(*embedded_, LatencyModel(must_load("slb9670")), clock_);
    tpm_ = std::make_unique<Tpm>(*latency_);
  }
  // Virtual milliseconds `body` takes, and how many commands it sent.
  template <class F>
  double timed(F&& body, size_t* commands = nullptr) {
    size_t before = latency_->commands();
    int64_t start = clock_.now_ns();
    body();
    int64_t end = clock_.now_ns();
    if (commands) *commands = latency_->commands() - before;
    return static_cast<double>(end - start) / 1e6;
  }

  static constexpr int kRuns = 50;
  VirtualClock clock_;
  std::unique_ptr<LatencyTransport> latency_;
  std::unique_ptr<Tpm> tpm_;
};

TEST_F(Slb9670Emulation, DescribesItself) {
  EXPECT_EQ(latency_->describe(), embedded_->describe() + " emulating slb9670");
}

TEST_F(Slb9670Emulation, PerCommandSessionCostsWhatTheSeedMeasured) {
  auto factory = SessionFactory::create(*tpm_, {});
  ASSERT_TRUE(factory.ok()) << factory.error().message();
  std::vector<double> ms;
  int64_t real_start = steady_clock().now_ns();
  for (int i = 0; i < kRuns; ++i) {
    size_t commands = 0;
    ms.push_back(timed(
        [&] {
          auto s = (*factory)->start(0);  // ContextLoad, StartAuthSession, FlushContext
          ASSERT_TRUE(s.ok()) << s.error().message();
          ASSERT_TRUE(pcr_extend(*tpm_, alg::kSha256, 16, Bytes(32, 1), Auth{s->get(), {}}).ok());
        },
        &commands));
    ASSERT_EQ(commands, 4u);
  }
  double real_ms = static_cast<double>(steady_clock().now_ns() - real_start) / 1e6;
  double m = median(ms);
  EXPECT_TRUE(within(m, 151.2, 0.05)) << "median " << m << " ms";
  // The emulated time is the modelled one, not the real one.
  EXPECT_GT(m * kRuns, real_ms);
}

TEST_F(Slb9670Emulation, PlainExtend) {
  std::vector<double> ms;
  for (int i = 0; i < kRuns; ++i) {
    ms.push_back(timed([&] { ASSERT_TRUE(pcr_extend(*tpm_, alg::kSha256, 16, Bytes(32, 2)).ok()); }));
  }
  double m = median(ms);
  EXPECT_TRUE(within(m, 6.4, 0.05)) << "median " << m << " ms";
}

TEST_F(Slb9670Emulation, ResidentSessionExtend) {
  auto factory = SessionFactory::create(*tpm_, {});
  ASSERT_TRUE(factory.ok()) << factory.error().message();
  auto s = (*factory)->start(attr::kContinueSession);
  ASSERT_TRUE(s.ok()) << s.error().message();
  std::vector<double> ms;
  for (int i = 0; i < kRuns; ++i) {
    ms.push_back(timed([&] {
      ASSERT_TRUE(pcr_extend(*tpm_, alg::kSha256, 16, Bytes(32, 3), Auth{s->get(), {}}).ok());
    }));
  }
  double m = median(ms);
  EXPECT_TRUE(within(m, 24.4, 0.05)) << "median " << m << " ms";
  ASSERT_TRUE((*s)->flush().ok());
}

TEST_F(Slb9670Emulation, SavedContextMatchesTheProfilesFigure) {
  auto factory = SessionFactory::create(*tpm_, {});
  ASSERT_TRUE(factory.ok()) << factory.error().message();
  auto s = (*factory)->start(attr::kContinueSession);
  ASSERT_TRUE(s.ok()) << s.error().message();
  auto ctx = (*s)->save(*tpm_);
  ASSERT_TRUE(ctx.ok()) << ctx.error().message();
  std::vector<double> ms;
  for (int i = 0; i < kRuns; ++i) {
    ms.push_back(timed([&] {
      ASSERT_TRUE((*s)->load(*tpm_, *ctx).ok());
      ASSERT_TRUE(pcr_extend(*tpm_, alg::kSha256, 16, Bytes(32, 4), Auth{s->get(), {}}).ok());
      auto saved = (*s)->save(*tpm_);
      ASSERT_TRUE(saved.ok()) << saved.error().message();
      *ctx = std::move(*saved);
    }));
  }
  double m = median(ms);
  EXPECT_TRUE(within(m, extend_figures(latency_->model().profile()).saved_context_ms, 0.05)) << "median " << m;
}

}  // namespace
}  // namespace tpmsec
