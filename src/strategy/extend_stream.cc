#include <fmt/format.h>

#include "tpmsec/crypto.h"
#include "tpmsec/handle_ledger.h"
#include "tpmsec/pcr.h"
#include "tpmsec/strategy.h"

namespace tpmsec {
namespace {

constexpr std::string_view kTamperMarkerLabel = "tpmsec: checkpoint mismatch, PCR no longer trustworthy";
// FlushContexts of a failed attempt's session before the stream gives up.
constexpr int kMaxFlushes = 3;

}  // namespace

Result<std::unique_ptr<ExtendStream>> ExtendStream::open(Tpm& tpm, StrategyKind kind, const StreamOptions& options,
                                                         const TpmInfo* info) {
  std::unique_ptr<ExtendStream> s(new ExtendStream(tpm, kind, options));
  if (kind != StrategyKind::kPlain || options.read_back) {
    // Checkpoints, landed-checks and read-backs read the PCR through salted audit sessions.
    TPMSEC_ASSIGN_OR_RETURN(s->factory_, SessionFactory::create(tpm, options.protection, info));
  }
  const bool preventing = prevents(kind);
  TPMSEC_ASSIGN_OR_RETURN(
      s->lifecycle_,
      make_lifecycle(options.one_shot && preventing ? StrategyKind::kPerCommand : kind, s->factory_.get()));
  // Without the starting value a failure whose outcome is unknown is not
  // retried (strategy.h: StreamOptions::recover).
  if (preventing && (options.one_shot || !options.recover) && !options.read_back) return s;
  if (preventing && options.read_with_first_session) {
    TPMSEC_ASSIGN_OR_RETURN(s->expected_, s->read_with_first_session());
  } else if (s->factory_) {
    TPMSEC_ASSIGN_OR_RETURN(s->expected_, s->audited_read());
  }
  s->start_known_ = s->factory_ != nullptr;
  return s;
}

Result<Bytes> ExtendStream::read_with_first_session() {
  // The first extend's session, set to audit for this one read: one salted
  // session (one ContextLoad, StartAuthSession, FlushContext of the salt
  // key) instead of two.
  TPMSEC_RETURN_IF_ERROR(status_of(lifecycle_->acquire()));
  HmacSession* session = lifecycle_->current();
  if (!session) return audited_read();
  const uint8_t attributes = session->attributes();
  session->set_attributes(attr::kAudit | attr::kContinueSession);
  Auth audit{session, {}};
  auto value = pcr_read(*tpm_, options_.bank, options_.pcr, std::span<const Auth>(&audit, 1));
  session->set_attributes(attributes);
  if (!value.ok()) {
    lifecycle_->invalidate();
    return value.error().with_context("audited PCR read");
  }
  return value;
}

ExtendStream::~ExtendStream() = default;

Status ExtendStream::with_audit(const std::function<Status(const Auth&)>& use) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!audit_session_ || !audit_session_->usable()) {
      audit_session_.reset();
      auto started = factory_->start(attr::kAudit | attr::kContinueSession);
      if (!started.ok()) {
        TPMSEC_RETURN_IF_ERROR(handle_reset(started.error()));
        continue;
      }
      audit_session_ = std::move(*started);
    }
    Auth audit{audit_session_.get(), {}};
    Status st = use(audit);
    if (!st.ok()) audit_session_.reset();
    if (st.ok() || st.error().kind() == ErrorKind::kIntegrity || attempt == 1) return st;
    // The session may have been flushed or evicted: one rebuild.
  }
  return runtime_error("audited read failed");
}

void ExtendStream::release_audit() {
  // checkpoint keeps its audit session loaded between checkpoints (one TPM
  // command per checkpoint), plain with read_back from its opening read to
  // the read-back; the others start one for the rare read.
  const bool keep = kind_ == StrategyKind::kCheckpoint || (kind_ == StrategyKind::kPlain && options_.read_back);
  if (!keep && !hold_audit_) audit_session_.reset();
}

Result<Bytes> ExtendStream::audited_read() {
  Bytes value;
  Status st = with_audit([&](const Auth& audit) -> Status {
    TPMSEC_ASSIGN_OR_RETURN(value, pcr_read(*tpm_, options_.bank, options_.pcr, std::span<const Auth>(&audit, 1)));
    return ok_status();
  });
  release_audit();
  if (!st.ok()) return st.error();
  return value;
}

