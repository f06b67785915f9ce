#include "tpmsec/session_factory.h"

namespace tpmsec {

SaltKind choose_salt(const TpmInfo& info) { return info.ecc_p256 ? SaltKind::kEcc : SaltKind::kRsa; }

Result<std::unique_ptr<SessionFactory>> SessionFactory::create(Tpm& tpm, const ProtectionConfig& config,
                                                               const TpmInfo* info) {
  std::unique_ptr<SessionFactory> f(new SessionFactory(tpm, config));
  if (!config.unsalted) {
    SaltKind kind = config.salt ? *config.salt : (info ? choose_salt(*info) : SaltKind::kEcc);
    f->config_.salt = kind;
    TPMSEC_ASSIGN_OR_RETURN(NullKey key, NullKey::create(tpm, kind, config.pinned_null_name));
    f->null_key_ = std::move(key);
  }
  return f;
}

Result<std::unique_ptr<HmacSession>> SessionFactory::start(uint8_t attributes) {
  SessionOptions options;
  options.auth_hash = config_.auth_hash;
  options.symmetric = config_.symmetric;
  options.attributes = attributes;
  options.random = config_.random;
  if (!null_key_) return HmacSession::start(*tpm_, options);
  TPMSEC_ASSIGN_OR_RETURN(ScopedHandle key, null_key_->load(*tpm_));
  NamedHandle key_handle = null_key_->named(key.get());
  options.tpm_key = &key_handle;
  options.tpm_key_public = &null_key_->public_area();
  auto session = HmacSession::start(*tpm_, options);
  // The key is flushed whether or not the session started; a session error
  // is the one worth reporting.
  Status flushed = key.flush();
  if (!session.ok()) return session;
  TPMSEC_RETURN_IF_ERROR(flushed);
  return session;
}

Status SessionFactory::repin() {
  if (!null_key_) return ok_status();
  return null_key_->repin(*tpm_);
}

}  // namespace tpmsec
