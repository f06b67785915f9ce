// TPM strings (transport.h): the swtpm: option handles=private, which says
// the server flushes a connection's handles when it closes; the mssim:
// scheme; and the TPM used when none is given (default_tpm()).
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "support/run_command.h"
#include "testing/transport_doubles.h"
#include "tpmsec/emulation/latency_model.h"
#include "tpmsec/emulation/latency_transport.h"
#include "tpmsec/emulation/slot_limits.h"
#include "tpmsec/tpm_config.h"
#include "tpmsec/transport.h"
#include "tpmsec/transport/clock.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec {
namespace {

using testing::describe;
using testing::run_tpmsec;

TEST(TransportSpec, HandlesPrivateParses) {
  auto spec = parse_transport_spec("swtpm:host=127.0.0.1,port=2321,ctrl=2322,handles=private");
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->scheme, "swtpm");
  EXPECT_EQ(spec->options.at("handles"), "private");
  EXPECT_EQ(spec->options.at("port"), "2321");
  auto mssim = parse_transport_spec("mssim:host=127.0.0.1,port=2321,handles=private");
  ASSERT_TRUE(mssim.ok()) << mssim.error().message();
  EXPECT_EQ(mssim->options.at("handles"), "private");
}

TEST(TransportSpec, HandlesTakesOnlyPrivate) {
  for (const char* text :
       {"swtpm:host=127.0.0.1,port=2321,handles=shared", "swtpm:port=2321,handles=", "swtpm:port=2321,handles=PRIVATE",
        "swtpm:port=2321,handles=private,handles=private", "mssim:port=2321,handles=shared"}) {
    SCOPED_TRACE(text);
    auto spec = parse_transport_spec(text);
    ASSERT_FALSE(spec.ok());
    EXPECT_EQ(spec.error().kind(), ErrorKind::kUsage);
    EXPECT_EQ(spec.error().message().find('\n'), std::string::npos) << spec.error().message();
  }
  auto shared = parse_transport_spec("swtpm:port=2321,handles=shared");
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.error().message().find("handles=private"), std::string::npos) << shared.error().message();
  // Only the swtpm: and mssim: transports take it: /dev/tpmrm0 is recognized by itself.
  for (const char* text : {"device:path=/dev/tpmrm0,handles=private", "embedded:handles=private"}) {
    SCOPED_TRACE(text);
    auto spec = parse_transport_spec(text);
    ASSERT_FALSE(spec.ok());
    EXPECT_EQ(spec.error().kind(), ErrorKind::kUsage);
  }
}

// The CLI refuses a bad value before it connects: exit 2, one line.
TEST(TransportSpec, CliRefusesABadHandlesValue) {
  auto r = run_tpmsec({"pcr", "read", "16", "--tpm", "swtpm:host=127.0.0.1,port=1,handles=shared"});
  EXPECT_EQ(r.exit_code, testing::kExitUsage) << describe(r);
  EXPECT_NE(r.err.find("handles=private"), std::string::npos) << describe(r);
  size_t lines = 0;
  for (char c : r.err) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << describe(r);
  auto help = run_tpmsec({"pcr", "read", "--help"});
  EXPECT_NE(help.out.find("handles=private"), std::string::npos) << help.out;
}

