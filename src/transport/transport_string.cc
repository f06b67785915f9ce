// TPM strings in tpm2-tss TCTI syntax, and the TPMs behind a bus they name
// (device, swtpm, mssim). The embedded TPM is opened in transport_spec.cc,
// the one place that links libtpms' transport.
#include <sys/stat.h>

#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "tpmsec/transport/tpm_string.h"
#include "tpmsec/transport/transports.h"

namespace tpmsec {
namespace {

const std::set<std::string>& allowed_keys(const std::string& scheme) {
  static const std::set<std::string> embedded{"state"};
  static const std::set<std::string> swtpm{"host", "port", "path", "ctrl", "ctrlpath", "ctrlhost", "handles"};
  static const std::set<std::string> mssim{"host", "port", "handles"};
  static const std::set<std::string> device{"path"};
  static const std::set<std::string> serve{"path", "uid"};
  if (scheme == "embedded") return embedded;
  if (scheme == "serve") return serve;
  if (scheme == "swtpm") return swtpm;
  if (scheme == "mssim") return mssim;
  return device;
}

Result<uint16_t> parse_port(const std::string& key, const std::string& value) {
  if (value.empty() || value.size() > 5 || value.find_first_not_of("0123456789") != std::string::npos) {
    return usage_error(fmt::format("{}={} is not a port number", key, value));
  }
  unsigned long n = std::strtoul(value.c_str(), nullptr, 10);
  if (n == 0 || n > 65535) return usage_error(fmt::format("{}={} is outside 1-65535", key, value));
  return static_cast<uint16_t>(n);
}

// serve:...,uid=N: a decimal uid below 2^32 - 1 ((uid_t)-1 is no user).
Result<uint32_t> parse_uid(const std::string& value) {
  if (value.empty() || value.size() > 10 || value.find_first_not_of("0123456789") != std::string::npos ||
      std::strtoull(value.c_str(), nullptr, 10) >= 0xffffffffULL) {
    return usage_error(fmt::format("serve: uid={} is not a uid", value));
  }
  return static_cast<uint32_t>(std::strtoull(value.c_str(), nullptr, 10));
}

}  // namespace

Result<TpmSpec> parse_transport_spec(std::string_view text) {
  TpmSpec spec;
  std::string s(text);
  size_t colon = s.find(':');
  spec.scheme = s.substr(0, colon);
  std::string rest = colon == std::string::npos ? "" : s.substr(colon + 1);
  if (spec.scheme.empty()) return usage_error(fmt::format("TPM string '{}' has no scheme", s));
  if (spec.scheme != "embedded" && spec.scheme != "swtpm" && spec.scheme != "mssim" && spec.scheme != "device" &&
      spec.scheme != "serve") {
    return usage_error(fmt::format(
        "unknown TPM transport '{}' (expected embedded, swtpm:host=H,port=P, mssim:host=H,port=P, device:PATH or "
        "serve:path=SOCKET)",
        spec.scheme));
  }
  spec.kind = spec.scheme == "embedded" ? TpmKind::kEmbedded
              : spec.scheme == "swtpm"  ? TpmKind::kSwtpm
              : spec.scheme == "mssim"  ? TpmKind::kMssim
              : spec.scheme == "serve"  ? TpmKind::kServe
                                        : TpmKind::kDevice;
  // device:PATH takes a bare path, as tpm2-tss's device TCTI does.
  if (spec.scheme == "device" && !rest.empty() && rest.find('=') == std::string::npos) {
    spec.path = rest;
    return spec;
  }
  size_t start = 0;
  while (start < rest.size()) {
    size_t comma = rest.find(',', start);
    std::string item = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? rest.size() : comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return usage_error(fmt::format("malformed option '{}' in TPM string '{}' (expected key=value)", item, s));
    }
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (!allowed_keys(spec.scheme).count(key)) {
      return usage_error(fmt::format("unknown option '{}' for the {} transport", key, spec.scheme));
    }
    if (value.empty()) return usage_error(fmt::format("option '{}' in TPM string '{}' has no value", key, s));
    if (spec.options.count(key)) return usage_error(fmt::format("option '{}' given twice in '{}'", key, s));
    spec.options[key] = value;
  }
  if (spec.scheme == "device") {
    spec.path = spec.options.count("path") ? spec.options["path"] : "/dev/tpm0";
  }
  if (spec.scheme == "serve") {
    spec.path = spec.options.count("path") ? spec.options["path"] : kServeSocket;
    if (spec.options.count("uid")) TPMSEC_RETURN_IF_ERROR(status_of(parse_uid(spec.options["uid"])));
  }
  if (spec.scheme == "mssim" && spec.options.count("port")) {
    TPMSEC_ASSIGN_OR_RETURN(uint16_t port, parse_port("port", spec.options["port"]));
    if (port == 65535) return usage_error("mssim: port=65535 leaves no platform port (port + 1)");
  }
  // handles=private: the user asserts that the server gives this
  // connection handles of its own and flushes them when it closes (as
  // /dev/tpmrm0 does; `tpmsec emulate --private-handles`), so the handle
  // ledger takes no baseline and never sweeps (handle_ledger.h). Wrongly
  // asserted, tpmsec can only leave a handle behind after a fault, never
  // flush someone else's: the ledger then flushes only what it owns.
  if (spec.options.count("handles") && spec.options["handles"] != "private") {
    return usage_error(fmt::format("{}: handles={} is not understood (the only value is handles=private)", spec.scheme,
                                   spec.options["handles"]));
  }
  if (spec.scheme == "swtpm") {
    for (const char* key : {"port", "ctrl"}) {
      if (spec.options.count(key)) TPMSEC_RETURN_IF_ERROR(parse_port(key, spec.options[key]));
    }
    if (spec.options.count("path") && (spec.options.count("host") || spec.options.count("port"))) {
      return usage_error("swtpm: give either path= or host=/port=, not both");
    }
  }
  return spec;
}

