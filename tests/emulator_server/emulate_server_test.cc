// `tpmsec emulate` as a process on free loopback ports, driven by tpmsec
// itself (CLI and library transport), by tpm2-tools over the swtpm and mssim
// TCTIs, and by hand-made bad input on both ports.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/emulate_process.h"
#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "support/test_data.h"
#include "support/tpm_frames.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/null_key.h"
#include "tpmsec/pcr.h"
#include "tpmsec/strategy.h"
#include "tpmsec/text.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport/tpm_string.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

using testing::slurp;

using testing::describe;
using testing::run_command;
using testing::run_tpmsec;

std::string temp_dir() { return testing::make_temp_dir("tpmsec-emulate"); }

using testing::EmulateServer;

int connect_to(uint16_t port) { return testing::connect_loopback(port); }

// Everything the server sends until it closes the connection (at most 5 s).
Bytes read_until_closed(int fd) {
  Bytes out;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) break;
    uint8_t buf[256];
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  return out;
}

// Sends `bytes` on a new connection to `port`; what came back before the close.
Bytes exchange_and_close(uint16_t port, const Bytes& bytes) {
  int fd = connect_to(port);
  if (fd < 0) return {};
  (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  Bytes out = read_until_closed(fd);
  ::close(fd);
  return out;
}

std::vector<std::string> state_env(const std::string& dir) { return {"TPMSEC_STATE_DIR=" + dir + "/client-state"}; }

TEST(EmulateServer, HelpAndUsageErrors) {
  auto help = run_tpmsec({"emulate", "--help"});
  EXPECT_EQ(help.exit_code, 0) << describe(help);
  for (const char* word : {"--port", "--clock", "--state", "--json", "--trace", "--protocol", "control port",
                           "--private-handles", "handles=private"}) {
    EXPECT_NE(help.out.find(word), std::string::npos) << word;
  }
  EXPECT_EQ(run_tpmsec({"emulate", "slb9670", "--port", "1", "--clock", "fast"}).exit_code, testing::kExitUsage);
  EXPECT_EQ(run_tpmsec({"emulate", "slb9670", "--port", "1", "--protocol", "tcp"}).exit_code, testing::kExitUsage);
  EXPECT_EQ(run_tpmsec({"emulate", "no-such-chip", "--port", "1"}).exit_code, testing::kExitUsage);
  EXPECT_EQ(run_tpmsec({"emulate", "slb9670"}).exit_code, testing::kExitUsage);
}

TEST(EmulateServer, TpmsecReadsTheProfilesIdentityAndExtendsProtected) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual"}));
  auto info = run_tpmsec({"info", "--tpm", server.tcti()});
  ASSERT_EQ(info.exit_code, 0) << describe(info);
  EXPECT_NE(info.out.find("\"IFX\""), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("\"SLB9\""), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("7.85"), std::string::npos) << info.out;

  // A bus lies between: the protected extend needs a salt-key anchor.
  std::string digest(64, 'a');
  auto bare = run_tpmsec({"pcr", "extend", "16", digest, "--tpm", server.spec()}, state_env(server.dir()));
  EXPECT_EQ(bare.exit_code, testing::kExitUsage) << describe(bare);
  auto extend = run_tpmsec({"pcr", "extend", "16", digest, "--tpm", server.spec(), "--tofu"}, state_env(server.dir()));
  ASSERT_EQ(extend.exit_code, 0) << describe(extend);
  auto read = run_tpmsec({"pcr", "read", "16", "--tpm", server.spec()});
  ASSERT_EQ(read.exit_code, 0) << describe(read);
  Bytes zero(32, 0);
  Bytes expected = *crypto::hash(alg::kSha256, {zero, *from_hex(digest)});
  std::string out = read.out;
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  EXPECT_NE(out.find(to_hex(expected)), std::string::npos) << read.out;

  EXPECT_EQ(server.stop(), 0);
  std::string log = server.log();
  for (const char* variant : {"CreatePrimary.ecc", "StartAuthSession.ecc", "PCR_Extend", "GetCapability"}) {
    EXPECT_NE(log.find(variant), std::string::npos) << variant << "\n" << log;
  }
}

TEST(EmulateServer, Tpm2ToolsOverSwtpmAndMssimTctis) {
  ASSERT_TRUE(testing::have_program("tpm2_getcap")) << "tpm2-tools is not installed (scripts/quickstart installs it)";
  for (std::string protocol : {"swtpm", "mssim"}) {
    SCOPED_TRACE(protocol);
    EmulateServer server;
    ASSERT_TRUE(server.start({"--clock", "virtual", "--protocol", protocol}));
    auto cap = run_command({"tpm2_getcap", "properties-fixed"}, {"TPM2TOOLS_TCTI=" + server.tcti(protocol)});
    ASSERT_EQ(cap.exit_code, 0) << describe(cap);
    EXPECT_NE(cap.out.find("value: \"IFX\""), std::string::npos) << cap.out;
    auto extend = run_command({"tpm2_pcrextend", "16:sha256=" + std::string(64, 'b')},
                              {"TPM2TOOLS_TCTI=" + server.tcti(protocol)});
    EXPECT_EQ(extend.exit_code, 0) << describe(extend);
    EXPECT_EQ(server.stop(), 0);
    EXPECT_NE(server.log().find("PCR_Extend"), std::string::npos) << server.log();
  }
}