Status ExtendStream::start_audit_apart_from(uint32_t slot) {
  if (audit_session_ && audit_session_->usable() && HandleLedger::slot(audit_session_->handle()) != slot) {
    return ok_status();
  }
  audit_session_.reset();
  auto started = factory_->start(attr::kAudit | attr::kContinueSession);
  if (!started.ok()) {
    // A TPM Reset a test rig made (allow_reset) is accepted as with_audit
    // accepts it; anything else fails here. The reset's own audited read
    // may leave a session to use.
    TPMSEC_RETURN_IF_ERROR(handle_reset(started.error()));
    if (audit_session_ && audit_session_->usable() && HandleLedger::slot(audit_session_->handle()) != slot) {
      return ok_status();
    }
    audit_session_.reset();
    started = factory_->start(attr::kAudit | attr::kContinueSession);
    if (!started.ok()) return started.error();
  }
  audit_session_ = std::move(*started);
  if (HandleLedger::slot(audit_session_->handle()) != slot) return ok_status();
  // Its response names the failed session's slot. Either the TPM had ended
  // that session (the extend ran without continueSession) and gave the slot
  // out again, or an interposer renamed the handle: a response handle proves
  // nothing, so a second session is started while this one holds the slot
  // (the TPM cannot give it out twice, and the ledger refuses the name), and
  // this one is flushed under the name it was given, which ends whatever
  // holds the slot: this session, or the failed one.
  auto other = factory_->start(attr::kAudit | attr::kContinueSession);
  audit_session_.reset();
  if (!other.ok()) return other.error();
  audit_session_ = std::move(*other);
  return ok_status();
}

Result<bool> ExtendStream::slot_listed(uint32_t slot) {
  for (int attempt = 0;; ++attempt) {
    TPMSEC_RETURN_IF_ERROR(start_audit_apart_from(slot));
    Auth audit{audit_session_.get(), {}};
    bool listed = false;
    Status st = ok_status();
    for (uint32_t first : {ht::kFirstLoadedSession, ht::kFirstSavedSession}) {
      auto handles = tpm_->list_handles(first, std::span<const Auth>(&audit, 1));
      if (!handles.ok()) {
        st = handles.error();
        break;
      }
      for (uint32_t h : *handles) listed = listed || HandleLedger::slot(h) == slot;
    }
    if (st.ok()) return listed;
    audit_session_.reset();
    // The audit session may have been flushed or evicted: one rebuild.
    if (st.error().kind() == ErrorKind::kIntegrity || attempt == 1) return st.error();
  }
}

Status ExtendStream::retire(uint32_t session) {
  uint8_t type = static_cast<uint8_t>(session >> 24);
  if (type != ht::kHmacSession && type != ht::kPolicySession) return ok_status();  // password: nothing to retire
  const uint32_t slot = HandleLedger::slot(session);
  // The audit session is started before the failed one is flushed, so the
  // TPM cannot hand it the failed session's handle; one that is named so
  // anyway is not used (start_audit_apart_from).
  Status started = start_audit_apart_from(slot);
  (void)tpm_->flush_forgotten(session);
  if (!started.ok() && started.error().kind() == ErrorKind::kTpm) {
    // No room for another session while the failed one is loaded (a chip's
    // few session slots): with it flushed, once more. The TPM may now give
    // out its handle, and start_audit_apart_from still uses no session named
    // in it; the listing below is what proves it gone either way.
    started = start_audit_apart_from(slot);
  }
  TPMSEC_RETURN_IF_ERROR(started);
  for (int flushes = 1;; ++flushes) {
    // Only an authenticated listing without the slot proves the session
    // gone; the listing session's own slot is elsewhere, whatever handle the
    // TPM really gave it, so a listed slot is the failed session's.
    TPMSEC_ASSIGN_OR_RETURN(bool listed, slot_listed(slot));
    if (!listed) return ok_status();
    if (flushes == kMaxFlushes) break;
    // Its FlushContext did not take; the authenticated listing says it is
    // still there, and it was ours.
    ++stats_.reflushes;
    (void)tpm_->flush_forgotten(session);
  }
  return integrity_error(fmt::format(
      "session 0x{:08x} is still in the TPM after {} FlushContext: an interposer may be holding back a command "
      "for it, so the extend is not retried; a PCR read shows whether it landed",
      session, kMaxFlushes));
}