// The order tpm2-tools and systemd pick the host's TPM in: TPMSEC_TPM, then
// TPM2TOOLS_TCTI, then /dev/tpmrm0, then (only then) the embedded simulator.
TEST(DefaultTpm, ChoosesAsTpm2ToolsDoes) {
  struct Case {
    const char* tpmsec_tpm;
    const char* tcti;
    bool device;
    std::string spec;
    TpmSource source;
  };
  for (const Case& c : std::vector<Case>{
           {"swtpm:port=1", "device:/dev/tpm0", true, "swtpm:port=1", TpmSource::kTpmsecTpm},
           {"", "device:/dev/tpm0", true, "device:/dev/tpm0", TpmSource::kTpm2ToolsTcti},
           {nullptr, "mssim:host=127.0.0.1,port=2321", false, "mssim:host=127.0.0.1,port=2321",
            TpmSource::kTpm2ToolsTcti},
           {nullptr, "swtpm:host=localhost,port=2321", false, "swtpm:host=localhost,port=2321",
            TpmSource::kTpm2ToolsTcti},
           {nullptr, "device", true, "device:/dev/tpmrm0", TpmSource::kTpm2ToolsTcti},
           {nullptr, "device", false, "device:/dev/tpm0", TpmSource::kTpm2ToolsTcti},
           {nullptr, "mssim", false, "mssim", TpmSource::kTpm2ToolsTcti},
           {nullptr, "libtss2-tcti-device.so.0:/dev/tpmrm0", false, "device:/dev/tpmrm0", TpmSource::kTpm2ToolsTcti},
           {nullptr, "", true, "device:/dev/tpmrm0", TpmSource::kHostDevice},
           {nullptr, nullptr, true, "device:/dev/tpmrm0", TpmSource::kHostDevice},
           {nullptr, nullptr, false, "embedded", TpmSource::kFallback},
       }) {
    SCOPED_TRACE(
        fmt::format("{} {} {}", c.tpmsec_tpm ? c.tpmsec_tpm : "(unset)", c.tcti ? c.tcti : "(unset)", c.device));
    auto d = choose_default_tpm(c.tpmsec_tpm, c.tcti, c.device);
    ASSERT_TRUE(d.ok()) << d.error().message();
    EXPECT_EQ(d->spec, c.spec);
    EXPECT_EQ(d->source, c.source);
    // Only the last resort is the simulator nobody named.
    EXPECT_EQ(d->unnamed_simulator(), c.source == TpmSource::kFallback);
    // What was chosen parses as a TPM string.
    EXPECT_TRUE(parse_transport_spec(d->spec).ok()) << d->spec;
  }
}

// Also the tpmsec TCTI's configuration with a malformed item or TPM string,
// or two anchors: nothing of it is dropped.
TEST(DefaultTpm, AnUnsupportedTctiIsAUsageErrorNamingTheVariable) {
  for (const char* tcti :
       {"tabrmd", "tabrmd:bus_name=com.intel.tss2.Tabrmd", "abrmd", "libtss2-tcti-spi-helper.so",
        "cmd:ssh host tpm2_send", "mssim:colour=blue", "device:path=/dev/tpm0,x=1", "tpmsec:swtpm:port=1,tofu,tofu",
        "tpmsec:swtpm:port=1,tofu,null-name=000b", "tpmsec:swtpm:port=1,ek-ca=/x,tofu", "tpmsec:swtpm:port=1,salt=dsa",
        "tpmsec:swtpm:port=1,null-name=", "tpmsec:swtpm:port=1,tofu=yes",
        "tpmsec:swtpm:port=1,policy=", "tpmsec:swtpm:colour=blue", "tpmsec:tabrmd"}) {
    SCOPED_TRACE(tcti);
    // Even where the host has a device: a named TPM is never replaced by another.
    auto d = choose_tpm(nullptr, tcti, true);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().kind(), ErrorKind::kUsage);
    EXPECT_NE(d.error().message().find(std::string("TPM2TOOLS_TCTI=") + tcti), std::string::npos)
        << d.error().message();
    EXPECT_EQ(d.error().message().find('\n'), std::string::npos);
  }
  // TPMSEC_TPM takes the same items (one grammar), and must name a TPM.
  auto items = choose_tpm("swtpm:host=h,salt=rsa,port=1,tofu", nullptr, false);
  ASSERT_TRUE(items.ok()) << items.error().message();
  EXPECT_EQ(items->spec, "swtpm:host=h,port=1");
  EXPECT_TRUE(items->config.tofu);
  EXPECT_EQ(items->config.salt, "rsa");
  EXPECT_EQ(items->origin(), "TPMSEC_TPM");
  for (const char* bad : {"tofu", "swtpm:port=1,tofu,tofu", "swtpm:colour=blue,tofu"}) {
    auto r = choose_tpm(bad, nullptr, true);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().kind(), ErrorKind::kUsage);
    EXPECT_NE(r.error().message().find(std::string("TPMSEC_TPM=") + bad), std::string::npos) << r.error().message();
  }
  // --tpm: the same, and an item alone names no TPM.
  auto given = given_tpm("device:/dev/tpmrm0,null-name=/pins/n,policy=/p.toml");
  ASSERT_TRUE(given.ok()) << given.error().message();
  EXPECT_EQ(given->spec, "device:/dev/tpmrm0");
  EXPECT_EQ(given->config.null_name, "/pins/n");
  EXPECT_EQ(given->config.policy, "/p.toml");
  EXPECT_EQ(given->origin(), "--tpm");
  EXPECT_FALSE(given_tpm("null-name=/pins/n").ok());
  // TPMSEC_TPM wins over a TPM2TOOLS_TCTI tpmsec cannot speak.
  EXPECT_TRUE(choose_tpm("embedded", "tabrmd", false).ok());
}

