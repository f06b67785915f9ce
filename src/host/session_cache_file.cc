// The kept session cache's files (file_host_state.h, session_cache.h).

#include <fmt/format.h>

#include <charconv>
#include <sstream>

#include "state_file.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/host/file_host_state.h"
#include "tpmsec/text.h"

namespace tpmsec {
namespace {

std::optional<uint32_t> number(const std::map<std::string, std::string>& f, const std::string& key) {
  auto it = f.find(key);
  if (it == f.end()) return std::nullopt;
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  if (ec != std::errc() || end != it->second.data() + it->second.size()) return std::nullopt;
  return v;
}

template <typename T>
std::optional<T> unmarshal_hex(const std::string& hex) {
  auto bytes = from_hex(hex);
  if (!bytes.ok()) return std::nullopt;
  Reader r(*bytes);
  T v;
  unmarshal(r, v);
  r.expect_end("kept value");
  if (!r.ok()) return std::nullopt;
  return v;
}

// The fields of TpmInfo that read_tpm_info fills, as key=value lines.
std::string info_lines(const TpmInfo& i) {
  std::string out = fmt::format(
      "manufacturer={}\nvendor1={}\nvendor2={}\nvendor3={}\nvendor4={}\nfirmware1={}\nfirmware2={}\nfamily={}\n"
      "level={}\nrevision={}\nday={}\nyear={}\ntype={}\npcr_count={}\necc_p256={}\nrsa_2048={}\nloaded_sessions={}\n"
      "active_sessions={}\ntransient_objects={}\nobject_context={}\nsession_context={}\ninput_buffer={}\n",
      i.manufacturer_raw, i.vendor_raw[0], i.vendor_raw[1], i.vendor_raw[2], i.vendor_raw[3], i.firmware_version_1,
      i.firmware_version_2, to_hex(as_bytes(std::string_view(i.spec_family))), i.spec_level, i.spec_revision,
      i.spec_day_of_year, i.spec_year, i.tpm_type, i.pcr_count, int(i.ecc_p256), int(i.rsa_2048), i.max_loaded_sessions,
      i.max_active_sessions, i.max_transient_objects, i.max_object_context, i.max_session_context, i.input_buffer);
  for (const PcrBank& b : i.pcr_banks) {
    out += fmt::format("bank={}:{}\n", b.hash, fmt::join(b.pcrs, ","));
  }
  return out;
}

std::optional<TpmInfo> info_from(const std::string& text) {
  auto f = state_file::parse_lines(text);
  TpmInfo i;
  std::array<uint32_t*, 19> fields{
      &i.manufacturer_raw,   &i.vendor_raw[0],       &i.vendor_raw[1],       &i.vendor_raw[2],
      &i.vendor_raw[3],      &i.firmware_version_1,  &i.firmware_version_2,  &i.spec_level,
      &i.spec_revision,      &i.spec_day_of_year,    &i.spec_year,           &i.tpm_type,
      &i.pcr_count,          &i.max_loaded_sessions, &i.max_active_sessions, &i.max_transient_objects,
      &i.max_object_context, &i.max_session_context, &i.input_buffer};
  static const std::array<const char*, 19> keys{"manufacturer",
                                                "vendor1",
                                                "vendor2",
                                                "vendor3",
                                                "vendor4",
                                                "firmware1",
                                                "firmware2",
                                                "level",
                                                "revision",
                                                "day",
                                                "year",
                                                "type",
                                                "pcr_count",
                                                "loaded_sessions",
                                                "active_sessions",
                                                "transient_objects",
                                                "object_context",
                                                "session_context",
                                                "input_buffer"};
  for (size_t k = 0; k < keys.size(); ++k) {
    auto v = number(f, keys[k]);
    if (!v) return std::nullopt;
    *fields[k] = *v;
  }
  auto ecc = number(f, "ecc_p256"), rsa = number(f, "rsa_2048");
  auto family = from_hex(f["family"]);
  if (!ecc || !rsa || !family.ok()) return std::nullopt;
  i.ecc_p256 = *ecc != 0;
  i.rsa_2048 = *rsa != 0;
  i.spec_family.assign(family->begin(), family->end());
  i.manufacturer = property_text(i.manufacturer_raw);
  for (size_t k = 0; k < 4; ++k) i.vendor_strings[k] = property_text(i.vendor_raw[k]);
  // Banks: the only repeated key, read again line by line.
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("bank=", 0) != 0) continue;
    std::string_view rest = std::string_view(line).substr(5);
    size_t colon = rest.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    PcrBank bank;
    uint32_t hash = 0;
    if (std::from_chars(rest.data(), rest.data() + colon, hash).ec != std::errc() || hash > 0xffff) return std::nullopt;
    bank.hash = static_cast<uint16_t>(hash);
    rest.remove_prefix(colon + 1);
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      uint32_t pcr = 0;
      auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), pcr);
      if (ec != std::errc() || end != item.data() + item.size() || pcr > 1024) return std::nullopt;
      bank.pcrs.push_back(pcr);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    i.pcr_banks.push_back(std::move(bank));
  }
  return i;
}

}  // namespace

