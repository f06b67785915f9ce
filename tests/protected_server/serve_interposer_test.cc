// `tpmsec serve` under an interposer that attacks the server's own handle
// swapping (issue 38, item 5): between serve and a real swtpm, the test's
// interposer (support/interposer.h) forges TPM_RC_CONTEXT_GAP,
// TPM_RC_SESSION_MEMORY, handle listings and FlushContext answers, rewrites
// the handle a ContextLoad or CreatePrimary answers with, and answers the
// manager's ContextSave of one client's object with a context of another
// client's. The clients are raw clients on serve's socket (one command
// written, its answer read), each a client of its own, and the tpmsec
// library's Tpm over `serve:path=` where a client computes its own HMAC.
//
// What must hold (and is checked after every attack): no client gets
// another client's object, or a result computed with one, with success; the
// server's work for one command is bounded (it answers); it keeps serving
// other clients; it ends with exit 0 on SIGTERM and, read straight from the
// swtpm, leaves nothing loaded or saved.
//
// Also here, because the same interposer shows it: a command that passes
// through without the server's session (a client's own audit session on it)
// still makes the Names it changes stale in the server's Name cache
// (NV_UndefineSpace, NV_DefineSpace, Clear): the next command naming the
// index reads its Name again, audited, instead of using the old one.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/exited_peer.h"
#include "support/interposer.h"
#include "support/raw_client.h"
#include "support/run_command.h"
#include "support/serve_fixture.h"
#include "support/serve_process.h"
#include "support/swtpm_process.h"
#include "support/test_data.h"
#include "support/tpm_frames.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/null_key.h"
#include "tpmsec/response_code.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport.h"
#include "tpmsec/transport/tpm_string.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

using testing::contains;
using testing::describe;
using testing::hmac_with;
using testing::kGetRandom8;
using testing::rc_of;
using testing::run_command;
using testing::start_auth_session;
using testing::transact;
using testing::with_handle;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kDeadline = std::chrono::seconds(60);
constexpr uint32_t kCcStartAuthSession = 0x176, kCcCreatePrimary = 0x131, kCcContextSave = 0x162,
                   kCcContextLoad = 0x161, kCcFlushContext = 0x165, kCcReadPublic = 0x173, kCcHmac = 0x155,
                   kCcPolicyGetDigest = 0x189, kCcGetCapability = 0x17A, kCcClear = 0x126, kCcNvWrite = 0x137,
                   kCcNvReadPublic = 0x169, kCcNvDefineSpace = 0x12A;
constexpr uint32_t kRcContextGap = 0x901, kRcSessionMemory = 0x903;
// What the manager may send for one client command (server::CommandBudget),
// with room for the command itself and the wrapper's own.
constexpr size_t kBoundedWork = 1024 + 64;

uint32_t code_of(ByteView c) { return c.size() < 10 ? 0 : load_be32(c.data() + 6); }
uint32_t first_handle_of(ByteView c) { return c.size() < 14 ? 0 : load_be32(c.data() + 10); }
uint16_t tag_of(ByteView c) { return c.size() < 2 ? 0 : static_cast<uint16_t>(c[0] << 8 | c[1]); }

// --- raw frames, as a client that is not tpm2-tss writes them -----------

// CreatePrimary(owner) of an HMAC key (KEYEDHASH, sign, noDA, SHA-256) whose
// template's unique is 32 bytes of `tag`: every tag a key of its own, with a
// Name of its own.
Bytes create_hmac_primary(uint8_t tag) {
  // fixedTPM | fixedParent | sensitiveDataOrigin | userWithAuth | noDA | sign
  return testing::create_hmac_primary(0x00040472, Bytes(32, tag));
}
Bytes context_load(ByteView context) {
  return testing::no_sessions_command(kCcContextLoad, [&](Writer& w) { w.bytes(context, "context"); });
}