// TPM2TOOLS_TCTI naming the tpmsec TCTI (docs/tcti.md): the TPM string
// inside it, and its protection items for the CLI to apply as flags.
TEST(DefaultTpm, TheTpmsecTctiGivesItsTpmStringAndItems) {
  const std::string name = "000b" + std::string(64, 'a');
  for (std::string prefix : {"tpmsec:", "libtss2-tcti-tpmsec.so.0:", "libtss2-tcti-tpmsec.so:"}) {
    SCOPED_TRACE(prefix);
    std::string tcti = prefix + "swtpm:host=127.0.0.1,port=2321,null-name=" + name + ",salt=rsa,log=/tmp/t.log";
    auto d = choose_tpm(nullptr, tcti.c_str(), true);
    ASSERT_TRUE(d.ok()) << d.error().message();
    EXPECT_EQ(d->spec, "swtpm:host=127.0.0.1,port=2321");
    EXPECT_EQ(d->source, TpmSource::kTpm2ToolsTcti);
    ASSERT_TRUE(d->tcti);
    EXPECT_EQ(d->config.null_name, name);
    EXPECT_EQ(d->config.salt, "rsa");
    EXPECT_EQ(d->config.log, "/tmp/t.log");
    EXPECT_FALSE(d->config.tofu);
    EXPECT_TRUE(d->config.anchor());
  }
  // Items may come anywhere; the TPM string keeps its order.
  auto mixed = choose_tpm(nullptr, "tpmsec:swtpm:host=h,tofu,policy=/p.toml,port=1", false);
  ASSERT_TRUE(mixed.ok()) << mixed.error().message();
  EXPECT_EQ(mixed->spec, "swtpm:host=h,port=1");
  EXPECT_TRUE(mixed->config.tofu);
  EXPECT_EQ(mixed->config.policy, "/p.toml");
  // No TPM string: the host's TPM through the resource manager, as the TCTI opens.
  for (const char* bare : {"tpmsec", "tpmsec:", "tpmsec:tofu"}) {
    auto d = choose_tpm(nullptr, bare, false);
    ASSERT_TRUE(d.ok()) << bare << ": " << d.error().message();
    EXPECT_EQ(d->spec, "device:/dev/tpmrm0") << bare;
  }
  // Other TCTIs carry no tpmsec configuration.
  auto other = choose_tpm(nullptr, "swtpm:host=h,port=1", false);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->tcti);
  EXPECT_FALSE(other->config.has_items());
}

// A TPM string is parsed once, into a typed spec: its opener sets it on the
// transport (Transport::spec()), and decorators forward it, so nothing reads
// the kind or path back out of describe()'s text.
TEST(TransportSpec, AnOpenedTransportKnowsItsSpec) {
  auto device = parse_transport_spec("device:/dev/tpmrm0");
  ASSERT_TRUE(device.ok()) << device.error().message();
  EXPECT_EQ(device->kind, TpmKind::kDevice);
  EXPECT_EQ(device->path, "/dev/tpmrm0");
  auto swtpm = parse_transport_spec("swtpm:host=127.0.0.1,port=2321");
  ASSERT_TRUE(swtpm.ok()) << swtpm.error().message();
  EXPECT_EQ(swtpm->kind, TpmKind::kSwtpm);
  EXPECT_EQ(swtpm->option("port"), "2321");
  EXPECT_EQ(swtpm->option("ctrl", "none"), "none");
  auto opened = open_transport("embedded");
  ASSERT_TRUE(opened.ok()) << opened.error().message();
  EXPECT_EQ((*opened)->spec().kind, TpmKind::kEmbedded);
  testing::RecordingTransport recorded(**opened);
  EXPECT_EQ(recorded.spec().kind, TpmKind::kEmbedded);
  // Every decorator is a TransportDecorator, whose spec() is final: the
  // emulation's (a chip's slots, its latency model) forward it too.
  SlotLimitTransport slots(**opened, SlotLimits{});
  EXPECT_EQ(slots.spec().kind, TpmKind::kEmbedded);
  VirtualClock clock;
  LatencyProfile profile;
  profile.id = "test";
  LatencyTransport emulated(**opened, LatencyModel(profile), clock);
  EXPECT_EQ(emulated.spec().kind, TpmKind::kEmbedded);
  EXPECT_EQ(emulated.describe(), "embedded emulating test") << "the text is added to, the spec is the TPM's";
  // A transport no TPM string opened names no kind.
  testing::ScriptedTransport scripted("device:/dev/tpm0");
  EXPECT_EQ(scripted.spec().kind, TpmKind::kNone);
}