Status ExtendStream::handle_reset(const Error& error) {
  if (error.kind() != ErrorKind::kIntegrity || error.reason() != ErrorReason::kNullKeyChanged ||
      !options_.allow_reset || !factory_) {
    return error;
  }
  // --allow-reset: a test rig reset its TPM. The new null key is accepted and
  // the PCR restarts from its reset value.
  TPMSEC_RETURN_IF_ERROR(factory_->repin());
  ++stats_.resets_accepted;
  audit_session_.reset();
  lifecycle_->invalidate();
  auto value = audited_read();
  if (!value.ok()) return value.error();
  expected_ = std::move(*value);
  since_good_ = 0;
  return ok_status();
}

Result<bool> ExtendStream::landed(ByteView digest) {
  ++stats_.landed_checks;
  TPMSEC_ASSIGN_OR_RETURN(Bytes actual, audited_read());
  if (actual == expected_) return false;
  TPMSEC_ASSIGN_OR_RETURN(Bytes after, pcr_extended_value(options_.bank, expected_, digest));
  if (actual == after) return true;
  return integrity_error(fmt::format("PCR {} holds {}, neither the expected {} nor that value extended with {}",
                                     options_.pcr, to_hex(actual), to_hex(expected_), to_hex(digest)));
}

Status ExtendStream::extend_once(ByteView digest, Last last, uint32_t* session_handle) {
  *session_handle = 0;
  TPMSEC_ASSIGN_OR_RETURN(Session * session, lifecycle_->acquire());
  *session_handle = session->handle();
  if (last == Last::kYes) {
    // The stream's last extend ends its session: the TPM flushes it when the
    // extend succeeds, and the session (whose verified response says so)
    // lets go of its handle, so release() keeps nothing and finish() flushes
    // nothing. After a failed one it may still be there (the error code is
    // not authenticated): invalidate() below flushes it, and recovery (or
    // retire(), without it) proves it gone, as for any failed extend.
    if (HmacSession* hmac = lifecycle_->current(); hmac && hmac->handle() == session->handle()) {
      hmac->set_attributes(hmac->attributes() & ~attr::kContinueSession);
    }
  }
  Status st = pcr_extend(*tpm_, options_.bank, options_.pcr, digest, Auth{session, {}});
  if (st.ok()) return lifecycle_->release();
  if (HmacSession* hmac = lifecycle_->current(); hmac && hmac->handle() == *session_handle) {
    // Not flushed here: retire() flushes it once its audit session is
    // started, so that the TPM cannot give that session this one's handle.
    hmac->abandon();
    tpm_->forget(*session_handle);
  }
  lifecycle_->invalidate();
  return st;
}

Result<ExtendStream::Recovery> ExtendStream::recover(const Error& e, uint32_t session, ByteView digest) {
  // First make sure nothing sent in the attempt can run later (strategy.h).
  Status retired = retire(session);
  if (!retired.ok()) {
    if (retired.error().kind() == ErrorKind::kIntegrity) return retired.error();
    return e;  // the TPM is unreachable: report the original failure
  }
  if (e.kind() == ErrorKind::kIntegrity) {
    // A changed null key (TPM Reset) is accepted only with allow_reset;
    // a response that failed authentication never is.
    if (!options_.allow_reset || e.reason() != ErrorReason::kNullKeyChanged) return e;
    TPMSEC_RETURN_IF_ERROR(handle_reset(e));
    return Recovery::kReset;
  }
  // The outcome is unknown: the error code may be forged and the TPM may
  // have executed the extend. Learn from the PCR before trying again.
  auto did_land = landed(digest);
  if (!did_land.ok()) {
    if (did_land.error().kind() == ErrorKind::kIntegrity) return did_land.error();
    return e;  // the TPM is unreachable: report the original failure
  }
  return *did_land ? Recovery::kLanded : Recovery::kRetry;
}