// tpmsec's own mssim: client (tpm2-tss's mssim TCTI syntax) against the
// server's mssim protocol: the CLI by --tpm and by TPM2TOOLS_TCTI, a
// protected extend, and a TPM Reset through the platform port.
TEST(EmulateServer, TpmsecSpeaksMssim) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual", "--protocol", "mssim"}));
  const std::string tpm = server.tcti("mssim");
  auto info = run_tpmsec({"info", "--tpm", tpm});
  ASSERT_EQ(info.exit_code, 0) << describe(info);
  EXPECT_NE(info.out.find("\"IFX\""), std::string::npos) << info.out;
  std::string digest(64, 'c');
  auto extend = run_tpmsec({"pcr", "extend", "16", digest, "--tofu"},
                           {"TPMSEC_TPM=", "TPM2TOOLS_TCTI=" + tpm, "TPMSEC_STATE_DIR=" + server.dir() + "/state"});
  ASSERT_EQ(extend.exit_code, 0) << describe(extend);
  auto read = run_tpmsec({"pcr", "read", "16", "--tpm", tpm});
  ASSERT_EQ(read.exit_code, 0) << describe(read);
  Bytes expected = *crypto::hash(alg::kSha256, {Bytes(32, 0), *from_hex(digest)});
  EXPECT_EQ(read.out, to_hex(expected) + "\n");

  auto transport = open_mssim({.host = "127.0.0.1", .port = server.port()});
  ASSERT_TRUE(transport.ok()) << transport.error().message();
  EXPECT_EQ((*transport)->describe(), tpm);
  Tpm direct(**transport);
  // _TPM_Init through the platform port, then Startup(CLEAR): PCR 16 is reset.
  ASSERT_TRUE((*transport)->reset_tpm().ok());
  auto pcr = pcr_read(direct, alg::kSha256, 16);
  ASSERT_TRUE(pcr.ok()) << pcr.error().message();
  EXPECT_EQ(*pcr, Bytes(32, 0));
  transport->reset();
  EXPECT_EQ(server.stop(), 0);
  std::string log = server.log();
  EXPECT_NE(log.find("PCR_Extend"), std::string::npos) << log;
  EXPECT_NE(log.find("platform: reset"), std::string::npos) << log;
}

// Nothing listening on the platform port: a one-line runtime error, no hang.
TEST(EmulateServer, MssimWithoutItsServerIsARuntimeError) {
  uint16_t port = testing::pick_port_pair();
  auto r = run_tpmsec({"info", "--tpm", fmt::format("mssim:host=127.0.0.1,port={}", port)});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("mssim"), std::string::npos) << describe(r);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// A lower bound on wall time: holds on any machine, however fast.
TEST(EmulateServer, RealClockTakesTheModelledTime) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--means"}));  // --clock real is the default
  auto transport = open_swtpm({.host = "127.0.0.1", .port = server.port()});
  ASSERT_TRUE(transport.ok()) << transport.error().message();
  Tpm tpm(**transport);
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kNull);
  c.in_public.public_area = null_key_template(SaltKind::kEcc);
  // The profile's mean for the command, whatever the shipped data says.
  auto profile = load_profile("slb9670");
  ASSERT_TRUE(profile.ok()) << profile.error().message();
  const double modelled_ms = profile->commands.at("CreatePrimary.ecc").ms;
  ASSERT_GE(modelled_ms, 200.0);
  auto start = std::chrono::steady_clock::now();
  auto created = tpm.run(c, {Auth::password()});
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(created.ok()) << created.error().message();
  EXPECT_GE(took, std::chrono::microseconds(static_cast<int64_t>(modelled_ms * 1000)));
  ASSERT_TRUE(tpm.run(cmd::FlushContext{created->object_handle}).ok());
  EXPECT_EQ(server.stop(), 0);
  EXPECT_NE(server.log().find(fmt::format("CreatePrimary.ecc            rc 0x000 {:9.2f} ms", modelled_ms)),
            std::string::npos)
      << server.log();
}