// A TPM's identity (TpmId, what host state keys it by) from its TPM string,
// without opening it: the text the transport would describe itself by,
// rendered by the same function (transports.h).
TEST(TransportSpec, ATpmStringsIdentityNeedsNoConnection) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"swtpm:port=2321", "swtpm:host=localhost,port=2321"},
      {"swtpm:host=127.0.0.1,port=02321,handles=private,ctrlhost=h", "swtpm:host=127.0.0.1,port=2321"},
      {"swtpm:path=/run/swtpm.sock,ctrlpath=/run/ctrl.sock", "swtpm:path=/run/swtpm.sock,ctrlpath=/run/ctrl.sock"},
      {"swtpm:host=h,port=7,ctrl=8", "swtpm:host=h,port=7,ctrl=8"},
      {"mssim:host=127.0.0.1", "mssim:host=127.0.0.1,port=2321"},
      {"device", "device:/dev/tpm0"},
      {"device:/dev/tpmrm0", "device:/dev/tpmrm0"},
      {"serve", "serve:path=/run/tpmsec/tpm.sock"},
      {"serve:path=/tmp/s,uid=1000", "serve:path=/tmp/s,uid=1000"},
      {"embedded", "embedded"},
      {"embedded:state=/tmp/x", "embedded:state=/tmp/x"},
  };
  for (const auto& [text, id] : cases) {
    SCOPED_TRACE(text);
    auto spec = parse_transport_spec(text);
    ASSERT_TRUE(spec.ok()) << spec.error().message();
    EXPECT_EQ(tpm_string_of(*spec), id);
    EXPECT_EQ(tpm_id_of(*spec).key, TpmId::of(id).key);
  }
  // An opened transport: its spec's identity is the one it describes.
  auto opened = open_transport("embedded");
  ASSERT_TRUE(opened.ok()) << opened.error().message();
  EXPECT_EQ(tpm_id_of(**opened).text, (*opened)->describe());
  testing::InterposingTransport interposed(
      **opened, [](ByteView c, Transport& inner) { return inner.transmit(c); }, "+rewrite");
  EXPECT_EQ(tpm_id_of(interposed).text, "embedded") << "a decorator's text is not the TPM's identity";
  testing::ScriptedTransport scripted("a double");
  EXPECT_EQ(tpm_id_of(scripted).text, "a double") << "no TPM string: what it describes";
}

// Forgetting pins needs the TPM's identity only: nothing listens at port 1.
TEST(TransportSpec, ForgettingTalksToNoTpm) {
  std::string dir = ::testing::TempDir() + "tpmsec-forget-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string state = dir + "/state";
  auto r = run_tpmsec({"null-key", "--forget", "--tpm", "swtpm:host=127.0.0.1,port=1"}, {"TPMSEC_STATE_DIR=" + state});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.err.find("no --tofu pin kept for swtpm:host=127.0.0.1,port=1"), std::string::npos) << describe(r);
  std::filesystem::remove_all(dir);
}

TEST(TransportSpec, MssimParsesWithItsPorts) {
  auto spec = parse_transport_spec("mssim:host=127.0.0.1,port=2321");
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->scheme, "mssim");
  EXPECT_EQ(spec->options.at("host"), "127.0.0.1");
  for (const char* bad : {"mssim:port=65535", "mssim:port=0", "mssim:ctrl=2", "mssim:path=/tmp/x"}) {
    SCOPED_TRACE(bad);
    auto r = parse_transport_spec(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind(), ErrorKind::kUsage);
  }
}

// The CLI: TPM2TOOLS_TCTI is read, and a bad one is a usage error naming it.
TEST(DefaultTpm, CliReadsTpm2ToolsTcti) {
  auto bad = run_tpmsec({"info"}, {"TPMSEC_TPM=", "TPM2TOOLS_TCTI=tabrmd"});
  EXPECT_EQ(bad.exit_code, testing::kExitUsage) << describe(bad);
  EXPECT_NE(bad.err.find("TPM2TOOLS_TCTI=tabrmd"), std::string::npos) << describe(bad);
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  // A swtpm: TCTI with nothing listening: tpmsec tried what the variable names.
  auto absent = run_tpmsec({"info"}, {"TPMSEC_TPM=", "TPM2TOOLS_TCTI=swtpm:host=127.0.0.1,port=1"});
  EXPECT_EQ(absent.exit_code, 1) << describe(absent);
  EXPECT_NE(absent.err.find("127.0.0.1:1"), std::string::npos) << describe(absent);
  // --tpm wins over both variables.
  auto given = run_tpmsec({"info", "--tpm", "embedded"}, {"TPMSEC_TPM=", "TPM2TOOLS_TCTI=tabrmd"});
  EXPECT_EQ(given.exit_code, 0) << describe(given);
}

