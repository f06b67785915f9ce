// TPM strings in tpm2-tss TCTI syntax, and the TPMs behind a bus they name
// (device, swtpm, mssim). The embedded TPM is opened in transport_spec.cc,
// the one place that links libtpms' transport.
#include <sys/stat.h>

#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "tpmsec/transport.h"
#include "tpmsec/transport/transports.h"

namespace tpmsec {
namespace {

const std::set<std::string>& allowed_keys(const std::string& scheme) {
  static const std::set<std::string> embedded{"state"};
  static const std::set<std::string> swtpm{"host", "port", "path", "ctrl", "ctrlpath", "ctrlhost", "handles"};
  static const std::set<std::string> mssim{"host", "port", "handles"};
  static const std::set<std::string> device{"path"};
  if (scheme == "embedded") return embedded;
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

}  // namespace

Result<TransportSpec> parse_transport_spec(std::string_view text) {
  TransportSpec spec;
  std::string s(text);
  size_t colon = s.find(':');
  spec.scheme = s.substr(0, colon);
  std::string rest = colon == std::string::npos ? "" : s.substr(colon + 1);
  if (spec.scheme.empty()) return usage_error(fmt::format("TPM string '{}' has no scheme", s));
  if (spec.scheme != "embedded" && spec.scheme != "swtpm" && spec.scheme != "mssim" && spec.scheme != "device") {
    return usage_error(fmt::format(
        "unknown TPM transport '{}' (expected embedded, swtpm:host=H,port=P, mssim:host=H,port=P or device:PATH)",
        spec.scheme));
  }
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
  TPMSEC_ASSIGN_OR_RETURN(TransportSpec spec, parse_transport_spec(text));
  auto opt = [&spec](const char* key, const std::string& fallback = "") {
    auto it = spec.options.find(key);
    return it == spec.options.end() ? fallback : it->second;
  };
  if (spec.scheme == "embedded") {
    return usage_error("embedded: is an in-process TPM: this program opens only device:, swtpm: and mssim: TPMs");
  }
  if (spec.scheme == "device") return open_device(spec.path);
  if (spec.scheme == "mssim") {
    MssimAddress m;
    m.host = opt("host", "localhost");
    if (spec.options.count("port")) m.port = *parse_port("port", spec.options["port"]);
    m.private_handles = spec.options.count("handles") != 0;
    return open_mssim(m);
  }
  SwtpmAddress a;
  a.host = opt("host", "localhost");
  a.path = opt("path");
  if (spec.options.count("port")) a.port = *parse_port("port", spec.options["port"]);
  if (spec.options.count("ctrl")) a.ctrl_port = *parse_port("ctrl", spec.options["ctrl"]);
  a.ctrl_path = opt("ctrlpath");
  a.ctrl_host = opt("ctrlhost");
  a.private_handles = spec.options.count("handles") != 0;
  return open_swtpm(a);
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

Result<TpmsecTctiConfig> parse_tpmsec_tcti_config(std::string_view config) {
  TpmsecTctiConfig out;
  bool anchor_set = false, salt_set = false, policy_set = false, log_set = false, strict_set = false;
  auto once = [](bool& seen, std::string_view key) -> Status {
    if (seen) return usage_error(fmt::format("tpmsec TCTI: {} given twice", key));
    seen = true;
    return ok_status();
  };
  size_t start = 0;
  for (bool last = false; !last;) {
    size_t at = config.find(',', start);
    last = at == std::string_view::npos;
    std::string_view item = config.substr(start, last ? std::string_view::npos : at - start);
    start = at + 1;
    // `\,` is /etc/crypttab's escape for a comma (docs/tcti.md): seen here,
    // nothing unescaped it, and the item would name a host or file ending
    // in a backslash.
    if (!item.empty() && item.back() == '\\') {
      return usage_error(fmt::format("tpmsec TCTI: item '{}' ends in a backslash: \\, is /etc/crypttab's escape for "
                                     "a comma; everywhere else write the commas plain",
                                     item));
    }
    size_t eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string value(eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1));
    bool has_value = eq != std::string_view::npos && !value.empty();
    if (key == "null-name" || key == "ek-ca") {
      if (!has_value) return usage_error(fmt::format("tpmsec TCTI: {}= needs a value", key));
      TPMSEC_RETURN_IF_ERROR(once(anchor_set, "a trust anchor (null-name=, ek-ca=, tofu)"));
      (key == "null-name" ? out.null_name : out.ek_ca) = value;
    } else if (key == "tofu") {
      if (eq != std::string_view::npos) return usage_error("tpmsec TCTI: tofu takes no value");
      TPMSEC_RETURN_IF_ERROR(once(anchor_set, "a trust anchor (null-name=, ek-ca=, tofu)"));
      out.tofu = true;
    } else if (key == "strict") {
      if (eq != std::string_view::npos) return usage_error("tpmsec TCTI: strict takes no value");
      TPMSEC_RETURN_IF_ERROR(once(strict_set, "strict"));
      out.strict = true;
    } else if (key == "salt") {
      TPMSEC_RETURN_IF_ERROR(once(salt_set, "salt="));
      if (value != "ecc" && value != "rsa") return usage_error(fmt::format("tpmsec TCTI: salt={} (ecc or rsa)", value));
      out.salt = value;
    } else if (key == "policy" || key == "log") {
      if (!has_value) return usage_error(fmt::format("tpmsec TCTI: {}= needs a file", key));
      TPMSEC_RETURN_IF_ERROR(once(key == "policy" ? policy_set : log_set, key));
      (key == "policy" ? out.policy : out.log) = value;
    } else {
      if (!out.tpm.empty()) out.tpm += ',';
      out.tpm += item;
    }
  }
  return out;
}

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
    // The tpmsec TCTI (docs/tcti.md): its TPM string, and its protection
    // items for the caller. With none named it opens the host's TPM through
    // the kernel's resource manager, as the TCTI does.
    if (TctiName t = split_tcti(tpm2tools_tcti); t.name == "tpmsec") {
      Result<TpmsecTctiConfig> config = parse_tpmsec_tcti_config(t.conf);
      DefaultTpm d{std::string("device:") + kHostTpmDevice, TpmSource::kTpm2ToolsTcti};
      Status valid = status_of(config);
      if (config.ok() && !config->tpm.empty()) {
        d.spec = config->tpm;
        valid = status_of(parse_transport_spec(d.spec));
      }
      if (!valid.ok()) return usage_error(fmt::format("TPM2TOOLS_TCTI={}: {}", tpm2tools_tcti, valid.error().message()));
      d.tcti = std::move(*config);
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

Result<DefaultTpm> default_tpm() {
  struct stat st {};
  const bool host_device = ::stat(kHostTpmDevice, &st) == 0;
  return choose_default_tpm(std::getenv("TPMSEC_TPM"), std::getenv("TPM2TOOLS_TCTI"), host_device);
}

}  // namespace tpmsec