Result<std::unique_ptr<Transport>> open_bus_transport(std::string_view text) {
  TPMSEC_ASSIGN_OR_RETURN(TpmSpec spec, parse_transport_spec(text));
  return open_bus_transport(spec);
}

namespace {

// The addresses a parsed TPM string names (its values were checked by the
// parser).
uint16_t port_or(const TpmSpec& spec, const char* key, uint16_t fallback) {
  if (!spec.options.count(key)) return fallback;
  auto port = parse_port(key, spec.option(key));
  return port.ok() ? *port : fallback;
}

MssimAddress mssim_address_of(const TpmSpec& spec) {
  MssimAddress m;
  m.host = spec.option("host", "localhost");
  m.port = port_or(spec, "port", m.port);
  m.private_handles = spec.options.count("handles") != 0;
  return m;
}

SwtpmAddress swtpm_address_of(const TpmSpec& spec) {
  SwtpmAddress a;
  a.host = spec.option("host", "localhost");
  a.path = spec.option("path");
  a.port = port_or(spec, "port", a.port);
  a.ctrl_port = port_or(spec, "ctrl", 0);
  a.ctrl_path = spec.option("ctrlpath");
  a.ctrl_host = spec.option("ctrlhost");
  a.private_handles = spec.options.count("handles") != 0;
  return a;
}

ServeAddress serve_address_of(const TpmSpec& spec) {
  ServeAddress a;
  a.path = spec.path.empty() ? kServeSocket : spec.path;
  if (spec.options.count("uid")) {
    if (auto uid = parse_uid(spec.option("uid")); uid.ok()) a.uid = *uid;
  }
  return a;
}

}  // namespace

Result<std::unique_ptr<Transport>> open_bus_transport(const TpmSpec& spec) {
  if (spec.kind == TpmKind::kEmbedded) {
    return usage_error("embedded: is an in-process TPM: this program opens only device:, swtpm: and mssim: TPMs");
  }
  Result<std::unique_ptr<Transport>> opened = usage_error("no TPM string");
  if (spec.kind == TpmKind::kDevice) {
    opened = open_device(spec.path);
  } else if (spec.kind == TpmKind::kMssim) {
    opened = open_mssim(mssim_address_of(spec));
  } else if (spec.kind == TpmKind::kSwtpm) {
    opened = open_swtpm(swtpm_address_of(spec));
  } else if (spec.kind == TpmKind::kServe) {
    opened = open_serve(serve_address_of(spec));
  }
  if (opened.ok()) (*opened)->set_spec(spec);
  return opened;
}

std::string tpm_string_of(const SwtpmAddress& a) {
  std::string s = a.path.empty() ? fmt::format("swtpm:host={},port={}", a.host, a.port) : "swtpm:path=" + a.path;
  if (a.ctrl_port) s += fmt::format(",ctrl={}", a.ctrl_port);
  if (!a.ctrl_path.empty()) s += ",ctrlpath=" + a.ctrl_path;
  return s;
}

std::string tpm_string_of(const MssimAddress& a) { return fmt::format("mssim:host={},port={}", a.host, a.port); }

std::string tpm_string_of(const ServeAddress& a) {
  std::string text = "serve:path=" + a.path;
  if (a.uid) text += fmt::format(",uid={}", *a.uid);
  return text;
}