// --emulate alone needs no TPM: a TPM2TOOLS_TCTI set host-wide for
// tpm2-tools that tpmsec does not speak (tabrmd) is named in a note and left
// aside, the embedded TPM plays the chip, on commands with protection
// options too (they read the variable's items).
TEST(DefaultTpm, EmulateNeedsNoTpmEvenWithAnUnspeakableTpm2ToolsTcti) {
  const std::vector<std::string> env{"TPMSEC_TPM=", "TPM2TOOLS_TCTI=tabrmd"};
  auto bench = run_tpmsec({"bench", "--emulate", "slb9670", "--iterations", "2", "--strategies", "plain",
                           "--no-primitives", "--no-progress"},
                          env);
  EXPECT_EQ(bench.exit_code, 0) << describe(bench);
  EXPECT_NE(bench.out.find("[emulated: slb9670]"), std::string::npos) << describe(bench);
  EXPECT_NE(bench.err.find("ignoring TPM2TOOLS_TCTI=tabrmd"), std::string::npos) << describe(bench);
  EXPECT_EQ(std::count(bench.err.begin(), bench.err.end(), '\n'), 1) << bench.err;
  auto extend = run_tpmsec({"pcr", "extend", "16", std::string(64, 'a'), "--emulate", "slb9670"}, env);
  EXPECT_EQ(extend.exit_code, 0) << describe(extend);
  // Without --emulate it stays a usage error naming the variable.
  auto plain = run_tpmsec({"pcr", "extend", "16", std::string(64, 'a')}, env);
  EXPECT_EQ(plain.exit_code, testing::kExitUsage) << describe(plain);
}

// Without any TPM named, a state-changing command on a host without
// /dev/tpmrm0 says in one line that it ran on the simulator; where the host
// has one, the command goes to it, and it is only read here (info), never
// changed. Either way the assertion below holds for this machine.
TEST(DefaultTpm, AnUnnamedSimulatorIsSaidOnStateChangingCommands) {
  struct stat st {};
  const bool host_device = ::stat(kHostTpmDevice, &st) == 0;
  const std::vector<std::string> unnamed{"TPMSEC_TPM=", "TPM2TOOLS_TCTI="};
  if (host_device) {
    auto info = run_tpmsec({"info", "--json"}, unnamed);
    // The host's TPM (or a permission error naming it), never the simulator.
    EXPECT_EQ(info.out.find("\"IBM\""), std::string::npos) << describe(info);
    if (info.exit_code != 0) {
      EXPECT_NE(info.err.find(kHostTpmDevice), std::string::npos) << describe(info);
    }
    return;
  }
  auto extend = run_tpmsec({"pcr", "extend", "16", std::string(64, 'a')}, unnamed);
  EXPECT_EQ(extend.exit_code, 0) << describe(extend);
  EXPECT_NE(extend.err.find("embedded simulator"), std::string::npos) << describe(extend);
  EXPECT_EQ(std::count(extend.err.begin(), extend.err.end(), '\n'), 1) << extend.err;
  // Named, it is not said; nor on a command that changes nothing.
  auto named = run_tpmsec({"pcr", "extend", "16", std::string(64, 'a')}, {"TPMSEC_TPM=embedded"});
  EXPECT_EQ(named.exit_code, 0) << describe(named);
  EXPECT_EQ(named.err.find("embedded simulator"), std::string::npos) << describe(named);
  // A command that fails before it runs says only why it failed.
  auto failed = run_tpmsec({"pcr", "extend", "16", "zz"}, unnamed);
  EXPECT_EQ(failed.exit_code, testing::kExitUsage) << describe(failed);
  EXPECT_EQ(failed.err.find("embedded simulator"), std::string::npos) << describe(failed);
  auto read = run_tpmsec({"pcr", "read", "16"}, unnamed);
  EXPECT_EQ(read.exit_code, 0) << describe(read);
  EXPECT_EQ(read.err.find("embedded simulator"), std::string::npos) << describe(read);
}

}  // namespace
}  // namespace tpmsec
