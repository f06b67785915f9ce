// ftrace function_graph import: the seed thread's two SLB9670 captures give
// back their figures, a generated capture exercises every column and line
// shape, malformed captures are refused with their line, and the result is a
// tpmsec-bench/1 document that profile from-bench accepts.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/json_schema.h"
#include "tpmsec/measure/ftrace_import.h"
#include "tpmsec/measure/profile_from_bench.h"

namespace tpmsec {
namespace {

std::string capture_text(const std::string& name) {
  std::ifstream in(std::string(TPMSEC_TEST_DATA) + "/ftrace/" + name);
  EXPECT_TRUE(in) << name;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

FtraceCapture parse(const std::string& name) {
  auto c = parse_function_graph(capture_text(name), name);
  EXPECT_TRUE(c.ok()) << c.error().message();
  return c.ok() ? *c : FtraceCapture{};
}

Result<BenchResult> import(const std::vector<std::string>& names) {
  std::vector<FtraceCapture> captures;
  for (const auto& n : names) captures.push_back(parse(n));
  FtraceImportOptions options;
  options.label = "IFX SLB9670 (seed thread)";
  options.manufacturer = "IFX";
  options.date = "2024-09-12T13:26:01Z";
  return bench_from_ftrace(captures, options);
}

const StrategyResult* strategy(const BenchResult& r, StrategyKind k) {
  for (const auto& s : r.strategies) {
    if (s.kind == k) return &s;
  }
  return nullptr;
}

const PrimitiveResult* primitive(const BenchResult& r, const std::string& name) {
  for (const auto& p : r.primitives) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

double ms(const TraceRecord& t) { return static_cast<double>(t.duration_ns) / 1e6; }

TEST(FtraceParse, SeedCaptureTree) {
  FtraceCapture c = parse("slb9670-hmac.txt");
  ASSERT_EQ(c.calls.size(), 1u);
  const FtraceCall& extend = c.calls[0];
  EXPECT_EQ(extend.function, "tpm2_pcr_extend");
  EXPECT_EQ(extend.cpu, 1);
  EXPECT_EQ(extend.line, 5u);
  EXPECT_DOUBLE_EQ(extend.duration_us, 151171.0);
  ASSERT_EQ(extend.children.size(), 5u);
  EXPECT_EQ(extend.children[0].function, "tpm2_start_auth_session");
  EXPECT_DOUBLE_EQ(extend.children[0].duration_us, 126795.1);
  ASSERT_EQ(extend.children[0].children.size(), 3u);
  EXPECT_DOUBLE_EQ(extend.children[0].children[1].duration_us, 84746.51);
  EXPECT_EQ(extend.children[3].function, "tpm_transmit_cmd");
  EXPECT_FALSE(extend.start_s.has_value());
}

TEST(FtraceImport, SeedHmacExtendIsPerCommand) {
  auto r = import({"slb9670-hmac.txt"});
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->strategies.size(), 1u);
  const StrategyResult* s = strategy(*r, StrategyKind::kPerCommand);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->extends.size(), 1u);
  const Sample& e = s->extends[0];
  EXPECT_DOUBLE_EQ(e.total_ms, 151.171);
  ASSERT_EQ(e.commands.size(), 4u);
  EXPECT_EQ(command_label(e.commands[0].shape), "ContextLoad (object)");
  EXPECT_EQ(command_label(e.commands[1].shape), "StartAuthSession (ECC salt)");
  EXPECT_EQ(command_label(e.commands[2].shape), "FlushContext (object)");
  EXPECT_EQ(command_label(e.commands[3].shape), "PCR_Extend (HMAC session)");
  EXPECT_NEAR(ms(e.commands[0]), 36.97699, 1e-9);
  EXPECT_NEAR(ms(e.commands[1]), 84.74651, 1e-9);
  EXPECT_NEAR(ms(e.commands[2]), 3.195083, 1e-9);
  EXPECT_NEAR(ms(e.commands[3]), 24.35646, 1e-9);
  EXPECT_NEAR(e.tpm_ms, 36.97699 + 84.74651 + 3.195083 + 24.35646, 1e-9);
  EXPECT_NEAR(e.host_ms, 151.171 - e.tpm_ms, 1e-9);
  // Commands sit where the graph puts them: PCR_Extend after the session start and the two helpers.
  EXPECT_EQ(e.commands[3].start_ns - e.start_ns, std::llround((126795.1 + 2.254 + 3.546) * 1e3));
  EXPECT_DOUBLE_EQ(s->per_extend_ms.median, 151.171);
  EXPECT_EQ(s->per_extend_ms.n, 1u);
  EXPECT_DOUBLE_EQ(s->tpm_commands_per_extend, 4.0);

  ASSERT_NE(primitive(*r, "ContextLoad (null key)"), nullptr);
  EXPECT_NEAR(primitive(*r, "StartAuthSession (ECC salt)")->tpm_ms.median, 84.74651, 1e-9);
  EXPECT_NEAR(primitive(*r, "PCR_Extend (HMAC session)")->tpm_ms.median, 24.35646, 1e-9);

  std::string graph = function_graph(*s);
  EXPECT_NE(graph.find("tpm2_start_auth_session() {"), std::string::npos) << graph;
  EXPECT_NE(graph.find("151171.000 us |  }"), std::string::npos) << graph;
}

TEST(FtraceImport, SeedPlainExtend) {
  auto r = import({"slb9670-nohmac.txt"});
  ASSERT_TRUE(r.ok()) << r.error().message();
  const StrategyResult* s = strategy(*r, StrategyKind::kPlain);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->extends.size(), 1u);
  EXPECT_DOUBLE_EQ(s->extends[0].total_ms, 6.415012);
  ASSERT_EQ(s->extends[0].commands.size(), 1u);
  EXPECT_EQ(command_label(s->extends[0].commands[0].shape), "PCR_Extend (password)");
  EXPECT_NEAR(ms(s->extends[0].commands[0]), 6.360029, 1e-9);
  EXPECT_DOUBLE_EQ(s->ratio_to_plain, 1.0);
}

TEST(FtraceImport, BothSeedCapturesGiveTheRatioAndAValidResult) {
  auto r = import({"slb9670-nohmac.txt", "slb9670-hmac.txt"});
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->strategies.size(), 2u);
  EXPECT_EQ(r->strategies[0].kind, StrategyKind::kPerCommand);  // report order
  EXPECT_EQ(r->strategies[1].kind, StrategyKind::kPlain);
  EXPECT_NEAR(r->strategies[0].ratio_to_plain, 151.171 / 6.415012, 1e-9);
  EXPECT_NE(r->recommendation.find("per-command"), std::string::npos) << r->recommendation;