TEST(EmulateServer, ControlChannelResetIsATpmReset) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual", "--quiet"}));
  auto transport = open_swtpm({.host = "127.0.0.1", .port = server.port(), .ctrl_port = uint16_t(server.port() + 1)});
  ASSERT_TRUE(transport.ok()) << transport.error().message();
  Tpm tpm(**transport);
  StreamOptions options;
  options.protection.trust_first_use = true;  // the test's own server, nothing between
  auto stream = ExtendStream::open(tpm, StrategyKind::kResident, options);
  ASSERT_TRUE(stream.ok()) << stream.error().message();
  ASSERT_TRUE((*stream)->extend(Bytes(32, 1)).ok());
  // CMD_INIT on the control channel, then Startup(CLEAR): a TPM Reset.
  ASSERT_TRUE((*transport)->reset_tpm().ok());
  auto pcr = pcr_read(tpm, alg::kSha256, 16);
  ASSERT_TRUE(pcr.ok()) << pcr.error().message();
  EXPECT_EQ(*pcr, Bytes(32, 0));  // PCRs are reset
  // The null seed changed with the reset: the stream fails closed.
  Status st = (*stream)->extend(Bytes(32, 2));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kIntegrity);
  EXPECT_NE(st.error().message().find("null key name changed"), std::string::npos) << st.error().message();
  stream->reset();
  // Suspend/resume keeps the TPM (Shutdown(STATE), CMD_INIT, Startup(STATE)).
  ASSERT_TRUE(pcr_extend(tpm, alg::kSha256, 23, Bytes(32, 3)).ok());
  Status resumed = (*transport)->suspend_resume();
  ASSERT_TRUE(resumed.ok()) << resumed.error().message();
  EXPECT_TRUE(server.running());
}

// CMD_SET_LOCALITY reaches libtpms: PCR 20 (PC Client DRTM) resets only
// from locality 2 (libtpms), not 0.
TEST(EmulateServer, ControlChannelLocality) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual", "--quiet"}));
  auto transport = open_swtpm({.host = "127.0.0.1", .port = server.port()});
  ASSERT_TRUE(transport.ok()) << transport.error().message();
  Tpm tpm(**transport);
  EXPECT_FALSE(pcr_reset(tpm, 20).ok());
  Bytes set = be32(5);  // CMD_SET_LOCALITY
  set.push_back(2);
  EXPECT_EQ(to_hex(exchange_and_close(server.port() + 1, set)), "00000000");
  Status at2 = pcr_reset(tpm, 20);
  EXPECT_TRUE(at2.ok()) << at2.error().message();
  set.back() = 0;
  EXPECT_EQ(to_hex(exchange_and_close(server.port() + 1, set)), "00000000");
  EXPECT_FALSE(pcr_reset(tpm, 20).ok());
}

TEST(EmulateServer, BadInputGetsAnErrorNotACrash) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual"}));
  const uint16_t data = server.port();
  const uint16_t ctrl = data + 1;
  // Control channel.
  EXPECT_EQ(to_hex(exchange_and_close(ctrl, be32(0xdeadbeef))), "0000000a");  // TPM_BAD_ORDINAL, closed
  EXPECT_EQ(to_hex(exchange_and_close(ctrl, be32(2))), "00000003");           // CMD_INIT without its flags
  Bytes huge_hash = be32(7);                                                  // CMD_HASH_DATA of 4 GiB
  Bytes len = be32(0xffffffff);
  huge_hash.insert(huge_hash.end(), len.begin(), len.end());
  EXPECT_EQ(to_hex(exchange_and_close(ctrl, huge_hash)), "00000003");
  Bytes bad_locality = be32(5);
  bad_locality.push_back(9);
  EXPECT_EQ(to_hex(exchange_and_close(ctrl, bad_locality)), "00000003");
  EXPECT_EQ(to_hex(exchange_and_close(ctrl, be32(1))).substr(0, 8), "00000000");  // CMD_GET_CAPABILITY
  // Data channel: a bad tag, an oversized frame, a truncated one, garbage.
  EXPECT_EQ(to_hex(exchange_and_close(data, *from_hex("12340000000a00000000"))), "80010000000a0000001e");
  EXPECT_EQ(to_hex(exchange_and_close(data, *from_hex("80017fffffff0000017a"))), "80010000000a00000142");
  EXPECT_EQ(to_hex(exchange_and_close(data, *from_hex("800100000016000000"))), "");
  EXPECT_EQ(to_hex(exchange_and_close(data, Bytes(3, 0xff))), "");
  ASSERT_TRUE(server.running());
  // And it still serves.
  auto info = run_tpmsec({"info", "--tpm", server.tcti()});
  EXPECT_EQ(info.exit_code, 0) << describe(info);
  EXPECT_EQ(server.stop(), 0);
  EXPECT_NE(server.log().find("malformed command frame"), std::string::npos) << server.log();
}

// Several clients at once, as programs share a chip: a second client is
// served while the first stays connected (idle).
TEST(EmulateServer, SecondClientIsServedWhileTheFirstIsConnected) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual", "--quiet"}));
  int first = connect_to(server.port());
  ASSERT_GE(first, 0);
  auto second = std::async(std::launch::async, [&] { return run_tpmsec({"info", "--tpm", server.tcti()}); });
  ASSERT_EQ(second.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  auto r = second.get();
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  pollfd p{first, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);  // the first is still connected, not closed by the server
  ::close(first);
  EXPECT_EQ(server.stop(), 0);
}

