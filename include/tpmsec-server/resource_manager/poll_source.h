// What the server's loop polls besides its clients: a front end's event
// source (a listening socket, the D-Bus connection). Server::add_source()
// owns it; the loop polls fd() for events(), and calls process() when the
// descriptor is ready or timeout_ms() has run out (-1: no timeout), on the
// loop's thread, between two TPM commands. process() handles what is pending
// without waiting for anyone; an error ends Server::run() with it (the
// source is dead: its supervisor restarts the server).
#ifndef TPMSEC_SERVER_RESOURCE_MANAGER_POLL_SOURCE_H_
#define TPMSEC_SERVER_RESOURCE_MANAGER_POLL_SOURCE_H_

#include "tpmsec/result.h"

namespace tpmsec::server {

class PollSource {
 public:
  virtual ~PollSource() = default;
  virtual int fd() const = 0;
  virtual short events() const = 0;
  virtual int timeout_ms() const = 0;
  virtual Status process() = 0;
};

}  // namespace tpmsec::server

#endif  // TPMSEC_SERVER_RESOURCE_MANAGER_POLL_SOURCE_H_
