// A man in the middle on swtpm's data port: a TCP proxy on a free loopback
// port that the tpmsec CLI connects to (--tpm swtpm:host=127.0.0.1,port=P)
// instead of swtpm, and that hands every command to a scripted rule before
// anything reaches the TPM. The rule sees the command and the real TPM
// (swtpm, through an upstream connection of its own) and decides:
//   pass                 forward it, return the TPM's response;
//   rewrite the command  forward different bytes;
//   rewrite the response forward, change what comes back;
//   forge                answer without forwarding (or after forwarding
//                        something else, or nothing);
//   drop                 close the client's connection (before or after
//                        forwarding: a response lost on the bus);
//   delay                wait before answering.
// This is what an active interposer on a TPM bus can do (docs/threat-model.md);
// the test decides which.
//
// The wire protocol is swtpm's data channel as tpmsec's swtpm transport
// speaks it (src/transport/swtpm_transport.cc): raw TPM command frames, each
// answered by one response frame. Frames are read by their header (Reader,
// tpmsec/wire.h) and bounded to 64 KiB; a malformed frame closes the
// connection.
//
// One client at a time, as swtpm itself serves: the upstream connection is
// opened at a client's first command and closed with the client, so between
// clients swtpm is free for the test's own direct connection. The proxy runs
// in one thread; stop() (and the destructor) wake it, close every socket and
// join it. Rules run on that thread; state a rule records is the test's to
// read after wait_idle(), which orders it.
#ifndef TPMSEC_TESTS_SUPPORT_INTERPOSER_H_
#define TPMSEC_TESTS_SUPPORT_INTERPOSER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec::testing {

// One command as the interposer received it.
struct ProxiedCommand {
  size_t index = 0;          // every command since start(), over all connections, from 0
  size_t in_connection = 0;  // this connection's commands, from 0
  size_t connection = 0;     // client connections since start(), from 0
  uint32_t code = 0;         // the command code of its header
  Bytes bytes;               // the whole frame
};

// The real TPM, as the rule reaches it: any number of commands per client
// command (none, to forge; several, to inject).
class Upstream {
 public:
  virtual ~Upstream() = default;
  virtual Result<Bytes> transmit(ByteView command) = 0;
};

// What the client gets.
struct Reply {
  std::optional<Bytes> response;  // nullopt: the connection is closed instead
  std::chrono::milliseconds delay{0};

  static Reply answer(Bytes response) { return Reply{std::move(response)}; }
  static Reply close() { return Reply{}; }
};

using Rule = std::function<Reply(const ProxiedCommand& command, Upstream& tpm)>;

// Forwards the command and answers with the TPM's response; closes the
// client's connection when the TPM cannot be reached.
Reply pass(const ProxiedCommand& command, Upstream& tpm);

class Interposer {
 public:
  // Proxies to swtpm's data port on 127.0.0.1:upstream_port.
  explicit Interposer(uint16_t upstream_port) : upstream_port_(upstream_port) {}
  Interposer(const Interposer&) = delete;
  Interposer& operator=(const Interposer&) = delete;
  ~Interposer() { stop(); }

  // Listens on a free loopback port and starts the proxy thread.
  Status start();
  // Closes the listening socket and any connection, joins the thread. Idempotent.
  void stop();

  uint16_t port() const { return port_; }
  // The TPM string that reaches swtpm through the interposer.
  std::string spec() const;

  // The rule for the commands from now on (nullptr: pass). Set it while idle.
  void set_rule(Rule rule);
  // Blocks until no client is connected (the last client's connection was
  // closed by either side and its upstream connection with it).
  void wait_idle();

  // Commands received since start() (all connections), and connections accepted.
  size_t commands() const;
  size_t connections() const;

 private:
  void run();
  void serve(int client_fd);

  uint16_t upstream_port_;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // stop() writes to wake_[1]
  std::thread thread_;

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  bool busy_ = false;
  Rule rule_;
  size_t commands_ = 0;
  size_t connections_ = 0;
};

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_INTERPOSER_H_
