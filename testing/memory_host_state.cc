#include "testing/memory_host_state.h"

#include <fmt/format.h>

#include <algorithm>

namespace tpmsec::testing {
namespace {

template <typename Map>
bool erase_tpm(Map& map, const std::string& key) {
  bool any = false;
  for (SaltKind kind : {SaltKind::kEcc, SaltKind::kRsa}) any = map.erase({key, kind}) > 0 || any;
  return any;
}

// A BindSecret's secret is not copyable: a copy is made on purpose.
BindSecret clone(const BindSecret& b) { return BindSecret{b.nv_index, b.name, b.secret.clone()}; }

const char* label(SaltKind kind) { return kind == SaltKind::kRsa ? "rsa" : "ecc"; }

}  // namespace

Result<std::optional<BindSecret>> MemoryHostState::bind_secret(const TpmId& tpm) const {
  auto it = bind_secrets_.find(tpm.key);
  if (it == bind_secrets_.end()) return std::optional<BindSecret>();
  return std::optional<BindSecret>(clone(it->second));
}

Status MemoryHostState::put_bind_secret(const TpmId& tpm, const BindSecret& secret) {
  bind_secrets_.insert_or_assign(tpm.key, clone(secret));
  return ok_status();
}

Result<bool> MemoryHostState::erase(StateRecord what, const TpmId& tpm) {
  switch (what) {
    case StateRecord::kNullKeyPin:
      return erase_tpm(null_key_pins_, tpm.key);
    case StateRecord::kEkPin:
      return erase_tpm(ek_pins_, tpm.key);
    case StateRecord::kKeptInfo:
      return kept_info_.erase(tpm.key) > 0;
    case StateRecord::kKeptNullKey:
      return erase_tpm(kept_null_keys_, tpm.key);
    case StateRecord::kBindSecret:
      return bind_secrets_.erase(tpm.key) > 0;
    case StateRecord::kSaltKey:
      return salt_keys_.erase(tpm.key) > 0;
    case StateRecord::kKeptCommandCount:
      return std::erase_if(kept_command_counts_, [&](const auto& e) { return e.first.first == tpm.key; }) > 0;
    case StateRecord::kKeptCallerSession:
      return std::erase_if(kept_caller_sessions_, [&](const auto& e) { return e.first.first == tpm.key; }) > 0;
    case StateRecord::kHeldHandles:
      return std::erase_if(held_, [&](const auto& e) { return std::get<0>(e.first) == tpm.key; }) > 0;
  }
  return false;
}

std::vector<HeldHandlesRecord> MemoryHostState::held_handles(const TpmId& tpm) const {
  std::vector<HeldHandlesRecord> out;
  for (const auto& [key, record] : held_) {
    if (std::get<0>(key) == tpm.key) out.push_back(record);
  }
  return out;
}

Status MemoryHostState::put_held_handles(const TpmId& tpm, const HeldHandlesRecord& record) {
  auto key = std::tuple(tpm.key, record.owner.pid, record.owner.start, record.context);
  if (record.handles.empty()) {
    held_.erase(key);
  } else {
    held_[key] = record;
  }
  return ok_status();
}

void MemoryHostState::set_running(ProcessStamp p, bool runs) {
  std::erase(running_, p);
  if (runs) running_.push_back(p);
}

bool MemoryHostState::process_runs(const ProcessStamp& process) const {
  return std::find(running_.begin(), running_.end(), process) != running_.end();
}

std::string MemoryHostState::where(StateRecord what) const {
  return fmt::format("memory:record-{}", static_cast<int>(what));
}

std::string MemoryHostState::where(StateRecord what, const TpmId& tpm, SaltKind kind) const {
  return fmt::format("{}/{}-{}", where(what), tpm.key, label(kind));
}

Result<std::string> MemoryHostState::read_null_name_file(const std::string& path) const {
  auto text = find(files_, path);
  if (!text) return usage_error(fmt::format("cannot read null key name from {}", path));
  return text->substr(0, text->find('\n'));
}

Result<std::vector<crypto::PemFile>> MemoryHostState::read_ca_files(const std::string& file_or_dir) const {
  std::vector<crypto::PemFile> out;
  if (auto text = find(files_, file_or_dir)) return std::vector<crypto::PemFile>{{file_or_dir, *text}};
  const std::string dir = file_or_dir + "/";
  for (auto it = files_.lower_bound(dir); it != files_.end() && it->first.rfind(dir, 0) == 0; ++it) {
    out.push_back({it->first, it->second});
  }
  if (out.empty()) return usage_error(fmt::format("CA bundle {} does not exist", file_or_dir));
  return out;
}

}  // namespace tpmsec::testing