  nlohmann::json j = bench_json(*r);
  std::ifstream in(std::string(TPMSEC_DATA_DIR) + "/schema/bench.schema.json");
  auto errors = testing::validate_json(nlohmann::json::parse(in), j);
  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(j["clock"], "ftrace");
  EXPECT_EQ(j["tpm"]["emulated"], false);
  EXPECT_EQ(j["tpm"]["imported"], "ftrace");
  EXPECT_EQ(j["tpm"]["label"], "IFX SLB9670 (seed thread)");
  EXPECT_EQ(j["transport"], "ftrace:slb9670-nohmac.txt,slb9670-hmac.txt");

  auto profile = profile_from_bench(j, "slb9670-ftrace", "import");
  ASSERT_TRUE(profile.ok()) << profile.error().message();
  EXPECT_NEAR(profile->commands.at("PCR_Extend").ms, 6.360029, 1e-9);
  EXPECT_EQ(profile->commands.at("PCR_Extend").tag, 'M');
  EXPECT_NEAR(profile->commands.at("ContextLoad.object").ms, 36.97699, 1e-9);
  EXPECT_NEAR(profile->commands.at("StartAuthSession.ecc").ms, 84.74651, 1e-9);
  EXPECT_NEAR(profile->hmac_session.ms, 24.35646 - 6.360029, 1e-9);
  EXPECT_EQ(profile->commands.at("PCR_Read").tag, 'E');

  std::string text = bench_text(*r);
  EXPECT_NE(text.find("TPM        IFX SLB9670 (seed thread)  [imported from ftrace"), std::string::npos) << text;
}

TEST(FtraceImport, ProfileNeedsAManufacturer) {
  auto c = parse("slb9670-hmac.txt");
  FtraceImportOptions options;
  auto r = bench_from_ftrace({parse("slb9670-nohmac.txt"), c}, options);
  ASSERT_TRUE(r.ok());
  auto profile = profile_from_bench(bench_json(*r), "x", "anonymous");
  ASSERT_FALSE(profile.ok());
  EXPECT_NE(profile.error().message().find("--manufacturer"), std::string::npos) << profile.error().message();
  options.manufacturer = "IFX SLB";
  EXPECT_FALSE(bench_from_ftrace({c}, options).ok());
}