// SIGTERM stops the server promptly although a client is connected in the
// middle of a frame, trickling a byte every 100 ms (so that no per-read
// timeout ever fires): the frame never completes, so a server that waited
// for it would not exit before stop()'s 10 s and be killed (-1).
TEST(EmulateServer, SigtermWithAStalledClientExitsPromptly) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual"}));
  int stalled = connect_to(server.port());
  ASSERT_GE(stalled, 0);
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    Bytes frame = *from_hex("800100001000000001");  // declares 4096 bytes; 9 sent, then one at a time
    (void)::send(stalled, frame.data(), frame.size(), MSG_NOSIGNAL);
    while (!done) {
      uint8_t b = 0;
      if (::send(stalled, &b, 1, MSG_NOSIGNAL) != 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  // The server accepted the connection, whose first bytes were sent
  // before: the frame has started when SIGTERM comes. (Counting the
  // server's descriptors instead raced with one it held for a moment after
  // start: 13 before the connection, 12 + 1 after.)
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !server.accepted(stalled) && std::chrono::steady_clock::now() < end;)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(server.accepted(stalled)) << "the server never accepted the connection";
  EXPECT_EQ(server.stop(), 0);
  done = true;
  trickle.join();
  ::close(stalled);
  EXPECT_NE(server.log().find("TPM commands"), std::string::npos) << server.log();  // the totals were printed
}

TEST(EmulateServer, SigtermPrintsTotalsAndWritesBenchResults) {
  EmulateServer server;
  std::string dir = temp_dir();
  std::string json = dir + "/served.json";
  std::string trace = dir + "/served.trace.json";
  ASSERT_TRUE(server.start({"--clock", "virtual", "--json", json, "--trace", trace}));
  auto info = run_tpmsec({"info", "--tpm", server.tcti()});
  ASSERT_EQ(info.exit_code, 0) << describe(info);
  auto random = run_tpmsec({"random", "8", "--protect", "none", "--tpm", server.tcti()});
  ASSERT_EQ(random.exit_code, 0) << describe(random);
  EXPECT_EQ(server.stop(), 0);
  std::string log = server.log();
  EXPECT_NE(log.find("ms modelled TPM time"), std::string::npos) << log;
  EXPECT_NE(log.find("GetRandom"), std::string::npos) << log;

  auto result = nlohmann::json::parse(slurp(json), nullptr, false);
  ASSERT_FALSE(result.is_discarded()) << slurp(json);
  EXPECT_EQ(result["schema"], "tpmsec-bench/1");
  EXPECT_EQ(result["tpm"]["manufacturer"], "IFX");
  EXPECT_EQ(result["tpm"]["profile"], "slb9670");
  bool random_seen = false;
  for (const auto& p : result["primitives"]) {
    if (p["name"] == "GetRandom") {
      random_seen = true;
      EXPECT_EQ(p["tpm_ms"]["n"], 1);
      EXPECT_GT(p["tpm_ms"]["median"].get<double>(), 2.0);  // slb9670: 2.23 ms, jitter 0.04
    }
  }
  EXPECT_TRUE(random_seen) << result.dump(2);
  auto events = nlohmann::json::parse(slurp(trace), nullptr, false);
  ASSERT_FALSE(events.is_discarded());
  EXPECT_FALSE(events["traceEvents"].empty());
  auto compare = run_tpmsec({"compare", json, json});
  EXPECT_EQ(compare.exit_code, 0) << describe(compare);
  EXPECT_NE(compare.out.find("GetRandom"), std::string::npos) << compare.out;
}

// The owner hierarchy's primary key is a function of the persistent seed.
std::string owner_primary_name(uint16_t port) {
  auto transport = open_swtpm({.host = "127.0.0.1", .port = port});
  if (!transport.ok()) return "open: " + transport.error().message();
  Tpm tpm(**transport);
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kOwner);
  c.in_public.public_area = null_key_template(SaltKind::kEcc);
  auto created = tpm.run(c, {Auth::password()});
  if (!created.ok()) return "create: " + created.error().message();
  (void)tpm.run(cmd::FlushContext{created->object_handle});
  return to_hex(created->name.bytes);
}

TEST(EmulateServer, StateDirectoryKeepsTheTpm) {
  std::string state = temp_dir() + "/tpm";
  std::vector<std::string> names;
  for (bool keep : {true, true, false}) {
    EmulateServer server;
    std::vector<std::string> args{"--clock", "virtual", "--quiet"};
    if (keep) args.insert(args.end(), {"--state", state});
    ASSERT_TRUE(server.start(args));
    names.push_back(owner_primary_name(server.port()));
    EXPECT_EQ(server.stop(), 0);
  }
  EXPECT_EQ(names[0].size(), 68u) << names[0];
  EXPECT_EQ(names[0], names[1]);  // the same TPM, resumed from DIR
  EXPECT_NE(names[0], names[2]);  // in memory: a fresh TPM
  EXPECT_TRUE(std::filesystem::exists(state + "/tpmsec-permall.blob"));
}