namespace {

using Fields = std::map<std::string, std::string>;

// The lines of a kept file when it is of `tpm` and `boot`; none when it is
// not, or does not read back (larger than a record). A file the state
// directory's rule refuses, or one that cannot be read, is an error: a
// cache is never read from where another user could have written it.
Result<std::optional<Fields>> read_kept(const files::StatePath& file, const std::string& tpm, const std::string& boot,
                                        std::string* text) {
  auto read = state_file::read(file);
  if (!read.ok() && read.error().kind() == ErrorKind::kParse) return std::optional<Fields>();
  TPMSEC_ASSIGN_OR_RETURN(std::optional<std::string> kept, std::move(read));
  if (!kept) return std::optional<Fields>();
  auto fields = state_file::parse_lines(*kept);
  if (fields["tpm"] != tpm || fields["boot"] != boot) return std::optional<Fields>();
  if (text) *text = std::move(*kept);
  return std::optional<Fields>(std::move(fields));
}

Status check_line_safe(const std::string& tpm, const std::string& boot) {
  if (tpm.find('\n') != std::string::npos || boot.find('\n') != std::string::npos) {
    return usage_error("a TPM string or boot id with a newline cannot be kept");
  }
  return ok_status();
}

}  // namespace

Result<std::optional<TpmInfo>> FileHostState::kept_info(const TpmId& tpm, const std::string& boot) const {
  std::string text;
  TPMSEC_ASSIGN_OR_RETURN(std::optional<Fields> f, read_kept(at(StateRecord::kKeptInfo, tpm), tpm.text, boot, &text));
  if (!f) return std::optional<TpmInfo>();
  return info_from(text);
}

Result<std::optional<NullKey::Snapshot>> FileHostState::kept_null_key(const TpmId& tpm, const std::string& boot,
                                                                      SaltKind kind) const {
  using Kept = std::optional<NullKey::Snapshot>;
  TPMSEC_ASSIGN_OR_RETURN(std::optional<Fields> f,
                          read_kept(at(StateRecord::kKeptNullKey, tpm, kind), tpm.text, boot, nullptr));
  if (!f) return Kept();
  NullKey::Snapshot s;
  s.kind = kind;
  auto pub = unmarshal_hex<Public>((*f)["public"]);
  auto context = unmarshal_hex<Context>((*f)["context"]);
  auto name = from_hex((*f)["name"]);
  if (!pub || !context || !name.ok()) return Kept();
  s.public_area = std::move(*pub);
  s.context = std::move(*context);
  s.name = std::move(*name);
  return Kept(std::move(s));
}

Result<std::optional<uint64_t>> FileHostState::kept_command_count(const TpmId& tpm, const std::string& boot,
                                                                  const ProgramId& program) const {
  TPMSEC_ASSIGN_OR_RETURN(std::optional<Fields> f,
                          read_kept(command_count_file(tpm, program), tpm.text, boot, nullptr));
  if (!f || (*f)["program"] != program.path) return std::optional<uint64_t>();
  const std::string& text = (*f)["commands"];
  uint64_t count = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (ec != std::errc() || end != text.data() + text.size()) return std::optional<uint64_t>();
  return std::optional<uint64_t>(count);
}