TEST(FtraceImport, ProfileNeedsBothExtendKinds) {
  auto r = import({"slb9670-hmac.txt"});
  ASSERT_TRUE(r.ok());
  auto profile = profile_from_bench(bench_json(*r), "x", "hmac-only");
  ASSERT_FALSE(profile.ok());
  EXPECT_NE(profile.error().message().find("PCR_Extend (password)"), std::string::npos);
}

TEST(FtraceImport, GeneratedMultiExtendCapture) {
  FtraceCapture c = parse("multi-extend.txt");
  ASSERT_EQ(c.calls.size(), 8u);  // 7 extends and a get_random, in the order they started
  EXPECT_EQ(c.calls[0].cpu, 0);
  EXPECT_EQ(c.calls[1].cpu, 1);  // CPU 1's extend started inside CPU 0's first
  ASSERT_TRUE(c.calls[0].start_s.has_value());
  EXPECT_NEAR(*c.calls[0].start_s, 100.000001, 1e-9);

  auto r = import({"multi-extend.txt"});
  ASSERT_TRUE(r.ok()) << r.error().message();
  const StrategyResult* per_command = strategy(*r, StrategyKind::kPerCommand);
  const StrategyResult* resident = strategy(*r, StrategyKind::kResident);
  const StrategyResult* plain = strategy(*r, StrategyKind::kPlain);
  ASSERT_TRUE(per_command && resident && plain);
  EXPECT_EQ(per_command->extends.size(), 3u);
  EXPECT_EQ(resident->extends.size(), 2u);
  EXPECT_EQ(plain->extends.size(), 2u);
  EXPECT_DOUBLE_EQ(per_command->per_extend_ms.median, 150.1);
  EXPECT_DOUBLE_EQ(resident->per_extend_ms.median, 24.7);
  EXPECT_DOUBLE_EQ(plain->per_extend_ms.median, 6.4);  // 6.35 ms and "6.450 ms"
  EXPECT_DOUBLE_EQ(plain->per_extend_ms.max, 6.45);
  EXPECT_DOUBLE_EQ(resident->tpm_commands_per_extend, 1.0);
  EXPECT_NEAR(per_command->ratio_to_plain, 150.1 / 6.4, 1e-9);
  EXPECT_NEAR(resident->ratio_to_plain, 24.7 / 6.4, 1e-9);
  EXPECT_NE(r->recommendation.find("resident"), std::string::npos) << r->recommendation;
  // The abstime column places each extend.
  EXPECT_EQ(per_command->extends[0].start_ns, 100000001000);

  // PCR_Extend with HMAC: three per-command and two resident extends.
  const PrimitiveResult* hmac = primitive(*r, "PCR_Extend (HMAC session)");
  ASSERT_NE(hmac, nullptr);
  EXPECT_EQ(hmac->tpm_ms.n, 5u);
  EXPECT_DOUBLE_EQ(hmac->tpm_ms.median, 24.5);
  // tpm2_get_random's session start counts too; its GetRandom is a primitive only.
  EXPECT_EQ(primitive(*r, "ContextLoad (null key)")->tpm_ms.n, 4u);
  ASSERT_NE(primitive(*r, "GetRandom (HMAC session)"), nullptr);
  EXPECT_DOUBLE_EQ(primitive(*r, "GetRandom (HMAC session)")->tpm_ms.median, 5.0);
}