// The server answers as the profiled chip does when its context gap is
// reached (slot_limits.h): on amd-ftpm-3 (gap 255, 3 loaded sessions) a kept
// saved session lets 251 more saves through and the next is refused.
TEST(EmulateServer, EnforcesTheProfilesContextGap) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual", "--quiet"}, "amd-ftpm-3"));
  auto transport = open_transport(fmt::format("swtpm:host=127.0.0.1,port={}", server.port()));
  ASSERT_TRUE(transport.ok()) << transport.error().message();
  auto send = [&](uint32_t code, const Bytes& body) {
    Bytes c{0x80, 0x01, 0, 0, 0, 0, 0, 0, 0, 0};
    store_be32(c.data() + 2, static_cast<uint32_t>(10 + body.size()));
    store_be32(c.data() + 6, code);
    c.insert(c.end(), body.begin(), body.end());
    auto r = (*transport)->transmit(c);
    return r.ok() ? *r : Bytes{};
  };
  auto handle_body = [](uint32_t h) {
    Bytes b(4);
    store_be32(b.data(), h);
    return b;
  };
  // StartAuthSession: unsalted, unbound HMAC, SHA-256; the handle.
  const Bytes start_body{0x40, 0, 0,  7,  0x40, 0,  0,  7,  0,  16, 1, 2,    3,    4,    5,    6,   7,
                         8,    9, 10, 11, 12,   13, 14, 15, 16, 0,  0, 0x00, 0x00, 0x10, 0x00, 0x0B};
  auto start = [&] {
    Bytes r = send(0x176, start_body);
    return r.size() >= 14 && load_be32(r.data() + 6) == 0 ? load_be32(r.data() + 10) : 0u;
  };
  auto save_rc = [&](uint32_t h) {
    Bytes r = send(0x162, handle_body(h));
    return r.size() >= 10 ? load_be32(r.data() + 6) : 0xFFFFFFFFu;
  };
  uint32_t kept = start();
  ASSERT_NE(kept, 0u);
  ASSERT_EQ(save_rc(kept), 0u);
  int saves = 0;
  uint32_t refused = 0;
  for (int i = 0; i < 300 && !refused; ++i) {
    uint32_t h = start();
    ASSERT_NE(h, 0u) << i;
    uint32_t code = save_rc(h);
    if (code == 0) {
      ++saves;
    } else {
      refused = code;
    }
    send(0x165, handle_body(h));  // FlushContext, saved or loaded
  }
  EXPECT_EQ(saves, 251);
  EXPECT_EQ(refused, 0x901u);  // TPM_RC_CONTEXT_GAP
  send(0x165, handle_body(kept));
  transport->reset();
  EXPECT_EQ(server.stop(), 0);
}

// --private-handles (as /dev/tpmrm0, linux drivers/char/tpm/tpm2-space.c,
// and tpm2-abrmd; the server layer's handle spaces, tpmsec-server/resource_manager/handle_space.h):
// each data connection has a handle space of its own; its objects and
// sessions are swapped out when another needs the slot, what it left is flushed
// when it closes, billed and logged; a session the client saved itself stays
// for a later client of the same peer (tpm2-tools' context files). Without
// the flag (the control) everything stays.
struct Left {
  size_t objects = 0, loaded_sessions = 0, saved_sessions = 0;
  std::string error;
};

// A client connection that creates a transient object, an HMAC session it
// leaves loaded and one it saves, then closes without flushing anything.
// Returns the saved session's context.
Result<Context> leave_handles(uint16_t port) {
  TPMSEC_ASSIGN_OR_RETURN(auto transport, open_swtpm({.host = "127.0.0.1", .port = port}));
  Tpm tpm(*transport);
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kNull);
  c.in_public.public_area = null_key_template(SaltKind::kEcc);
  TPMSEC_RETURN_IF_ERROR(status_of(tpm.run(c, {Auth::password()})));
  cmd::StartAuthSession s;
  s.nonce_caller.bytes = Bytes(32, 0x11);
  TPMSEC_RETURN_IF_ERROR(status_of(tpm.run(s)));
  TPMSEC_ASSIGN_OR_RETURN(auto saved, tpm.run(s));
  TPMSEC_ASSIGN_OR_RETURN(auto context, tpm.run(cmd::ContextSave{NamedHandle::of(saved.session_handle)}));
  return context.context;
}