Status ExtendStream::extend(ByteView digest, Last last) {
  TPMSEC_RETURN_IF_ERROR(check_digest_length(options_.bank, digest));
  if (mismatch_) return integrity_error("the stream already failed a checkpoint");
  for (int round = 0;; ++round) {
    uint32_t session = 0;
    Status st = extend_once(digest, prevents(kind_) ? last : Last::kNo, &session);
    if (st.ok()) break;
    const Error& e = st.error();
    if (kind_ == StrategyKind::kPlain || e.kind() == ErrorKind::kUsage || e.kind() == ErrorKind::kUnsupported) {
      if (session >> 24 == ht::kHmacSession) (void)tpm_->flush_forgotten(session);
      return st;
    }
    if (!start_known_) {
      // one_shot, or a stream without recover: whether it landed cannot be
      // learnt; make sure it cannot land later, and report the failure.
      hold_audit_ = true;
      Status retired = retire(session);
      hold_audit_ = false;
      release_audit();
      if (!retired.ok() && retired.error().kind() == ErrorKind::kIntegrity) return retired;
      return st.error().with_context(
          fmt::format("PCR {} extend (not retried: whether it landed is unknown; "
                      "'tpmsec pcr read --protect audit' shows the PCR)",
                      options_.pcr));
    }
    // One audit session serves all of this failure's checks.
    hold_audit_ = true;
    auto recovery = recover(e, session, digest);
    hold_audit_ = false;
    release_audit();
    if (!recovery.ok()) return recovery.error();
    if (*recovery == Recovery::kReset) continue;
    if (*recovery == Recovery::kLanded) {
      ++stats_.already_landed;
      break;
    }
    if (round >= options_.max_recoveries) return st;
    ++stats_.rebuilds;
  }
  if (start_known_) {
    TPMSEC_ASSIGN_OR_RETURN(expected_, pcr_extended_value(options_.bank, expected_, digest));
  }
  ++stats_.extends;
  stats_.saves_refused = lifecycle_->saves_refused();
  ++since_good_;
  if (kind_ == StrategyKind::kCheckpoint && options_.checkpoint_every > 0 &&
      stats_.extends % options_.checkpoint_every == 0) {
    return checkpoint();
  }
  return ok_status();
}

Status ExtendStream::checkpoint() {
  if (kind_ != StrategyKind::kCheckpoint) return ok_status();
  if (mismatch_) return integrity_error("the stream already failed a checkpoint");
  ++stats_.checkpoints;
  TPMSEC_ASSIGN_OR_RETURN(Bytes actual, audited_read());
  if (actual == expected_) {
    since_good_ = 0;
    return ok_status();
  }
  // An extend was dropped or substituted on the bus. Make the PCR unable to
  // match any log without this event, through a protected session.
  CheckpointMismatch m{options_.pcr, expected_, actual, since_good_, {}};
  TPMSEC_ASSIGN_OR_RETURN(m.marker, crypto::hash(options_.bank, {as_bytes(kTamperMarkerLabel), actual}));
  mismatch_ = m;
  std::string marker_note = "tamper marker extended";
  auto session = factory_->start(0);
  Status marked = session.ok() ? pcr_extend(*tpm_, options_.bank, options_.pcr, m.marker, Auth{session->get(), {}})
                               : Status(session.error());
  if (!marked.ok()) marker_note = "extending the tamper marker FAILED: " + marked.error().message();
  return integrity_error(fmt::format(
      "checkpoint mismatch on PCR {}: expected {}, TPM has {}; {} extend{} since the last good checkpoint; {}",
      options_.pcr, to_hex(m.expected), to_hex(m.actual), m.extends_since_good, m.extends_since_good == 1 ? "" : "s",
      marker_note));
}

Result<Bytes> ExtendStream::read_back() {
  if (!start_known_) return usage_error("the stream was not opened to read back (StreamOptions::read_back)");
  TPMSEC_RETURN_IF_ERROR(checkpoint());
  // The audit session (kept since open() by plain and checkpoint) ends with
  // this read: no FlushContext follows it.
  Bytes actual;
  Status st = with_audit([&](const Auth& audit) -> Status {
    audit_session_->set_attributes(attr::kAudit);
    TPMSEC_ASSIGN_OR_RETURN(actual, pcr_read(*tpm_, options_.bank, options_.pcr, std::span<const Auth>(&audit, 1)));
    return ok_status();
  });
  audit_session_.reset();
  lifecycle_->invalidate();
  if (!st.ok()) return st.error().with_context("audited read-back");
  if (actual != expected_) {
    return integrity_error(
        fmt::format("PCR {} reads back {}, not the {} the extend{} should have made from the value "
                    "read before: something else extended it, or an extend was not applied",
                    options_.pcr, to_hex(actual), to_hex(expected_), stats_.extends == 1 ? "" : "s"));
  }
  return actual;
}

Status ExtendStream::finish() {
  Status st = checkpoint();
  audit_session_.reset();
  lifecycle_->invalidate();
  return st;
}

}  // namespace tpmsec
