#include "soak/rig.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "soak/frames.h"
#include "testing/child_process.h"
#include "testing/dbus_daemon.h"
#include "tpmsec-server/protected_server/status.h"
#include "tpmsec/constants.h"
#include "tpmsec/wire.h"

namespace tpmsec::soak {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr auto kStartDeadline = std::chrono::seconds(120);

using testing::spawn;

bool exited(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == pid;
}

// SIGTERM (to a stopped one too); its exit code, 128 + the signal when killed.
int stop(pid_t& pid) {
  if (pid <= 0) return -1;
  return testing::exit_code_of(testing::stop_child(pid));
}

// A loopback port P with P + 1 free as well (the emulator's control port).
uint16_t free_port_pair() {
  for (int attempt = 0; attempt < 64; ++attempt) {
    uint16_t port = 0;
    for (int i = 0; i < 2; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(i == 0 ? 0 : port + 1);
      socklen_t len = sizeof(a);
      bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
      ::close(fd);
      if (!ok) break;
      if (i == 0) port = ntohs(a.sin_port);
      if (i == 1 && port < 65535) return port;
    }
  }
  return 0;
}

// The bus lets every uid connect, own and call: a host whose policy opens
// tpmsec's name to the group all the soak's users are in.
const char* kBusConfig = R"(<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:abstract=@DIR@/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
)";

}  // namespace

Rig::~Rig() {
  stop(serve_);
  stop(bus_);
  stop(emulator_);
}

bool Rig::start(const RigOptions& o, std::string* error) {
  dir_ = o.dir;
  return start_emulator(o, error) && start_bus(error) && start_serve(o, error);
}

bool Rig::start_emulator(const RigOptions& o, std::string* error) {
  port_ = free_port_pair();
  emulator_ = spawn({o.cli, "emulate", o.profile, "--clock", "virtual", "--means", "-q", "--host", "127.0.0.1",
                     "--port", std::to_string(port_)},
                    {}, nullptr, dir_ + "/emulate.log");
  for (auto end = Clock::now() + kStartDeadline; Clock::now() < end && !exited(emulator_);) {
    if ((tpm_ = connect_tcp(port_))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  *error = "tpmsec emulate did not start (" + dir_ + "/emulate.log)";
  return false;
}

bool Rig::start_bus(std::string* error) {
  std::string conf = kBusConfig;
  conf.replace(conf.find("@DIR@"), 5, dir_);
  std::ofstream(dir_ + "/bus.conf") << conf;
  std::string address;
  bus_ = testing::start_dbus_daemon({"--config-file=" + dir_ + "/bus.conf"}, &address, dir_ + "/bus.log");
  if (address.empty()) *error = "dbus-daemon printed no address (" + dir_ + "/bus.log)";
  ::setenv("DBUS_SESSION_BUS_ADDRESS", address.c_str(), 1);
  return !address.empty();
}

// serve with the service manager's READY=1 waited for: its socket served,
// its bus name taken and its session started.
bool Rig::start_serve(const RigOptions& o, std::string* error) {
  const std::string notify = dir_ + "/notify";
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", notify.c_str());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    *error = "cannot bind " + notify;
    return false;
  }
  const std::string tpm = "swtpm:host=127.0.0.1,port=" + std::to_string(port_) + ",ctrl=" + std::to_string(port_ + 1);
  serve_ = spawn({o.cli, "serve", "--allow-root", "--tpm", tpm, "--dbus", "session", "--socket", socket(),
                  "--socket-group", "nogroup"},
                 {"NOTIFY_SOCKET=" + notify, "TPMSEC_STATE_DIR=" + dir_ + "/state"}, nullptr, serve_log());
  bool ready = false;
  for (auto end = Clock::now() + kStartDeadline; !ready && Clock::now() < end && !exited(serve_);) {
    pollfd p{fd, POLLIN, 0};
    char buf[512] = {};
    if (::poll(&p, 1, 100) > 0 && ::recv(fd, buf, sizeof(buf) - 1, 0) > 0)
      ready = std::string(buf).find("READY=1") != std::string::npos;
  }
  ::close(fd);
  ::unlink(notify.c_str());  // its later STATUS= lines go nowhere, never into a full queue
  if (!ready) *error = "tpmsec serve did not get ready (" + serve_log() + ")";
  return ready;
}

long Rig::rss_kib() const {
  std::ifstream in("/proc/" + std::to_string(serve_) + "/status");
  std::string key;
  long value = -1;
  while (in >> key) {
    if (key == "VmRSS:" && in >> value) return value;
    in.ignore(4096, '\n');
  }
  return -1;
}

long Rig::open_fds() const {
  std::error_code ec;
  long n = 0;
  for (fs::directory_iterator it("/proc/" + std::to_string(serve_) + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++n;
  }
  return ec ? -1 : n;
}

std::optional<TpmHandles> Rig::tpm_handles() {
  TpmHandles h;
  const std::pair<uint32_t, std::vector<uint32_t>*> kinds[] = {{ht::kFirstTransient, &h.transient},
                                                               {ht::kFirstLoadedSession, &h.loaded_sessions},
                                                               {ht::kFirstSavedSession, &h.saved_sessions}};
  for (auto [first, list] : kinds) {
    auto answer = tpm_ ? tpm_->transact(get_handles(first)) : std::nullopt;
    if (!answer && (tpm_ = connect_tcp(port_))) answer = tpm_->transact(get_handles(first));  // a reset closed it
    auto listed = answer ? listed_handles(*answer) : std::nullopt;
    if (!listed) return std::nullopt;
    for (uint32_t handle : *listed) {
      if ((handle >> 24) == (first >> 24)) list->push_back(handle);
    }
  }
  return h;
}

std::string Rig::status() {
  auto conn = connect_socket(socket());
  auto answer = conn ? conn->transact(serve::status_request()) : std::nullopt;
  if (!answer) return {};
  auto json = serve::read_status_response(*answer);
  return json.ok() ? *json : std::string();
}

std::unique_ptr<Connection> Rig::only_client() {
  auto conn = connect_socket(socket());
  for (auto end = Clock::now() + std::chrono::seconds(60); conn && Clock::now() < end;) {
    auto answer = conn->transact(serve::status_request());
    auto json = answer ? serve::read_status_response(*answer) : Result<std::string>(std::string());
    auto status = nlohmann::json::parse(json.ok() ? *json : std::string(), nullptr, false);
    if (status.is_object() && status["clients"].value("connected", 0) == 1) return conn;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return nullptr;
}

bool Rig::reset_tpm() {
  int fd = connect_loopback(static_cast<uint16_t>(port_ + 1));
  if (fd < 0) return false;
  // CMD_INIT (2) with flags 0, answered by a u32 result (0: done).
  const uint8_t init[] = {0, 0, 0, 2, 0, 0, 0, 0};
  uint8_t result[4] = {1};
  bool done = ::send(fd, init, sizeof(init), MSG_NOSIGNAL) == sizeof(init) &&
              ::recv(fd, result, sizeof(result), MSG_WAITALL) == sizeof(result) && load_be32(result) == 0;
  ::close(fd);
  return done;
}

void Rig::stall_tpm(int seconds) {
  ::kill(emulator_, SIGSTOP);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  ::kill(emulator_, SIGCONT);
}

int Rig::stop_serve() { return stop(serve_); }

}  // namespace tpmsec::soak