// Linux 6.12.118 with CONFIG_TCG_TPM2_HMAC (bench/kernel/build-hmac, its
// trace under bench/kernel/run): tpm2_start_auth_session runs on every extend
// but returns at once while the session is active, sending nothing. That is
// the resident session, not one started per extend.
TEST(FtraceImport, ASessionStartThatSendsNothingIsResident) {
  const std::string text =
      "# tracer: function_graph\n#\n"
      " 0)               |  tpm2_pcr_extend() {\n"
      " 0)   6.753 us    |    tpm2_start_auth_session();\n"
      " 0) + 16.231 us   |    tpm_buf_append_hmac_session();\n"
      " 0) + 43.633 us   |    tpm_buf_fill_hmac_session();\n"
      " 0) * 27492.40 us |    tpm_transmit_cmd();\n"
      " 0) + 73.389 us   |    tpm_buf_check_hmac_response();\n"
      " 0) * 27850.68 us |  }\n";
  auto c = parse_function_graph(text, "hmac-6.12.txt");
  ASSERT_TRUE(c.ok()) << c.error().message();
  auto r = bench_from_ftrace({*c}, FtraceImportOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->strategies.size(), 1u);
  EXPECT_EQ(r->strategies[0].kind, StrategyKind::kResident);
  EXPECT_DOUBLE_EQ(r->strategies[0].tpm_commands_per_extend, 1.0);
  const PrimitiveResult* hmac = primitive(*r, "PCR_Extend (HMAC session)");
  ASSERT_NE(hmac, nullptr);
  EXPECT_DOUBLE_EQ(hmac->tpm_ms.median, 27.4924);
  EXPECT_EQ(primitive(*r, "StartAuthSession (ECC salt)"), nullptr);
}

// The same kernel traced from boot (bench/kernel/run --trace-boot): the IMA
// boot aggregate's extend starts the session (ContextLoad of the null key,
// StartAuthSession, FlushContext), every later one finds it active. The first
// is the resident session's first extend, not an extend of a session per
// extend (slb9670, 2026-12-06; the first two extends of that trace).
TEST(FtraceImport, TheBootExtendThatStartsAKeptSessionIsResidentsFirst) {
  const std::string text =
      "# tracer: function_graph\n#\n"
      " 0)               |  tpm2_pcr_extend() {\n"
      " 0)               |    tpm2_start_auth_session() {\n"
      " 0)               |      tpm2_load_context() {\n"
      " 0) * 37684.75 us |        tpm_transmit_cmd();\n"
      " 0) * 38038.12 us |      }\n"
      " 0) * 86202.46 us |      tpm_transmit_cmd();\n"
      " 0)               |      tpm2_flush_context() {\n"
      " 0) # 3791.923 us |        tpm_transmit_cmd();\n"
      " 0) # 3855.717 us |      }\n"
      " 0) @ 237837.9 us |    }\n"
      " 0) ! 147.074 us  |    tpm_buf_append_hmac_session();\n"
      " 0) ! 360.147 us  |    tpm_buf_fill_hmac_session();\n"
      " 0) * 26927.02 us |    tpm_transmit_cmd();\n"
      " 0) ! 374.372 us  |    tpm_buf_check_hmac_response();\n"
      " 0) @ 266577.6 us |  }\n"
      " 0)               |  tpm2_pcr_extend() {\n"
      " 0) + 28.154 us   |    tpm2_start_auth_session();\n"
      " 0) + 12.864 us   |    tpm_buf_append_hmac_session();\n"
      " 0) + 43.533 us   |    tpm_buf_fill_hmac_session();\n"
      " 0) * 33073.38 us |    tpm_transmit_cmd();\n"
      " 0) + 46.058 us   |    tpm_buf_check_hmac_response();\n"
      " 0) * 33371.69 us |  }\n";
  auto c = parse_function_graph(text, "hmac-6.12-boot.txt");
  ASSERT_TRUE(c.ok()) << c.error().message();
  auto r = bench_from_ftrace({*c}, FtraceImportOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->strategies.size(), 1u);
  const StrategyResult& s = r->strategies[0];
  EXPECT_EQ(s.kind, StrategyKind::kResident);
  ASSERT_EQ(s.extends.size(), 2u);
  EXPECT_DOUBLE_EQ(s.first_extend_ms, 266.5776);
  EXPECT_EQ(s.first_extend_commands, 4u);
  // The thread's rows, as this kernel's tpm_transmit_cmd saw them.
  ASSERT_NE(primitive(*r, "ContextLoad (null key)"), nullptr);
  EXPECT_DOUBLE_EQ(primitive(*r, "ContextLoad (null key)")->tpm_ms.median, 37.68475);
  ASSERT_NE(primitive(*r, "StartAuthSession (ECC salt)"), nullptr);
  EXPECT_DOUBLE_EQ(primitive(*r, "StartAuthSession (ECC salt)")->tpm_ms.median, 86.20246);
  ASSERT_NE(primitive(*r, "FlushContext"), nullptr);
  EXPECT_DOUBLE_EQ(primitive(*r, "FlushContext")->tpm_ms.median, 3.791923);
  EXPECT_EQ(primitive(*r, "PCR_Extend (HMAC session)")->tpm_ms.n, 2u);
}