// What a new connection lists (GetCapability(TPM_CAP_HANDLES)): with private
// handles, its own space's (nothing), whatever the TPM holds.
Left handles_left(uint16_t port) {
  Left left;
  auto transport = open_swtpm({.host = "127.0.0.1", .port = port});
  if (!transport.ok()) return {0, 0, 0, transport.error().message()};
  Tpm tpm(**transport);
  auto objects = tpm.list_handles(ht::kFirstTransient);
  auto loaded = tpm.list_handles(ht::kFirstLoadedSession);
  auto saved = tpm.list_handles(ht::kFirstSavedSession);
  if (!objects.ok() || !loaded.ok() || !saved.ok()) return {0, 0, 0, "listing failed"};
  return {objects->size(), loaded->size(), saved->size(), ""};
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(EmulateServer, PrivateHandlesFlushWhatAClosingClientLeft) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual", "--means", "--private-handles"}));
  EXPECT_NE(server.log().find("private handles"), std::string::npos) << server.log();  // the startup line
  auto context = leave_handles(server.port());
  ASSERT_TRUE(context.ok()) << context.error().message();
  // The server handles a client's close before it serves a client that
  // connected after it; that client lists its own space: nothing.
  Left left = handles_left(server.port());
  ASSERT_EQ(left.error, "");
  EXPECT_EQ(left.objects + left.loaded_sessions + left.saved_sessions, 0u);
  // A later client (of the same peer: TCP clients are one) that loads the
  // saved session owns it: flushed when it closes.
  {
    auto transport = open_swtpm({.host = "127.0.0.1", .port = server.port()});
    ASSERT_TRUE(transport.ok()) << transport.error().message();
    Tpm tpm(**transport);
    auto loaded = tpm.run(cmd::ContextLoad{*context});
    ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  }
  left = handles_left(server.port());
  ASSERT_EQ(left.error, "");
  EXPECT_EQ(left.objects + left.loaded_sessions + left.saved_sessions, 0u);
  EXPECT_EQ(server.stop(), 0);
  // Billed and logged: the object and the loaded session at the close, then
  // the reloaded session at its new client's close.
  std::string log = server.log();
  EXPECT_EQ(count_of(log, "tpmsec emulate: FlushContext "), 3u) << log;
  EXPECT_NE(log.find("client closed (private handles: 1 object(s) dropped, 1 session(s) flushed, 1 it saved kept)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("client closed (private handles: 0 object(s) dropped, 1 session(s) flushed, 0 it saved kept)"),
            std::string::npos)
      << log;
}

// The listings a resource manager answers (frame_fields.h,
// asks_own_handles) through tpmsec's TCTI on a private-handles server: the
// TCTI sends them without its session, as no session could cover an answer
// the manager writes itself, and the server's spaces answer them. Every
// tpm2-tools command that lists handles works, as it does with no TCTI.
TEST(EmulateServer, TheTctiLeavesAResourceManagersListingsToIt) {
  ASSERT_TRUE(testing::have_program("tpm2_getcap")) << "tpm2-tools is not installed (scripts/quickstart installs it)";
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual", "--quiet", "--private-handles"}));
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("tpmsec-listing-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string tcti = fmt::format("TPM2TOOLS_TCTI={}:swtpm:host=127.0.0.1,port={},handles=private,tofu",
                                       TPMSEC_TCTI_PATH, server.port());
  const std::vector<std::string> env = {tcti, "TPMSEC_STATE_DIR=" + (dir / "state").string()};
  auto tool = [&](std::vector<std::string> argv) { return run_command(argv, env); };
  auto primary = tool({"tpm2_createprimary", "-C", "o", "-c", (dir / "p.ctx").string()});
  ASSERT_EQ(primary.exit_code, 0) << describe(primary);
  for (const char* kind : {"handles-transient", "handles-loaded-session", "handles-saved-session"}) {
    auto listed = tool({"tpm2_getcap", kind});
    EXPECT_EQ(listed.exit_code, 0) << kind << ": " << describe(listed);
    EXPECT_EQ(listed.out, "") << kind << ": this client holds nothing between its processes";
  }
  // tpm2_flushcontext -t lists the transient objects, then flushes each.
  auto flushed = tool({"tpm2_flushcontext", "-t"});
  EXPECT_EQ(flushed.exit_code, 0) << describe(flushed);
  EXPECT_EQ(server.stop(), 0);
  std::filesystem::remove_all(dir);
}

// On Linux each /dev/tpmrm0 client has the TPM's three loaded-session slots
// to itself (tpm2-space.c saves a space's sessions after each of its
// commands and loads them before the next). With --private-handles, two
// clients holding four sessions at once both work: a session is saved when
// a command needs its slot (billed) and loaded back under its handle before
// the next command that names it.
TEST(EmulateServer, PrivateHandlesGiveEachClientTheSessionSlots) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual", "--means", "--private-handles"}));
  {
    auto a = open_swtpm({.host = "127.0.0.1", .port = server.port()});
    auto b = open_swtpm({.host = "127.0.0.1", .port = server.port()});
    ASSERT_TRUE(a.ok() && b.ok());
    Tpm ta(**a), tb(**b);
    std::vector<std::unique_ptr<HmacSession>> sessions;
    for (Tpm* t : {&ta, &ta, &tb, &tb}) {
      auto s = HmacSession::start(*t, SessionOptions{});
      ASSERT_TRUE(s.ok()) << "session " << sessions.size() << ": " << s.error().message();
      (*s)->set_attributes(attr::kContinueSession | attr::kAudit);
      sessions.push_back(std::move(*s));
    }
    // Each session audits a command of its own client's, in turn.
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < sessions.size(); ++i) {
        Auth audit{sessions[i].get(), {}};
        auto r = (i < 2 ? ta : tb).run(cmd::GetRandom{8}, std::span<const Auth>(&audit, 1));
        ASSERT_TRUE(r.ok()) << "round " << round << ", session " << i << ": " << r.error().message();
      }
    }
    sessions.clear();  // flushed, loaded or saved
  }
  Left left = handles_left(server.port());
  ASSERT_EQ(left.error, "");
  EXPECT_EQ(left.objects + left.loaded_sessions + left.saved_sessions, 0u);
  EXPECT_EQ(server.stop(), 0);
  std::string log = server.log();
  EXPECT_GE(count_of(log, "tpmsec emulate: ContextSave.session "), 1u) << log;
  EXPECT_GE(count_of(log, "tpmsec emulate: ContextLoad.session "), 1u) << log;
}