std::string device_tpm_string(const std::string& path) { return "device:" + path; }

std::string embedded_tpm_string(const std::string& state_dir) {
  return state_dir.empty() ? "embedded" : "embedded:state=" + state_dir;
}

std::string tpm_string_of(const TpmSpec& spec) {
  switch (spec.kind) {
    case TpmKind::kEmbedded:
      return embedded_tpm_string(spec.option("state"));
    case TpmKind::kSwtpm:
      return tpm_string_of(swtpm_address_of(spec));
    case TpmKind::kMssim:
      return tpm_string_of(mssim_address_of(spec));
    case TpmKind::kDevice:
      return device_tpm_string(spec.path);
    case TpmKind::kServe:
      return tpm_string_of(serve_address_of(spec));
    case TpmKind::kNone:
      break;
  }
  return "";
}

TpmId tpm_id_of(const TpmSpec& spec) { return TpmId::of(tpm_string_of(spec)); }

TpmId tpm_id_of(const Transport& transport) {
  const TpmSpec spec = transport.spec();
  return spec.kind == TpmKind::kNone ? TpmId::of(transport.describe()) : tpm_id_of(spec);
}

namespace {

// A tpm2-tss TCTI string's driver name and configuration (what follows the
// first colon). tpm2-tools also takes the library's file name
// (libtss2-tcti-device.so.0).
struct TctiName {
  std::string name;
  std::string conf;
};
TctiName split_tcti(std::string_view tcti) {
  std::string text(tcti);
  size_t colon = text.find(':');
  TctiName out{text.substr(0, colon), colon == std::string::npos ? "" : text.substr(colon + 1)};
  if (out.name.rfind("libtss2-tcti-", 0) == 0) {
    out.name = out.name.substr(13);
    if (size_t so = out.name.find(".so"); so != std::string::npos) out.name = out.name.substr(0, so);
  }
  if (out.name == "abrmd") out.name = "tabrmd";
  return out;
}

}  // namespace

Result<std::string> tpm_string_from_tcti(std::string_view tcti, bool host_device) {
  auto [name, conf] = split_tcti(tcti);
  // tpm2-tss's device TCTI without a path tries /dev/tpmrm0, then /dev/tpm0.
  if (name == "device" && conf.empty()) return std::string("device:") + (host_device ? kHostTpmDevice : "/dev/tpm0");
  if (name == "device" || name == "swtpm" || name == "mssim") {
    std::string spec = conf.empty() ? name : name + ":" + conf;
    TPMSEC_RETURN_IF_ERROR(status_of(parse_transport_spec(spec)));
    return spec;
  }
  return usage_error(fmt::format("the {} TCTI is not supported", name.empty() ? std::string(tcti) : name));
}

Result<DefaultTpm> choose_default_tpm(const char* tpmsec_tpm, const char* tpm2tools_tcti, bool host_device) {
  if (tpmsec_tpm && *tpmsec_tpm) return DefaultTpm{tpmsec_tpm, TpmSource::kTpmsecTpm};
  if (tpm2tools_tcti && *tpm2tools_tcti) {
    // The tpmsec TCTI (docs/tcti.md): its configuration, a TPM string with
    // protection items, for the protect layer to split (tpm_config.h).
    if (TctiName t = split_tcti(tpm2tools_tcti); t.name == "tpmsec") {
      DefaultTpm d{t.conf, TpmSource::kTpm2ToolsTcti};
      d.tpmsec_tcti = true;
      return d;
    }
    Result<std::string> spec = tpm_string_from_tcti(tpm2tools_tcti, host_device);
    if (!spec.ok()) {
      return usage_error(fmt::format(
          "TPM2TOOLS_TCTI={}: {} (tpmsec speaks device:PATH, swtpm:host=H,port=P and mssim:host=H,port=P; give "
          "--tpm or TPMSEC_TPM)",
          tpm2tools_tcti, spec.error().message()));
    }
    return DefaultTpm{*spec, TpmSource::kTpm2ToolsTcti};
  }
  if (host_device) return DefaultTpm{std::string("device:") + kHostTpmDevice, TpmSource::kHostDevice};
  return DefaultTpm{"embedded", TpmSource::kFallback};
}

bool host_tpm_device() {
  struct stat st {};
  return ::stat(kHostTpmDevice, &st) == 0;
}

Result<DefaultTpm> default_tpm() {
  return choose_default_tpm(std::getenv("TPMSEC_TPM"), std::getenv("TPM2TOOLS_TCTI"), host_tpm_device());
}

}  // namespace tpmsec