struct Malformed {
  const char* name;
  std::string text;
  size_t line;
  const char* says;
};

class FtraceMalformed : public ::testing::TestWithParam<Malformed> {};

TEST_P(FtraceMalformed, RefusedWithFileAndLine) {
  const Malformed& m = GetParam();
  auto c = parse_function_graph(m.text, "bad.txt");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().kind(), ErrorKind::kParse);
  EXPECT_NE(c.error().message().find("bad.txt:" + std::to_string(m.line) + ":"), std::string::npos)
      << c.error().message();
  EXPECT_NE(c.error().message().find(m.says), std::string::npos) << c.error().message();
}

const std::string kHeader = "# tracer: function_graph\n#\n";
INSTANTIATE_TEST_SUITE_P(
    Lines, FtraceMalformed,
    ::testing::Values(
        Malformed{"Garbage", kHeader + " 0)               |  tpm2_pcr_extend() {\nhello world\n", 4, "CPU column"},
        Malformed{"BadDuration", kHeader + " 0) # 63x0.029 us |  tpm_transmit_cmd();\n", 3, "duration"},
        Malformed{"BadUnit", kHeader + " 0) # 6360.029 yr |  tpm_transmit_cmd();\n", 3, "duration"},
        Malformed{"LeafWithoutDuration", kHeader + " 0)               |  tpm_transmit_cmd();\n", 3,
                  "without a duration"},
        Malformed{"UnmatchedClose", kHeader + "\n 0) # 6415.012 us |  }\n", 4, "closes no call"},
        Malformed{"NeverClosed", kHeader + " 0)               |  tpm2_pcr_extend() {\n 0)   1.1 us | x();\n", 3,
                  "never closed"},
        Malformed{"CloseOnOtherCpu", kHeader + " 0)               |  tpm2_pcr_extend() {\n 1) # 6415.012 us |  }\n", 4,
                  "CPU 1"},
        Malformed{"NotACall", kHeader + " 0)   1.112 us    |    tpm_buf_append_hmac_session\n", 3, "func()"},
        Malformed{"BadName", kHeader + " 0)   1.112 us    |    rm -rf();\n", 3, "function name"},
        Malformed{"HugeDuration", kHeader + " 0) $ 99999999999999999 us |  x();\n", 3, "duration"},
        Malformed{"NoBar", kHeader + " 0) tpm2_pcr_extend() {\n", 3, "DURATION"}),
    [](const ::testing::TestParamInfo<Malformed>& i) { return std::string(i.param.name); });

TEST(FtraceParse, AcceptsMailedCapturesAndSkipsNoise) {
  // No-break spaces and CRLF (a capture pasted from mail), blank lines, a
  // funcgraph-proc context switch, interrupt arrows, comments.
  std::string text =
      "# tracer: function_graph\r\n\r\n"
      "\xC2\xA0"
      "0)\xC2\xA0\xC2\xA0\xC2\xA0\xC2\xA0\xC2\xA0\xC2\xA0\xC2\xA0\xC2\xA0 |  tpm2_pcr_extend() {\r\n"
      " 0)   ==========> |\n"
      " 0)   <========== |\n"
      " ------------------------------------------\n"
      " 0)    bash-1234    =>  kworker-56  \n"
      " 0)               |  /* a trace_printk */\n"
      " 0) # 6.360029 ms |    tpm_transmit_cmd(); /* = 0x0 */\n"
      "\n"
      " 0) # 6415.012 us |  } /* tpm2_pcr_extend */\n";
  auto c = parse_function_graph(text, "mail.txt");
  ASSERT_TRUE(c.ok()) << c.error().message();
  ASSERT_EQ(c->calls.size(), 1u);
  ASSERT_EQ(c->calls[0].children.size(), 1u);
  EXPECT_NEAR(c->calls[0].children[0].duration_us, 6360.029, 1e-9);
}

TEST(FtraceImport, NoTpmCommandsIsAnError) {
  auto c = parse_function_graph(kHeader + " 0)   1.112 us    |  schedule();\n", "idle.txt");
  ASSERT_TRUE(c.ok());
  auto r = bench_from_ftrace({*c}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("idle.txt: no TPM commands"), std::string::npos);
}

}  // namespace
}  // namespace tpmsec