// Issue 33's attack on --private-handles, as a second local client would
// try it, on both protocols: B lists, reads, saves and flushes A's object and
// policy session, by A's handles and by the TPM's own; every attempt is
// refused with the TPM's handle error for that position and A is unaffected.
class PrivateHandlesIsolate : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Protocols, PrivateHandlesIsolate, ::testing::Values("swtpm", "mssim"));
TEST_P(PrivateHandlesIsolate, AnotherClientCannotReachAClientsHandles) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual", "--quiet", "--private-handles", "--protocol", GetParam()}));
  const std::string spec = GetParam() == "swtpm" ? server.spec() : server.tcti("mssim");
  auto a = open_transport(spec);
  auto b = open_transport(spec);
  ASSERT_TRUE(a.ok() && b.ok());
  Tpm ta(**a);
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kNull);
  c.in_public.public_area = null_key_template(SaltKind::kEcc);
  auto object = ta.run(c, {Auth::password()});
  ASSERT_TRUE(object.ok()) << object.error().message();
  cmd::StartAuthSession start;
  start.nonce_caller.bytes = Bytes(32, 0x11);
  start.session_type = se::kPolicy;
  auto session = ta.run(start);
  ASSERT_TRUE(session.ok()) << session.error().message();
  auto rc_of = [](Transport& t, uint32_t code, std::vector<uint32_t> handles, Bytes params) {
    auto r = t.transmit(testing::build_command({code, std::move(handles), {}, std::move(params)}));
    return r.ok() ? testing::response_code_of(*r) : 0xFFFFFFFFu;
  };
  Tpm tb(**b);
  for (uint32_t first : {ht::kFirstTransient, ht::kFirstLoadedSession, ht::kFirstSavedSession}) {
    auto listed = tb.list_handles(first);
    ASSERT_TRUE(listed.ok());
    EXPECT_TRUE(listed->empty()) << std::hex << first;
  }
  for (uint32_t h : {object->object_handle, 0x80000000u, 0x80000001u}) {
    EXPECT_EQ(rc_of(**b, cmd::ReadPublic::kInfo.code, {h}, {}), 0x18Bu) << std::hex << h;
    EXPECT_EQ(rc_of(**b, cmd::ContextSave::kInfo.code, {h}, {}), 0x18Bu) << std::hex << h;
    EXPECT_EQ(rc_of(**b, cmd::FlushContext::kInfo.code, {}, be32(h)), 0x1CBu) << std::hex << h;
  }
  EXPECT_EQ(rc_of(**b, cmd::ContextSave::kInfo.code, {session->session_handle}, {}), 0x18Bu);
  EXPECT_EQ(rc_of(**b, cmd::FlushContext::kInfo.code, {}, be32(session->session_handle)), 0x1CBu);
  EXPECT_EQ(rc_of(**b, 0x16C /*PolicyCommandCode*/, {session->session_handle}, be32(0x15E)), 0x18Bu);
  // A: its object and session as they were.
  EXPECT_EQ(rc_of(**a, cmd::ReadPublic::kInfo.code, {object->object_handle}, {}), 0u);
  EXPECT_EQ(rc_of(**a, 0x16C, {session->session_handle}, be32(0x15E)), 0u);
  a->reset();
  b->reset();
  EXPECT_EQ(server.stop(), 0);
}

TEST(EmulateServer, WithoutPrivateHandlesAClosingClientsHandlesStay) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual", "--means"}));
  EXPECT_EQ(server.log().find("private handles"), std::string::npos) << server.log();
  auto context = leave_handles(server.port());
  ASSERT_TRUE(context.ok()) << context.error().message();
  Left left = handles_left(server.port());
  ASSERT_EQ(left.error, "");
  EXPECT_EQ(left.objects, 1u);
  EXPECT_EQ(left.loaded_sessions, 1u);
  EXPECT_EQ(left.saved_sessions, 1u);
  EXPECT_EQ(server.stop(), 0);
  std::string log = server.log();
  EXPECT_EQ(count_of(log, "FlushContext"), 0u) << log;  // nor in the totals
  EXPECT_EQ(log.find("client closed"), std::string::npos) << log;
}

