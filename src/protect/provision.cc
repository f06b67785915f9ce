// provision.h: what `tpmsec provision` keeps, and forgetting pins, on the
// protect path's host state.
#include "tpmsec/provision.h"

#include <fmt/format.h>

#include "tpmsec/response_code.h"
#include "tpmsec/session_cache.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec {
namespace {

// What is kept outlives the process: a TPM that does not has nothing to keep.
Status check_outlives(ProtectedTpm& tpm) {
  if (tpm.transport().outlives_process()) return ok_status();
  return usage_error(fmt::format("{} ends with this process: nothing to provision (use embedded:state=DIR)",
                                 tpm.transport().describe()));
}

// A TPM response saying the handle (an index, a key) is not there.
bool already_gone(const Status& st) { return !st.ok() && rc_base(st.error().tpm_rc()) == rc::kHandle; }

}  // namespace

Result<Provisioned> provision_bind(ProtectedTpm& tpm, uint32_t nv_index) {
  TPMSEC_RETURN_IF_ERROR(check_outlives(tpm));
  const TpmId id = tpm.id();
  HostState& store = tpm.host();
  TPMSEC_ASSIGN_OR_RETURN(std::optional<BindSecret> kept, store.bind_secret(id));
  if (kept) {
    return usage_error(
        fmt::format("{} is already provisioned (NV index 0x{:08x}, {}); 'tpmsec provision "
                    "--remove' first",
                    id.text, kept->nv_index, store.where(StateRecord::kBindSecret, id)));
  }
  if (tpm.protection().unsalted) {
    return usage_error("--unsalted would send the bind secret where an interposer can read it");
  }
  TPMSEC_ASSIGN_OR_RETURN(auto factory, tpm.factory());
  TPMSEC_ASSIGN_OR_RETURN(BindSecret secret, provision_bind_secret(*factory, nv_index));
  if (Status st = store.put_bind_secret(id, secret); !st.ok()) {
    (void)undefine_bind_index(tpm.tpm(), nv_index);
    return st.error();
  }
  tpm.keep(factory.get());
  return Provisioned{id.text, store.where(StateRecord::kBindSecret, id)};
}

Result<RemovedBindSecret> unprovision_bind(ProtectedTpm& tpm) {
  TPMSEC_RETURN_IF_ERROR(check_outlives(tpm));
  const TpmId id = tpm.id();
  TPMSEC_ASSIGN_OR_RETURN(std::optional<BindSecret> kept, tpm.host().bind_secret(id));
  if (!kept) return usage_error(fmt::format("{} is not provisioned: nothing to remove", id.text));
  Status undefined = undefine_bind_index(tpm.tpm(), kept->nv_index);
  if (!undefined.ok() && !already_gone(undefined)) return undefined.error();
  TPMSEC_RETURN_IF_ERROR(status_of(tpm.host().erase(StateRecord::kBindSecret, id)));
  return RemovedBindSecret{id.text, kept->nv_index, !undefined.ok()};
}

Result<PinnedSaltKey> provision_salt_key(ProtectedTpm& tpm, uint32_t handle, bool create) {
  TPMSEC_RETURN_IF_ERROR(check_outlives(tpm));
  const TpmId id = tpm.id();
  HostState& store = tpm.host();
  TPMSEC_ASSIGN_OR_RETURN(std::optional<PersistentSaltKey> kept, store.salt_key(id));
  if (kept) {
    return usage_error(
        fmt::format("{} already has a pinned salt key (0x{:08x}, {}); 'tpmsec provision --remove "
                    "--salt-key' first",
                    id.text, kept->handle, store.where(StateRecord::kSaltKey, id)));
  }
  if (tpm.protection().unsalted) {
    return usage_error("--unsalted cannot vouch for a salt key");
  }
  TPMSEC_ASSIGN_OR_RETURN(auto factory, tpm.factory());
  const SaltKind kind = factory->config().salt.value_or(choose_salt(tpm.info()));
  TPMSEC_ASSIGN_OR_RETURN(PersistentSaltKey key,
                          create ? create_salt_key(*factory, handle, kind) : pin_salt_key(*factory, handle));
  if (Status st = store.put_salt_key(id, key); !st.ok()) {
    if (key.created) (void)evict_salt_key(tpm.tpm(), key);
    return st.error();
  }
  tpm.keep(factory.get());
  return PinnedSaltKey{{id.text, store.where(StateRecord::kSaltKey, id)}, key};
}

Result<RemovedSaltKey> unprovision_salt_key(ProtectedTpm& tpm) {
  TPMSEC_RETURN_IF_ERROR(check_outlives(tpm));
  const TpmId id = tpm.id();
  TPMSEC_ASSIGN_OR_RETURN(std::optional<PersistentSaltKey> kept, tpm.host().salt_key(id));
  if (!kept) return usage_error(fmt::format("no salt key is pinned for {}: nothing to remove", id.text));
  RemovedSaltKey out{id.text, *kept, false};
  if (kept->created) {
    Status st = evict_salt_key(tpm.tpm(), *kept);
    if (!st.ok() && !already_gone(st)) return st.error();
    out.evicted = st.ok();
  }
  TPMSEC_RETURN_IF_ERROR(status_of(tpm.host().erase(StateRecord::kSaltKey, id)));
  return out;
}

ProvisionStatus provision_status(const TpmId& id, std::shared_ptr<HostState> host) {
  if (!host) host = host_state_of(ProtectRequest{});
  return ProvisionStatus{host->bind_secret(id), host->where(StateRecord::kBindSecret, id), host->salt_key(id),
                         host->where(StateRecord::kSaltKey, id)};
}

Result<ForgottenPins> forget_pins(const TpmId& id, std::shared_ptr<HostState> host) {
  if (!host) host = host_state_of(ProtectRequest{});
  ForgottenPins out{id.text};
  TPMSEC_ASSIGN_OR_RETURN(out.tofu_pin, host->erase(StateRecord::kNullKeyPin, id));
  TPMSEC_ASSIGN_OR_RETURN(out.ek_pin, host->erase(StateRecord::kEkPin, id));
  // What one-shot commands kept of this TPM goes with the pin.
  TPMSEC_RETURN_IF_ERROR(status_of(SessionCache(host, id, "").forget()));
  return out;
}

}  // namespace tpmsec