Status FileHostState::put_kept_command_count(const TpmId& tpm, const std::string& boot, const ProgramId& program,
                                             uint64_t count) {
  TPMSEC_RETURN_IF_ERROR(check_line_safe(tpm.text, boot));
  if (program.path.find('\n') != std::string::npos) return usage_error("a program path with a newline cannot be kept");
  return files::write_private(
      command_count_file(tpm, program),
      fmt::format("tpm={}\nboot={}\nprogram={}\ncommands={}\n", tpm.text, boot, program.path, count));
}

Result<std::optional<KeptCallerSession>> FileHostState::kept_caller_session(const TpmId& tpm, const std::string& boot,
                                                                            uint32_t handle) const {
  using Kept = std::optional<KeptCallerSession>;
  TPMSEC_ASSIGN_OR_RETURN(std::optional<Fields> f,
                          read_kept(caller_session_file(tpm, handle), tpm.text, boot, nullptr));
  if (!f) return Kept();
  KeptCallerSession s;
  s.handle = handle;
  unsigned hash = 0;
  const std::string& hash_text = (*f)["hash"];
  auto [end, ec] = std::from_chars(hash_text.data(), hash_text.data() + hash_text.size(), hash, 16);
  auto nonce = from_hex((*f)["nonce"]);
  if (ec != std::errc() || end != hash_text.data() + hash_text.size() || hash > 0xFFFF || !nonce.ok() ||
      (*f)["handle"] != fmt::format("{:08x}", handle)) {
    return Kept();
  }
  s.auth_hash = static_cast<uint16_t>(hash);
  s.nonce_tpm = std::move(*nonce);
  return Kept(std::move(s));
}

Status FileHostState::put_kept_caller_session(const TpmId& tpm, const std::string& boot,
                                              const KeptCallerSession& session) {
  TPMSEC_RETURN_IF_ERROR(check_line_safe(tpm.text, boot));
  // Rewritten on every answer that rolls the session's nonce, and of this
  // boot alone (a host crash ends the session anyway): no fsync.
  return files::write_private(caller_session_file(tpm, session.handle),
                              fmt::format("tpm={}\nboot={}\nhandle={:08x}\nhash={:04x}\nnonce={}\n", tpm.text, boot,
                                          session.handle, session.auth_hash, to_hex(session.nonce_tpm)),
                              files::Durability::kProcessEnd);
}

Status FileHostState::erase_kept_caller_session(const TpmId& tpm, uint32_t handle) {
  return status_of(files::remove_private(caller_session_file(tpm, handle)));
}

Status FileHostState::put_kept_info(const TpmId& tpm, const std::string& boot, const TpmInfo& info) {
  TPMSEC_RETURN_IF_ERROR(check_line_safe(tpm.text, boot));
  return files::write_private(at(StateRecord::kKeptInfo, tpm),
                              fmt::format("tpm={}\nboot={}\n{}", tpm.text, boot, info_lines(info)));
}

Status FileHostState::put_kept_null_key(const TpmId& tpm, const std::string& boot, const NullKey::Snapshot& key) {
  TPMSEC_RETURN_IF_ERROR(check_line_safe(tpm.text, boot));
  TPMSEC_ASSIGN_OR_RETURN(Bytes pub, marshal_to_bytes(key.public_area));
  TPMSEC_ASSIGN_OR_RETURN(Bytes context, marshal_to_bytes(key.context));
  return files::write_private(at(StateRecord::kKeptNullKey, tpm, key.kind),
                              fmt::format("tpm={}\nboot={}\npublic={}\nname={}\ncontext={}\n", tpm.text, boot,
                                          to_hex(pub), to_hex(key.name), to_hex(context)));
}

}  // namespace tpmsec