// tpmsec over swtpm:...,handles=private lists no handles (no baseline, no
// sweep): a one-shot protected extend with a warm state directory sends no
// GetCapability at all; the same run without handles=private sends the
// ledger's three listings (transient objects, loaded and saved sessions).
// On either protocol: mssim: takes handles=private as swtpm: does.
class OneShotWithHandlesPrivate : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Protocols, OneShotWithHandlesPrivate, ::testing::Values("swtpm", "mssim"));
TEST_P(OneShotWithHandlesPrivate, ListsNoHandles) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual", "--means", "--private-handles", "--protocol", GetParam()}));
  const std::string digest(64, 'd');
  auto extend = [&](EmulateServer& on, const std::string& spec) {
    size_t before = count_of(on.log(), "tpmsec emulate: GetCapability ");
    auto r = run_tpmsec({"pcr", "extend", "16", digest, "--tpm", spec, "--tofu"}, state_env(on.dir()));
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return count_of(on.log(), "tpmsec emulate: GetCapability ") - before;
  };
  auto spec_of = [&](EmulateServer& on) { return GetParam() == "swtpm" ? on.spec() : on.tcti("mssim"); };
  const std::string private_spec = spec_of(server) + ",handles=private";
  extend(server, private_spec);  // cold: reads the TPM's capabilities, creates and keeps the null key
  EXPECT_EQ(extend(server, private_spec), 0u) << server.log();
  EXPECT_EQ(server.stop(), 0);
  // Nothing was left for the server to flush: tpmsec flushes what it creates.
  std::string log = server.log();
  EXPECT_GE(count_of(log, "client closed"), 2u) << log;
  EXPECT_EQ(count_of(log, "client closed"), count_of(log, "0 object(s) dropped, 0 session(s) flushed, 0 it saved kept"))
      << log;
  // The control: without handles=private, on a server without private
  // handles (where a listing reaches the chip; a handle space answers one
  // itself), the ledger's three listings (transient objects, loaded and
  // saved sessions).
  EmulateServer raw;
  ASSERT_TRUE(raw.start({"--clock", "virtual", "--means", "--protocol", GetParam()}));
  extend(raw, spec_of(raw));
  EXPECT_EQ(extend(raw, spec_of(raw)), 3u) << raw.log();
  EXPECT_EQ(raw.stop(), 0);
}

// tpm2-tss's mssim TCTI writes a command's header and body in two writes,
// with Nagle on: the body waits for the header's ACK. The server ACKs at
// once, as a chip answers at once; with Linux's delayed ACK every command
// after the first would stall at least 40 ms (TCP_DELACK_MIN), whatever the
// machine's speed. A client written the same way: its round trips stay
// under that floor (most of them: a scheduling hiccup may cross it).
TEST(EmulateServer, MssimAnswersAHeaderAndBodyWrittenApartWithoutADelayedAck) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual", "--quiet", "--protocol", "mssim"}));
  int fd = connect_to(server.port());
  ASSERT_GE(fd, 0);
  const Bytes head = *from_hex(
      "00000008"
      "00"
      "0000000c");                                           // TPM_SEND_COMMAND, locality 0, size
  const Bytes body = *from_hex("80010000000c0000017b0008");  // GetRandom(8)
  constexpr int kCommands = 20;
  int stalled = 0;
  for (int i = 0; i < kCommands; ++i) {
    auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(::write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
    ASSERT_EQ(::write(fd, body.data(), body.size()), static_cast<ssize_t>(body.size()));
    Bytes answer;
    while (answer.size() < 4 + 20 + 4) {  // size, the response (10 + 2 + 8), 0
      uint8_t buf[64];
      ssize_t n = ::read(fd, buf, sizeof(buf));
      ASSERT_GT(n, 0);
      answer.insert(answer.end(), buf, buf + n);
    }
    if (std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(40)) ++stalled;
  }
  ::close(fd);
  EXPECT_LT(stalled, kCommands / 2) << stalled << " of " << kCommands << " commands waited for a delayed ACK";
}

// With handles=private a lost connection is not reopened: the server flushed
// its handles, and their numbers may be another client's by then. Without
// it, the transport reconnects (the control).
TEST(EmulateServer, HandlesPrivateConnectionIsNotReopened) {
  EmulateServer server;
  ASSERT_TRUE(server.start({"--clock", "virtual", "--quiet", "--private-handles"}));
  const Bytes bad_tag = *from_hex("12340000000a00000000");  // answered, then the server closes
  const Bytes get_random = *from_hex("80010000000c0000017b0008");
  for (bool private_handles : {true, false}) {
    SCOPED_TRACE(private_handles);
    auto transport = open_transport(server.spec() + (private_handles ? ",handles=private" : ""));
    ASSERT_TRUE(transport.ok()) << transport.error().message();
    EXPECT_EQ((*transport)->private_handles(), private_handles);
    EXPECT_EQ((*transport)->describe(), server.spec());  // the same TPM, the same state files
    ASSERT_TRUE((*transport)->transmit(bad_tag).ok());
    // The connection is gone: this one fails (or, racing the close, succeeds).
    (void)(*transport)->transmit(get_random);
    auto after = (*transport)->transmit(get_random);
    if (private_handles) {
      auto again = (*transport)->transmit(get_random);
      ASSERT_FALSE(again.ok());
      EXPECT_NE(again.error().message().find("not reopened"), std::string::npos) << again.error().message();
    } else {
      EXPECT_TRUE(after.ok()) << after.error().message();
    }
  }
}

}  // namespace
}  // namespace tpmsec