// GetCapability(TPM_CAP_HANDLES) answered with `handles` (moreData NO).
Bytes handle_listing(const std::vector<uint32_t>& handles) {
  Writer w;
  w.u16(st::kNoSessions);
  auto size = w.begin_total_size32("responseSize");
  w.u32(0);
  w.u8(0);
  w.u32(cap::kHandles);
  w.u32(static_cast<uint32_t>(handles.size()));
  for (uint32_t h : handles) w.u32(h);
  w.end_size(size);
  return *w.finish();
}

// The Name in a ReadPublic response without sessions (outPublic, name, ...).
Bytes name_in_read_public(ByteView r) {
  if (rc_of(r) != 0) return {};
  Reader rd(r.subspan(10));
  (void)rd.tpm2b("outPublic");
  ByteView name = rd.tpm2b("name");
  return rd.ok() ? Bytes(name.begin(), name.end()) : Bytes();
}

// A raw client: its own connection, made by a process that is gone, so its
// own handle space (support/exited_peer.h).
class Client {
 public:
  explicit Client(const std::string& socket) : fd_(testing::connect_from_exited_process(socket)) {}
  ~Client() {
    if (fd_ >= 0) ::close(fd_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  bool connected() const { return fd_ >= 0; }
  Bytes send(ByteView command) { return transact(fd_, command); }
  // A new HMAC key: its virtual handle, 0 on failure.
  uint32_t create_key(uint8_t tag) {
    Bytes r = send(create_hmac_primary(tag));
    return rc_of(r) == 0 && r.size() >= 14 ? load_be32(r.data() + 10) : 0;
  }
  Bytes name_of(uint32_t key) { return name_in_read_public(send(with_handle(kCcReadPublic, key))); }

 private:
  int fd_;
};

// --- the suite: a swtpm and its null key's name; per test an interposer and a serve

class ServeInterposerTest : public testing::InterposedServeTest {
 protected:
  // tpmsec serve on the interposer, on its socket only; its stderr in serve.log.
  void start_serve() { start_serve_with({"--dbus", "none", "-v"}); }
  bool serve_running() { return serve_->alive(); }

  // The TPM handles the bus gave out for CreatePrimary(owner): the clients'
  // keys (the server's own salt key is a primary of the null hierarchy).
  std::vector<uint32_t> owner_primaries() {
    std::vector<uint32_t> out;
    auto cs = commands();
    auto rs = responses();
    for (size_t i = 0; i < cs.size() && i < rs.size(); ++i) {
      if (code_of(cs[i]) == kCcCreatePrimary && first_handle_of(cs[i]) == rh::kOwner && rc_of(rs[i]) == 0 &&
          rs[i].size() >= 14) {
        out.push_back(load_be32(rs[i].data() + 10));
      }
    }
    return out;
  }
  // A fresh client's GetRandom is served.
  void expect_serving() {
    Client fresh(socket_path());
    ASSERT_TRUE(fresh.connected());
    Bytes r = fresh.send(kGetRandom8);
    EXPECT_EQ(rc_of(r), 0u) << "serve stopped serving: " << to_hex(r) << "\n" << serve_log();
    EXPECT_EQ(r.size(), 10u + 2 + 8);
  }
};

// The server swaps a client's policy sessions (four of them and the
// server's own, on a TPM with three session slots). Then the interposer
// answers every ContextSave with TPM_RC_CONTEXT_GAP and every ContextLoad with
// TPM_RC_SESSION_MEMORY: bridging a gap needs a load, a load needs room,
// room needs a save, which has a gap. Each of the client's commands is
// answered, after a bounded number of commands on the bus; the server keeps
// serving.
TEST_F(ServeInterposerTest, ForgedContextGapAndSessionMemoryNeverLoopTheServer) {
  start_serve();
  Client a(socket_path());
  ASSERT_TRUE(a.connected());
  std::vector<uint32_t> sessions;
  for (int i = 0; i < 4; ++i) {
    Bytes r = a.send(start_auth_session(se::kPolicy));
    ASSERT_EQ(rc_of(r), 0u) << to_hex(r);
    sessions.push_back(load_be32(r.data() + 10));
  }
  for (uint32_t s : sessions) ASSERT_EQ(rc_of(a.send(with_handle(kCcPolicyGetDigest, s))), 0u);
  std::atomic<size_t> forged{0};
  set_rule([&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    if (c.code == kCcContextSave) return ++forged, testing::Reply::answer(error_frame(kRcContextGap));
    if (c.code == kCcContextLoad) return ++forged, testing::Reply::answer(error_frame(kRcSessionMemory));
    return testing::pass(c, tpm);
  });
  for (uint32_t s : sessions) {
    const size_t before = commands().size();
    Bytes r = a.send(with_handle(kCcPolicyGetDigest, s));
    ASSERT_GE(r.size(), 10u) << "no answer: the server is gone or stuck\n" << serve_log();
    EXPECT_LE(commands().size() - before, kBoundedWork) << "commands on the bus for one PolicyGetDigest";
  }
  EXPECT_GT(forged.load(), 0u) << "the server never swapped a session: the attack did not happen";
  set_rule(nullptr);
  ASSERT_TRUE(serve_running()) << serve_log();
  expect_serving();
  for (uint32_t s : sessions) (void)a.send(with_handle(kCcFlushContext, s));
}

// An extensive command (Clear: Part 2 §8.9, TPMA_CC.extensive) makes the
// manager save every client's object first and, with none left, sweep what
// nobody holds. The interposer answers every listing of transient handles
// with one nobody holds and every FlushContext with success: the sweep
// "succeeds" for ever. The command is answered after a bounded number of
// commands; the server keeps serving.
TEST_F(ServeInterposerTest, AForgedListingNeverMakesTheSweepEndless) {
  start_serve();
  Client a(socket_path());
  ASSERT_TRUE(a.connected());
  std::atomic<size_t> listings{0};
  set_rule([&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    if (c.code == kCcGetCapability && c.bytes.size() >= 22 && load_be32(c.bytes.data() + 10) == cap::kHandles &&
        (load_be32(c.bytes.data() + 14) >> 24) == ht::kTransient) {
      ++listings;
      return testing::Reply::answer(handle_listing({0x80FFFF00}));
    }
    if (c.code == kCcFlushContext && first_handle_of(c.bytes) == 0x80FFFF00) {
      return testing::Reply::answer(error_frame(0));
    }
    return testing::pass(c, tpm);
  });
  // Clear under the platform's authorization with a wrong password: the TPM
  // would refuse it (no DA for the platform hierarchy); the manager's sweep
  // comes before.
  const size_t before = commands().size();
  Bytes r = a.send(testing::password_command(kCcClear, {rh::kPlatform}, {}));
  ASSERT_GE(r.size(), 10u) << "no answer: the server is gone or stuck\n" << serve_log();
  EXPECT_LE(commands().size() - before, kBoundedWork) << "commands on the bus for one Clear";
  EXPECT_GT(listings.load(), 0u) << "the manager never swept: the attack did not happen";
  set_rule(nullptr);
  ASSERT_TRUE(serve_running()) << serve_log();
  expect_serving();
}

// When the TPM has no session slot and no client's session is left to swap
// out, the manager flushes the sessions nobody holds, as the TPM lists them.
// The interposer answers every StartAuthSession TPM_RC_SESSION_MEMORY and
// every listing of sessions with client B's session, the server's own and
// one nobody holds: only the last is ever flushed, and B's session and the
// server's serve on.
TEST_F(ServeInterposerTest, AForgedListingNeverMakesTheSweepFlushAnotherClientsOrTheServersSession) {
  start_serve();
  Client a(socket_path()), b(socket_path());
  ASSERT_TRUE(a.connected() && b.connected());
  Bytes started = b.send(start_auth_session(se::kPolicy));
  ASSERT_EQ(rc_of(started), 0u) << to_hex(started);
  const uint32_t b_session = load_be32(started.data() + 10);
  ASSERT_EQ(rc_of(b.send(with_handle(kCcPolicyGetDigest, b_session))), 0u);
  // The server's own sessions: salted (tpmKey is not TPM_RH_NULL).
  std::vector<uint32_t> listed = {b_session, 0x02FFFF00};
  auto cs = commands();
  auto rs = responses();
  for (size_t i = 0; i < cs.size() && i < rs.size(); ++i) {
    if (code_of(cs[i]) == kCcStartAuthSession && first_handle_of(cs[i]) != rh::kNull && rc_of(rs[i]) == 0) {
      listed.push_back(load_be32(rs[i].data() + 10));
    }
  }
  ASSERT_GE(listed.size(), 3u) << "the server's session never crossed the bus";
  std::atomic<size_t> listings{0};
  std::vector<uint32_t> flushed;
  set_rule([&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    if (c.code == kCcStartAuthSession) return testing::Reply::answer(error_frame(kRcSessionMemory));
    if (c.code == kCcGetCapability && c.bytes.size() >= 22 && load_be32(c.bytes.data() + 10) == cap::kHandles &&
        ht::is_session(load_be32(c.bytes.data() + 14))) {
      ++listings;
      return testing::Reply::answer(handle_listing(listed));
    }
    if (c.code == kCcFlushContext) {
      flushed.push_back(first_handle_of(c.bytes));
      if (first_handle_of(c.bytes) == 0x02FFFF00) return testing::Reply::answer(error_frame(0));
    }
    return testing::pass(c, tpm);
  });
  Bytes refused = a.send(start_auth_session(se::kPolicy));
  ASSERT_GE(refused.size(), 10u) << "no answer: the server is gone or stuck\n" << serve_log();
  EXPECT_NE(rc_of(refused), 0u);
  set_rule(nullptr);
  EXPECT_GT(listings.load(), 0u) << "the manager never swept: the attack did not happen";
  for (uint32_t h : flushed) EXPECT_EQ(h, 0x02FFFF00u) << "the sweep flushed 0x" << std::hex << h;
  Bytes digest = b.send(with_handle(kCcPolicyGetDigest, b_session));
  EXPECT_EQ(rc_of(digest), 0u) << "B's session is gone: " << to_hex(digest);
  expect_serving();
  EXPECT_EQ(rc_of(b.send(with_handle(kCcFlushContext, b_session))), 0u);
}

// The interposer rewrites the handle the TPM answers a client's object
// with — the ContextLoad that brings client A's swapped-out key back, or
// A's own CreatePrimary — into the TPM handle of client B's key, still
// loaded. The manager must not take B's key for A's: A never gets a context
// of B's key (a ContextSave of its own key, answered with success), nor a
// result computed with it.
class ServeInterposerHandleTest : public ServeInterposerTest, public ::testing::WithParamInterface<uint32_t> {};

TEST_P(ServeInterposerHandleTest, NeverHandsAnotherClientsObjectOut) {
  const uint32_t forged_code = GetParam();
  start_serve();
  Client a(socket_path()), b(socket_path());
  ASSERT_TRUE(a.connected() && b.connected());
  uint32_t a_key = 0;
  if (forged_code == kCcContextLoad) {
    a_key = a.create_key('A');
    ASSERT_NE(a_key, 0u);
  }
  // B's keys fill the TPM's three object slots: A's is swapped out.
  std::vector<uint32_t> b_keys;
  std::vector<Bytes> b_names;
  for (uint8_t tag : {'B', 'C', 'D'}) {
    b_keys.push_back(b.create_key(tag));
    ASSERT_NE(b_keys.back(), 0u);
    b_names.push_back(b.name_of(b_keys.back()));
    ASSERT_FALSE(b_names.back().empty());
  }
  const uint32_t b_loaded = owner_primaries().back();  // B's last key, loaded
  std::atomic<int> rewritten{0};
  set_rule([&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    testing::Reply reply = testing::pass(c, tpm);
    const bool target =
        c.code == forged_code && (forged_code != kCcCreatePrimary || first_handle_of(c.bytes) == rh::kOwner);
    if (target && reply.response && rc_of(*reply.response) == 0 && reply.response->size() >= 14 && rewritten == 0) {
      store_be32(reply.response->data() + 10, b_loaded);
      ++rewritten;
    }
    return reply;
  });
  if (forged_code == kCcContextLoad) {
    // A uses its key: the manager loads it back.
    Bytes used = a.send(hmac_with(a_key));
    (void)used;
  } else {
    a_key = a.create_key('A');
  }
  set_rule(nullptr);
  ASSERT_EQ(rewritten.load(), 1) << "the attack did not happen";

  // A's key, if it still has one: its context is never B's key's.
  if (a_key != 0) {
    Bytes saved = a.send(with_handle(kCcContextSave, a_key));
    if (rc_of(saved) == 0) {
      Bytes loaded = a.send(context_load(ByteView(saved).subspan(10)));
      ASSERT_EQ(rc_of(loaded), 0u) << to_hex(loaded);
      const uint32_t copy = load_be32(loaded.data() + 10);
      Bytes name = a.name_of(copy);
      for (const Bytes& b_name : b_names) EXPECT_NE(name, b_name) << "A was handed a context of B's key";
      (void)a.send(with_handle(kCcFlushContext, copy));
    }
    for (const Bytes& b_name : b_names) EXPECT_NE(a.name_of(a_key), b_name) << "A's key is B's";
  }
  // B's other keys still serve B; the server serves on.
  EXPECT_EQ(rc_of(b.send(hmac_with(b_keys[1]))), 0u) << serve_log();
  expect_serving();
}

INSTANTIATE_TEST_SUITE_P(ContextLoadAndCreatePrimary, ServeInterposerHandleTest,
                         ::testing::Values(kCcContextLoad, kCcCreatePrimary), [](const auto& info) {
                           return info.param == kCcContextLoad ? "ContextLoad" : "CreatePrimary";
                         });

// The manager swaps client A's key out; the interposer answers its
// ContextSave with a fresh context of client B's key (saved by a command of
// its own) and a third client comes between. When A uses its key again, the
// manager loads B's key in its place: A's HMAC and its ReadPublic must fail,
// never succeed with B's key (the Name the server's session authenticated
// for A's key stays A's key's, so the TPM refuses the swapped one).
TEST_F(ServeInterposerTest, AForgedContextOfAnotherClientsKeyIsRefusedByItsName) {
  start_serve();
  Client a(socket_path()), b(socket_path()), c(socket_path());
  ASSERT_TRUE(a.connected() && b.connected() && c.connected());
  const uint32_t a_key = a.create_key('A');
  ASSERT_NE(a_key, 0u);
  const Bytes a_name = a.name_of(a_key);
  ASSERT_FALSE(a_name.empty());
  const uint32_t a_loaded = owner_primaries().back();
  const uint32_t b_key = b.create_key('B');
  ASSERT_NE(b_key, 0u);
  const Bytes b_name = b.name_of(b_key);
  ASSERT_NE(b_name, a_name);
  const uint32_t b_loaded = owner_primaries().back();
  Bytes b_hmac = b.send(hmac_with(b_key));
  ASSERT_EQ(rc_of(b_hmac), 0u);
  std::atomic<int> swapped{0};
  set_rule([&](const testing::ProxiedCommand& cmd, testing::Upstream& tpm) {
    if (cmd.code == kCcContextSave && first_handle_of(cmd.bytes) == a_loaded && swapped == 0) {
      auto theirs = tpm.transmit(with_handle(kCcContextSave, b_loaded));
      if (theirs.ok() && rc_of(*theirs) == 0) {
        ++swapped;
        return testing::Reply::answer(*theirs);
      }
    }
    return testing::pass(cmd, tpm);
  });
  // B's keys push A's out of the TPM's three slots.
  for (uint8_t tag : {'C', 'D', 'E'}) ASSERT_NE(b.create_key(tag), 0u);
  set_rule(nullptr);
  ASSERT_EQ(swapped.load(), 1) << "A's key was never swapped out: the attack did not happen";
  ASSERT_EQ(rc_of(c.send(kGetRandom8)), 0u);  // another client between A's commands

  Bytes hmac = a.send(hmac_with(a_key));
  EXPECT_NE(rc_of(hmac), 0u) << "A's HMAC was computed with B's key";
  EXPECT_NE(hmac.size() > 10 ? Bytes(hmac.begin() + 10, hmac.end()) : Bytes(),
            b_hmac.size() > 10 ? Bytes(b_hmac.begin() + 10, b_hmac.end()) : Bytes());
  Bytes read = a.send(with_handle(kCcReadPublic, a_key));
  if (rc_of(read) == 0) {
    EXPECT_NE(name_in_read_public(read), b_name) << "A read B's key as its own";
  }
  EXPECT_EQ(rc_of(b.send(hmac_with(b_key))), 0u) << "B's key no longer serves B";
  expect_serving();
}

// tpm2-tools' way with a key: client A saves its key's context (to a file)
// and loads it again later. The interposer rewrites that ContextLoad's
// context into one of client B's key (B's own ContextSave, seen on the
// bus). The key A gets must not be used as A's: the Name the server's
// session authenticated when A saved the context stays the context's, so the
// TPM refuses A's HMAC with B's key, and A never reads B's key as its own.
TEST_F(ServeInterposerTest, AContextLoadRewrittenOnTheBusIsRefusedByTheSavedName) {
  start_serve();
  Client a(socket_path()), b(socket_path()), c(socket_path());
  ASSERT_TRUE(a.connected() && b.connected() && c.connected());
  const uint32_t a_key = a.create_key('A');
  ASSERT_NE(a_key, 0u);
  const Bytes a_name = a.name_of(a_key);
  Bytes a_saved = a.send(with_handle(kCcContextSave, a_key));
  ASSERT_EQ(rc_of(a_saved), 0u) << to_hex(a_saved);
  const Bytes a_context(a_saved.begin() + 10, a_saved.end());
  ASSERT_EQ(rc_of(a.send(with_handle(kCcFlushContext, a_key))), 0u);
  const uint32_t b_key = b.create_key('B');
  ASSERT_NE(b_key, 0u);
  const Bytes b_name = b.name_of(b_key);
  ASSERT_NE(b_name, a_name);
  Bytes b_saved = b.send(with_handle(kCcContextSave, b_key));
  ASSERT_EQ(rc_of(b_saved), 0u) << to_hex(b_saved);
  const Bytes b_context(b_saved.begin() + 10, b_saved.end());
  Bytes b_hmac = b.send(hmac_with(b_key));
  ASSERT_EQ(rc_of(b_hmac), 0u);
  ASSERT_EQ(rc_of(c.send(kGetRandom8)), 0u);  // another client between A's commands

  std::atomic<int> rewritten{0};
  set_rule([&](const testing::ProxiedCommand& cmd, testing::Upstream& tpm) {
    if (cmd.code == kCcContextLoad && contains(cmd.bytes, a_context)) {
      ++rewritten;
      auto r = tpm.transmit(context_load(b_context));
      return r.ok() ? testing::Reply::answer(*r) : testing::Reply::close();
    }
    return testing::pass(cmd, tpm);
  });
  Bytes loaded = a.send(context_load(a_context));
  set_rule(nullptr);
  ASSERT_EQ(rewritten.load(), 1) << "the attack did not happen";
  ASSERT_EQ(rc_of(loaded), 0u) << to_hex(loaded);
  const uint32_t copy = load_be32(loaded.data() + 10);
  Bytes hmac = a.send(hmac_with(copy));
  EXPECT_NE(rc_of(hmac), 0u) << "A's HMAC was computed with B's key";
  Bytes read = a.send(with_handle(kCcReadPublic, copy));
  if (rc_of(read) == 0) {
    EXPECT_NE(name_in_read_public(read), b_name) << "A read B's key as its own";
  }
  (void)a.send(with_handle(kCcFlushContext, copy));
  EXPECT_EQ(rc_of(b.send(hmac_with(b_key))), 0u) << "B's key no longer serves B";
  expect_serving();
}

// The interposer forwards a client's PCR_Extend (under the server's session:
// the TPM rolls the session's nonce) and answers it with an error, as if the
// TPM had refused it. The server's session is then out of step with the
// TPM; the next clients' commands — one under the session alone (GetRandom),
// one whose password the session replaced (HMAC) — are served all the same.
TEST_F(ServeInterposerTest, AnErrorForgedOverARealAnswerNeverStopsTheServer) {
  start_serve();
  Client a(socket_path()), b(socket_path());
  ASSERT_TRUE(a.connected() && b.connected());
  const uint32_t b_key = b.create_key('B');
  ASSERT_NE(b_key, 0u);
  Writer digests;
  digests.u32(1);
  digests.u16(alg::kSha256);
  digests.bytes(Bytes(32, 0x38), "digest");
  const Bytes extend = testing::password_command(0x182, {16}, *digests.finish());
  std::atomic<int> forged{0};
  set_rule([&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    testing::Reply reply = testing::pass(c, tpm);
    if (c.code == 0x182 && reply.response && rc_of(*reply.response) == 0) {
      ++forged;
      return testing::Reply::answer(error_frame(rc_parameter(rc::kValue, 1)));
    }
    return reply;
  });
  Bytes refused = a.send(extend);
  set_rule(nullptr);
  ASSERT_EQ(forged.load(), 1) << "the attack did not happen: " << to_hex(refused);
  EXPECT_NE(rc_of(refused), 0u);
  expect_serving();
  EXPECT_EQ(rc_of(b.send(hmac_with(b_key))), 0u) << serve_log();
  EXPECT_EQ(rc_of(a.send(extend)), 0u) << serve_log();
}

// --- Names changed by a command that passes through without the server's session

// The parameters of NV_DefineSpace: an empty auth, an owner-written and -read
// index of `size` bytes.
Bytes nv_define_parameters(uint32_t index, uint16_t size) {
  Writer w;
  w.u16(0);  // auth
  Writer pub;
  pub.u32(index);
  pub.u16(alg::kSha256);
  pub.u32(0x00020002);  // ownerwrite | ownerread
  pub.u16(0);           // authPolicy
  pub.u16(size);
  w.tpm2b(*pub.finish(), "publicInfo");
  return *w.finish();
}
Bytes nv_write_parameters(ByteView data) {
  Writer w;
  w.tpm2b(data, "data");
  w.u16(0);  // offset
  return *w.finish();
}

// Client W writes an owner index through the server (its password made an
// HMAC authorization by the server's session, the index's Name read audited
// and cached). Client P, whose commands carry an audit session of its own
// (so the server's session has no place and they pass through), undefines
// the index and defines it again with another size: another Name. W's next
// write must read the Name again (audited NV_ReadPublic) and succeed, its
// data never in clear. Then P's Clear (passed through) removes the index: W's
// next read reads the Name again too and is refused by the TPM.
TEST_F(ServeInterposerTest, ACommandPassedThroughStillMakesTheNamesItChangesStale) {
  start_serve();
  const uint32_t index = 0x01500038;
  const std::string first = "first-38", second = "second38";
  auto wt = open_transport("serve:path=" + socket_path());
  ASSERT_TRUE(wt.ok()) << wt.error().message();
  auto pt = open_transport("serve:path=" + socket_path());
  ASSERT_TRUE(pt.ok()) << pt.error().message();
  Tpm w(**wt), p(**pt);
  const NamedHandle owner = NamedHandle::of(rh::kOwner), nv = NamedHandle::of(index);
  const NamedHandle* define_handles[] = {&owner};
  const NamedHandle* nv_handles[] = {&owner, &nv};
  const Auth password[] = {Auth::password()};
  auto defined = w.execute(command_info<kCcNvDefineSpace>(), define_handles, nv_define_parameters(index, 8), password);
  ASSERT_TRUE(defined.ok()) << defined.error().message();
  auto written = w.execute(command_info<kCcNvWrite>(), nv_handles, nv_write_parameters(as_bytes(first)), password);
  ASSERT_TRUE(written.ok()) << written.error().message();
  auto read = w.run(cmd::NvRead{owner, nv, 8, 0}, password);
  ASSERT_TRUE(read.ok()) << read.error().message();
  EXPECT_EQ(read->data.bytes, Bytes(first.begin(), first.end()));

  // P: its own unsalted HMAC session, auditing, authorizes the owner.
  SessionOptions options;
  options.symmetric = SymDef{};
  options.attributes = attr::kContinueSession | attr::kAudit;
  auto session = HmacSession::start(p, options);
  ASSERT_TRUE(session.ok()) << session.error().message();
  const Auth audited[] = {Auth{session->get(), {}}};
  auto public_area = p.run(cmd::NvReadPublic{nv});
  ASSERT_TRUE(public_area.ok()) << public_area.error().message();
  const NamedHandle named{index, public_area->nv_name.bytes};
  const size_t passed_from = commands().size();
  auto undefined = p.run(cmd::NvUndefineSpace{owner, named}, audited);
  ASSERT_TRUE(undefined.ok()) << undefined.error().message();
  auto redefined =
      p.execute(command_info<kCcNvDefineSpace>(), define_handles, nv_define_parameters(index, 16), audited);
  ASSERT_TRUE(redefined.ok()) << redefined.error().message();
  // They went out under P's session alone: passed through.
  size_t passed = 0;
  auto cs = commands();
  for (size_t i = passed_from; i < cs.size(); ++i) {
    if (code_of(cs[i]) != 0x122 && code_of(cs[i]) != kCcNvDefineSpace) continue;
    auto parsed = testing::parse_command(cs[i]);
    ASSERT_TRUE(parsed.ok());
    ASSERT_EQ(parsed->sessions.size(), 1u);
    EXPECT_EQ(parsed->sessions[0].handle, (*session)->handle());
    ++passed;
  }
  ASSERT_EQ(passed, 2u);

  const size_t rewrite_from = commands().size();
  auto rewritten = w.execute(command_info<kCcNvWrite>(), nv_handles, nv_write_parameters(as_bytes(second)), password);
  EXPECT_TRUE(rewritten.ok()) << "W's write went out under the index's old Name: "
                              << (rewritten.ok() ? "" : rewritten.error().message());
  bool read_again = false;
  cs = commands();
  for (size_t i = rewrite_from; i < cs.size(); ++i) {
    if (code_of(cs[i]) == kCcNvWrite) break;
    read_again |= code_of(cs[i]) == kCcNvReadPublic && tag_of(cs[i]) == st::kSessions;
  }
  EXPECT_TRUE(read_again) << "no audited NV_ReadPublic before the write";
  auto reread = w.run(cmd::NvRead{owner, nv, 8, 0}, password);
  ASSERT_TRUE(reread.ok()) << reread.error().message();
  EXPECT_EQ(reread->data.bytes, Bytes(second.begin(), second.end()));
  EXPECT_FALSE(contains(bus(), as_bytes(second))) << "W's data crossed the bus in clear";

  // P's Clear (the platform's authorization, under its auditing session).
  const NamedHandle platform = NamedHandle::of(rh::kPlatform);
  const NamedHandle* clear_handles[] = {&platform};
  auto cleared = p.execute(command_info<kCcClear>(), clear_handles, {}, audited);
  ASSERT_TRUE(cleared.ok()) << cleared.error().message();
  const size_t after_clear = commands().size();
  auto gone = w.run(cmd::NvRead{owner, nv, 8, 0}, password);
  EXPECT_FALSE(gone.ok()) << "the index outlived the Clear";
  cs = commands();
  bool asked = false;
  for (size_t i = after_clear; i < cs.size(); ++i) asked |= code_of(cs[i]) == kCcNvReadPublic;
  EXPECT_TRUE(asked) << "W's read after the Clear used the cached Name";
  session->reset();
}

}  // namespace
}  // namespace tpmsec
