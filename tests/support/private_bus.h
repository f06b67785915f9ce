// A private D-Bus daemon with the system bus's default-deny policy and
// tpmsec's policy file (packaging/dbus/tpmsec.conf) included, as on a host,
// and the programs a test starts beside it (tpmsec serve, tpm2-abrmd). Shared
// by the tests that run real D-Bus clients against `tpmsec serve`
// (tabrmd_bus_test, serve_attack_test).
#ifndef TPMSEC_TESTS_SUPPORT_PRIVATE_BUS_H_
#define TPMSEC_TESTS_SUPPORT_PRIVATE_BUS_H_

#include <sys/types.h>

#include <string>
#include <vector>

// The programs beside it are started and stopped with testing::spawn and testing::Child.
#include "testing/child_process.h"

namespace tpmsec::testing {

// The private bus: every user may connect, nothing may be owned and no
// method called but what tpmsec's policy file (and `extra_names`, for the
// test's own servers) opens. An abstract socket, so that another user can
// connect and only the policy decides.
class PrivateBus {
 public:
  ~PrivateBus() { stop(); }
  bool start(const std::vector<std::string>& extra_names, std::string* error);
  void stop();
  const std::string& address() const { return address_; }

 private:
  pid_t pid_ = -1;
  std::string dir_;
  std::string address_;
};

// Whether `name` has an owner on the bus at `address` (NameHasOwner).
bool name_has_owner(const std::string& address, const std::string& name);
// Waits up to 60 s until `name` is owned (or free): true when it happened.
bool wait_for_owner(const std::string& address, const std::string& name, bool owned);

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_PRIVATE_BUS_H_
