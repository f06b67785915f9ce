#include "support/private_bus.h"

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <systemd/sd-bus.h>

#include "testing/child_process.h"
#include "testing/dbus_daemon.h"

namespace tpmsec::testing {
namespace {

namespace fs = std::filesystem;

std::string source_dir() {
  fs::path here = fs::path(TPMSEC_TEST_DATA).parent_path();  // tests/
  return here.parent_path().string();
}

}  // namespace

// The system bus's default policy (Debian 12's
// /usr/share/dbus-1/system.conf), with tpmsec's policy file included.
bool PrivateBus::start(const std::vector<std::string>& extra_names, std::string* error) {
  char tmpl[] = "/tmp/tpmsec-dbus-XXXXXX";
  if (!::mkdtemp(tmpl)) return false;
  dir_ = tmpl;
  std::ofstream conf(dir_ + "/bus.conf");
  conf << R"(<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:abstract=)"
       << dir_ << R"(/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
    <deny send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"
          send_member="UpdateActivationEnvironment"/>
  </policy>
  <include>)"
       << source_dir() << R"(/packaging/dbus/tpmsec.conf</include>
  <policy context="default">
)";
  for (const auto& name : extra_names) {
    conf << "    <allow own=\"" << name << "\"/>\n    <allow send_destination=\"" << name << "\"/>\n";
  }
  conf << "  </policy>\n</busconfig>\n";
  conf.close();
  pid_ = start_dbus_daemon({"--config-file=" + dir_ + "/bus.conf"}, &address_);
  if (pid_ <= 0) return false;
  if (address_.empty()) *error = "dbus-daemon printed no address";
  return !address_.empty();
}

void PrivateBus::stop() {
  stop_child(pid_);
  if (!dir_.empty()) fs::remove_all(dir_);
  dir_.clear();
}

bool name_has_owner(const std::string& address, const std::string& name) {
  sd_bus* bus = nullptr;
  bool owned = false;
  if (sd_bus_new(&bus) >= 0 && sd_bus_set_address(bus, address.c_str()) >= 0 && sd_bus_set_bus_client(bus, 1) >= 0 &&
      sd_bus_start(bus) >= 0) {
    sd_bus_message* reply = nullptr;
    int has = 0;
    if (sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner",
                           nullptr, &reply, "s", name.c_str()) >= 0 &&
        sd_bus_message_read(reply, "b", &has) >= 0) {
      owned = has;
    }
    sd_bus_message_unref(reply);
  }
  sd_bus_flush_close_unref(bus);
  return owned;
}

bool wait_for_owner(const std::string& address, const std::string& name, bool owned) {
  using Clock = std::chrono::steady_clock;
  for (auto end = Clock::now() + std::chrono::seconds(60); Clock::now() < end;) {
    if (name_has_owner(address, name) == owned) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace tpmsec::testing
