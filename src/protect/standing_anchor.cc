// ProtectedTpm's standing anchor (protect.h, StandingAnchor): step 4 of the
// anchor order, for a process that owns the TPM and must start with no
// configuration (`tpmsec serve`), the check of a pinned salt key at every
// start, and the words that name the anchor in the start-up line.
#include <fmt/format.h>

#include "notice.h"
#include "tpmsec/ek_key.h"
#include "tpmsec/protect.h"
#include "tpmsec/text.h"

namespace tpmsec {
namespace {

std::string salt_name(SaltKind kind) { return kind == SaltKind::kEcc ? "ECC P-256" : "RSA-2048"; }

// A failure of the EK anchor that only says this TPM has none to offer (no
// certificate, one of another key, one that does not chain to the bundle),
// rather than a TPM or a link that fails.
bool no_ek_anchor(const Error& e) {
  return e.kind() == ErrorKind::kUnsupported || e.kind() == ErrorKind::kIntegrity || e.kind() == ErrorKind::kParse;
}

}  // namespace

Status ProtectedTpm::stand() {
  standing_first_start_ = false;
  standing_ek_root_.clear();
  const bool applies = request_.standing && std::holds_alternative<anchor::Automatic>(request_.anchor) && !served() &&
                       !base_->in_process();
  if (applies && !has_trust_anchor(config_)) {
    bool stood = false;
    TPMSEC_RETURN_IF_ERROR(stand_on_ek_roots(&stood));
    if (!stood) TPMSEC_RETURN_IF_ERROR(stand_on_first_start_key());
  } else if (applies && config_.salt_key && !config_.unsalted) {
    TPMSEC_RETURN_IF_ERROR(check_standing_salt_key());
  }
  describe_anchor();
  return ok_status();
}

Status ProtectedTpm::stand_on_ek_roots(bool* stood) {
  const StandingAnchor& standing = *request_.standing;
  if (standing.ek_roots.empty()) return ok_status();
  auto roots = load_ek_roots(standing.ek_roots, standing.ek_intermediates, *request_.host);
  if (!roots.ok()) {
    say("the EK anchor is not tried: " + roots.error().message());
    return ok_status();
  }
  ProtectionConfig trial = config_;
  trial.ek_ca = std::make_shared<const crypto::CaBundle>(std::move(*roots));
  TPMSEC_RETURN_IF_ERROR(pin_ek(request_.host, id(), request_.notice, trial));
  auto factory = SessionFactory::create(*tpm_, trial, &info_);
  if (factory.ok()) {
    const EkKey* ek = (*factory)->ek_key();
    standing_ek_root_ = fmt::format("{} EK certificate chaining to {} of {}", salt_name(ek->kind()), ek->root_subject(),
                                    standing.ek_roots);
    config_ = std::move(trial);
    config_.salt = ek->kind();
    *stood = true;
    return ok_status();
  }
  // An EK that held at an earlier start is not traded for a first-start key.
  if (!trial.ek_pins.empty() || !no_ek_anchor(factory.error())) return factory.error();
  say(fmt::format("no EK anchor ({}): the salt key pinned at first start stands instead", factory.error().message()));
  return ok_status();
}

Status ProtectedTpm::stand_on_first_start_key() {
  const uint32_t handle = request_.standing->salt_key_handle;
  const SaltKind kind = config_.salt.value_or(choose_salt(info_));
  TPMSEC_ASSIGN_OR_RETURN(PersistentSaltKey key, salt_key_on_first_start(*tpm_, handle, kind));
  if (config_.salt && *config_.salt != key.kind()) {
    return usage_error(fmt::format("the key at 0x{:08x} is {}: salt={} cannot be used with it", handle,
                                   salt_name(key.kind()), *config_.salt == SaltKind::kRsa ? "rsa" : "ecc"));
  }
  const TpmId tpm = id();
  if (Status st = request_.host->put_salt_key(tpm, key); !st.ok()) {
    if (key.created) (void)evict_salt_key(*tpm_, key);
    return st.error();
  }
  say(fmt::format(
      "warning: trust on first start: pinned the salt key {} at 0x{:08x} ({}) for {} in {}; an interposer "
      "present now would go unnoticed, every later start and TPM reset is held to this key",
      to_hex(key.name), handle,
      key.created ? "made now by tpmsec serve; 'tpmsec serve --forget-state' evicts it"
                  : "found there and adopted (systemd-tpm2-setup's SRK lives at 0x81000001); never evicted by tpmsec",
      tpm.text, request_.host->where(StateRecord::kSaltKey, tpm)));
  config_.salt = key.kind();
  config_.salt_key = std::move(key);
  standing_first_start_ = true;
  return ok_status();
}

Status ProtectedTpm::check_standing_salt_key() {
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<SessionFactory> factory, SessionFactory::create(*tpm_, config_, &info_));
  Status st = check_pinned_salt_key(*factory, *config_.salt_key);
  if (st.ok()) return st;
  const Error& e = st.error();
  return Error(e.kind(),
               fmt::format("{}; if the TPM was cleared or the key replaced on purpose, forget the pin with "
                           "'tpmsec serve --forget-state' and start again",
                           e.message()),
               e.tpm_rc(), e.reason());
}

void ProtectedTpm::describe_anchor() {
  const TpmId tpm = id();
  const ProtectionConfig& c = config_;
  if (served()) {
    anchor_description_ = "the tpmsec server's own";
  } else if (c.unsalted) {
    anchor_description_ = "none (unsalted: no protection against an interposer)";
  } else if (c.bind) {
    anchor_description_ = fmt::format("bind secret of NV index 0x{:08x} provisioned in {}", c.bind->nv_index,
                                      request_.host->where(StateRecord::kBindSecret, tpm));
  } else if (c.salt_key) {
    anchor_description_ = fmt::format(
        "persistent salt key 0x{:08x} ({}, {}, name {}) {}", c.salt_key->handle, salt_name(c.salt_key->kind()),
        c.salt_key->created ? "made by tpmsec" : "adopted", to_hex(c.salt_key->name),
        standing_first_start_
            ? fmt::format("pinned now in {}: trust on first start", request_.host->where(StateRecord::kSaltKey, tpm))
            : fmt::format("pinned in {}", request_.host->where(StateRecord::kSaltKey, tpm)));
  } else if (c.ek_ca) {
    anchor_description_ = !standing_ek_root_.empty() ? standing_ek_root_ : "EK certificate verified against --ek-ca";
  } else if (c.pinned_null_name) {
    anchor_description_ = fmt::format("null key {} pinned by {}", to_hex(*c.pinned_null_name), c.pin_origin);
  } else if (c.trust_first_use) {
    anchor_description_ = "null key trusted on its first use this boot (tofu)";
  } else if (base_->in_process()) {
    anchor_description_ = "none needed (an in-process TPM: no bus)";
  } else {
    anchor_description_ = "none";
  }
}

Status ProtectedTpm::reanchor() { return resolve(request_); }

std::string ProtectedTpm::policy_rule() {
  Result<Policy> p = load_command_policy(request_.policy);
  if (!p.ok()) return "policy unreadable: " + p.error().message();
  PolicyDecision d = decide(*p, facts_);
  if (!d.rule) return fmt::format("policy {}: no rule matches", p->origin);
  return fmt::format("policy {} rule '{}' (line {})", p->origin, d.rule->name, d.rule->line);
}

}  // namespace tpmsec
