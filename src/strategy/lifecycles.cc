// The four session lifecycles (strategy.h).
#include <fmt/format.h>

#include "tpmsec/response_code.h"
#include "tpmsec/strategy.h"

namespace tpmsec {
namespace {

// Linux 6.10: a new salted session per command, ended by the TPM with it.
class PerCommandLifecycle final : public SessionLifecycle {
 public:
  explicit PerCommandLifecycle(SessionFactory& factory) : factory_(factory) {}
  // A new session unless the last one acquired was not released yet.
  Result<Session*> acquire() override {
    if (!session_) {
      TPMSEC_ASSIGN_OR_RETURN(session_, factory_.start(0));
    }
    return static_cast<Session*>(session_.get());
  }
  HmacSession* current() override { return session_.get(); }
  // A successful command ended the session in the TPM; a failed one did not,
  // and the destructor flushes it.
  Status release() override {
    session_.reset();
    return ok_status();
  }
  void invalidate() override { session_.reset(); }

 private:
  SessionFactory& factory_;
  std::unique_ptr<HmacSession> session_;
};

// The seed's proposal: the session lives context-saved between commands.
class SavedContextLifecycle final : public SessionLifecycle {
 public:
  explicit SavedContextLifecycle(SessionFactory& factory) : factory_(factory) {}
  Result<Session*> acquire() override {
    if (session_ && saved_) {
      saved_ = false;
      Status st = session_->load(factory_.tpm(), context_);
      if (!st.ok()) {
        // The context did not load (a reset, an eviction), or the answer was
        // lost or forged and the TPM may have loaded it after all: either way
        // the session is still ours, saved or loaded, and FlushContext ends
        // both. Flush it, then rebuild.
        (void)session_->flush();
        session_.reset();
        if (st.error().kind() != ErrorKind::kTpm) return st.error();
      }
    }
    if (!session_) {
      TPMSEC_ASSIGN_OR_RETURN(session_, factory_.start(attr::kContinueSession));
    }
    return static_cast<Session*>(session_.get());
  }
  Status release() override {
    if (!session_) return ok_status();
    if (!session_->usable()) {
      session_.reset();
      return ok_status();
    }
    auto ctx = session_->save(factory_.tpm());
    if (!ctx.ok() && ctx.error().kind() == ErrorKind::kTpm && rc_base(ctx.error().tpm_rc()) == rc::kContextGap) {
      // The chip's context gap is at its maximum (Part 1 §30): an older
      // saved session, not ours (ours is loaded), must be loaded or flushed
      // by whoever saved it before any session can be saved. The refusal
      // left ours loaded: keep it so, as resident does, and save it again
      // after the next command. Were the code forged and the session saved
      // after all, the next command fails on it and the stream's recovery
      // (retire, landed check) runs, as for any failed extend.
      ++saves_refused_;
      return ok_status();
    }
    if (!ctx.ok()) {
      session_.reset();
      return ctx.error();
    }
    context_ = std::move(*ctx);
    saved_ = true;
    return ok_status();
  }
  void invalidate() override {
    session_.reset();
    saved_ = false;
  }
  HmacSession* current() override { return saved_ ? nullptr : session_.get(); }
  uint64_t saves_refused() const override { return saves_refused_; }

 private:
  SessionFactory& factory_;
  std::unique_ptr<HmacSession> session_;
  Context context_;
  bool saved_ = false;
  uint64_t saves_refused_ = 0;
};

// Linux 6.12: one session kept loaded across commands.
class ResidentLifecycle final : public SessionLifecycle {
 public:
  explicit ResidentLifecycle(SessionFactory& factory) : factory_(factory) {}
  Result<Session*> acquire() override {
    if (session_ && !session_->usable()) session_.reset();
    if (!session_) {
      TPMSEC_ASSIGN_OR_RETURN(session_, factory_.start(attr::kContinueSession));
    }
    return static_cast<Session*>(session_.get());
  }
  Status release() override { return ok_status(); }
  void invalidate() override { session_.reset(); }
  HmacSession* current() override { return session_.get(); }

 private:
  SessionFactory& factory_;
  std::unique_ptr<HmacSession> session_;
};

// tpm.disable_pcr_integrity=1: password authorization.
class PlainLifecycle final : public SessionLifecycle {
 public:
  Result<Session*> acquire() override { return Auth::password().session; }
  Status release() override { return ok_status(); }
  void invalidate() override {}
};

const std::vector<std::pair<StrategyKind, std::string_view>>& names() {
  static const std::vector<std::pair<StrategyKind, std::string_view>> n{{StrategyKind::kPerCommand, "per-command"},
                                                                        {StrategyKind::kSavedContext, "saved-context"},
                                                                        {StrategyKind::kResident, "resident"},
                                                                        {StrategyKind::kPlain, "plain"},
                                                                        {StrategyKind::kCheckpoint, "checkpoint"}};
  return n;
}

}  // namespace

std::string_view strategy_name(StrategyKind kind) {
  for (const auto& [k, n] : names()) {
    if (k == kind) return n;
  }
  return "?";
}

Result<StrategyKind> parse_strategy(std::string_view name) {
  for (const auto& [k, n] : names()) {
    if (n == name) return k;
  }
  return usage_error(
      fmt::format("unknown strategy '{}' (expected per-command, saved-context, resident, plain or checkpoint)", name));
}

const std::vector<StrategyKind>& all_strategies() {
  static const std::vector<StrategyKind> all{StrategyKind::kPerCommand, StrategyKind::kSavedContext,
                                             StrategyKind::kResident, StrategyKind::kPlain, StrategyKind::kCheckpoint};
  return all;
}

std::string_view strategy_protection(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::kPlain:
      return "none";
    case StrategyKind::kCheckpoint:
      return "detection";
    default:
      return "prevention";
  }
}

bool prevents(StrategyKind kind) { return strategy_protection(kind) == "prevention"; }

Result<std::unique_ptr<SessionLifecycle>> make_lifecycle(StrategyKind kind, SessionFactory* factory) {
  if (kind == StrategyKind::kPlain || kind == StrategyKind::kCheckpoint) {
    return std::unique_ptr<SessionLifecycle>(std::make_unique<PlainLifecycle>());
  }
  if (!factory) return usage_error(fmt::format("the {} strategy needs a session factory", strategy_name(kind)));
  switch (kind) {
    case StrategyKind::kPerCommand:
      return std::unique_ptr<SessionLifecycle>(std::make_unique<PerCommandLifecycle>(*factory));
    case StrategyKind::kSavedContext:
      return std::unique_ptr<SessionLifecycle>(std::make_unique<SavedContextLifecycle>(*factory));
    default:
      return std::unique_ptr<SessionLifecycle>(std::make_unique<ResidentLifecycle>(*factory));
  }
}

}  // namespace tpmsec
