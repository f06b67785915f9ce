// Session lifecycle strategies: how a stream of protected PCR extends (or any protected commands) gets its
// sessions, and what each costs in TPM commands.
//   per-command    Linux 6.10: ContextLoad(null key), salted StartAuthSession, FlushContext(null key),
//                  then the command without continueSession.
//   saved-context  the seed thread's proposal: ContextLoad(session), command with continueSession,
//                  ContextSave(session).
//   resident       Linux 6.12: one session kept loaded with continueSession.
//   plain          tpm.disable_pcr_integrity=1: password authorization.
//   checkpoint     ours: plain extends, and an audited PCR read every N extends that compares the PCR with
//                  the value tpmsec expects.
// Ownership: make_lifecycle() borrows the caller's SessionFactory; an ExtendStream borrows the Tpm, owns
// its factory, lifecycle and sessions, and flushes them by finish(). Not thread-safe: the Tpm's thread.
// Errors come back as values. No extend is applied twice: after a failure whose outcome is unknown, a
// stream with StreamOptions::recover proves the failed session gone (audited GetCapability) and reads the
// PCR (audited) before it retries; one without recover retires the session and stops. When extend()
// returns an error, each command it sent has run or can never run, except "is still in the TPM"
// (kIntegrity): the withheld digest may land later, once. The audit session is as trustworthy as the salt
// key behind it (session_factory.h). Why and how: docs/strategies.md, "Recovery, and why no extend is
// applied twice", and its subsection "In the code (include/tpmsec/strategy.h)".
#ifndef TPMSEC_STRATEGY_H_
#define TPMSEC_STRATEGY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/session_factory.h"

namespace tpmsec {

enum class StrategyKind { kPerCommand, kSavedContext, kResident, kPlain, kCheckpoint };

std::string_view strategy_name(StrategyKind kind);
Result<StrategyKind> parse_strategy(std::string_view name);
// All strategies, in the order reports list them.
const std::vector<StrategyKind>& all_strategies();
// Whether the strategy prevents (hmac), detects (checkpoint) or neither (plain).
std::string_view strategy_protection(StrategyKind kind);
// per-command, saved-context and resident: the strategies that prevent tampering.
bool prevents(StrategyKind kind);

// Where the sessions of a strategy come from, and where they go after a
// command. Works for any command: acquire() a session, run the command with
// Auth{session, authValue}, then release().
class SessionLifecycle {
 public:
  virtual ~SessionLifecycle() = default;
  // The session for the next command (nullptr: password authorization).
  virtual Result<Session*> acquire() = 0;
  // After the command: saves, keeps or lets go of the session.
  virtual Status release() = 0;
  // The session's state is unknown (an error, a reset): the next acquire rebuilds it.
  virtual void invalidate() = 0;
  // The HMAC session acquire() returned and release() has not let go of,
  // if any: the stream's opening audited read borrows it, so one salted
  // session serves the read and the extends.
  virtual HmacSession* current() { return nullptr; }
  // saved-context: ContextSaves the TPM refused with TPM_RC_CONTEXT_GAP, after
  // which the session stayed loaded until the next save.
  virtual uint64_t saves_refused() const { return 0; }
};

// A lifecycle for `kind` (checkpoint uses plain sessions for its extends).
Result<std::unique_ptr<SessionLifecycle>> make_lifecycle(StrategyKind kind, SessionFactory* factory);

struct StreamOptions {
  uint32_t pcr = 16;
  uint16_t bank = alg::kSha256;
  // checkpoint: verify every N extends (0: only on demand and at finish()).
  uint32_t checkpoint_every = 100;
  // Accept a TPM Reset (new null key, PCRs reset) and carry on: test rigs only.
  bool allow_reset = false;
  // Bound on rebuild-and-retry rounds for one extend.
  int max_recoveries = 3;
  // One extend, then finish() (a one-shot `pcr extend`). For the preventing
  // strategies the session ends with the extend (for one command the three
  // lifecycles coincide, and per-command's costs least) and the PCR is not
  // read first, so the stream costs what Linux's per-command extend does. A
  // failed extend is then not retried, since whether it landed cannot be
  // learnt without the starting value; its session is still retired, so
  // nothing sent for it can run later.
  bool one_shot = false;
  // The opening audited read uses the session of the first extend (one
  // salted session instead of two). Off where the first extend's own set-up
  // is being measured (bench reports it apart from the stream's opening).
  bool read_with_first_session = true;
  // Preventing strategies: read the PCR through an audit session at open()
  // (one audited PCR_Read, through the first extend's session unless
  // read_with_first_session is off), so that an extend whose outcome is
  // unknown (an error code, which is not authenticated) is recovered: its
  // session retired, the PCR read, and the extend retried or counted as
  // landed (the Recovery section of docs/strategies.md). Off (the CLI's
  // `pcr extend INDEX -` without --recover): no opening read; such a failure
  // ends the stream as one_shot's does: its session is retired, so nothing
  // sent for it can run later, and it is not retried. Every extend that
  // succeeded before it is known to have landed (its response HMAC says so).
  // checkpoint always reads (it needs the starting value), plain never does.
  bool recover = true;
  // `pcr extend --read-back`: the stream reads the PCR through an audit
  // session at open() whatever the other options say (plain too, through a
  // session of its own), so that read_back() can compare the value it reads
  // at the end with the one the extends should have made.
  bool read_back = false;
  ProtectionConfig protection;
};

// Whether an extend is the stream's last (ExtendStream::extend).
enum class Last { kNo, kYes };

struct StreamStats {
  uint64_t extends = 0;
  uint64_t rebuilds = 0;        // sessions rebuilt after an error
  uint64_t landed_checks = 0;   // audited reads to learn whether a failed extend landed
  uint64_t already_landed = 0;  // failures after which the extend had in fact landed
  uint64_t reflushes = 0;       // failed attempts' sessions still listed after their FlushContext
  uint64_t checkpoints = 0;
  uint64_t resets_accepted = 0;
  uint64_t saves_refused = 0;  // saved-context: ContextSaves refused with TPM_RC_CONTEXT_GAP (kept loaded)
};

// What a checkpoint found when the PCR did not match.
struct CheckpointMismatch {
  uint32_t pcr = 0;
  Bytes expected;
  Bytes actual;
  uint64_t extends_since_good = 0;  // extends since the last checkpoint that matched
  Bytes marker;                     // the tamper marker extended afterwards
};

class ExtendStream {
 public:
  // Opens a stream: creates the null key (protected strategies) and reads
  // the PCR through an audit session to learn the value it starts from
  // (not for a one_shot preventing stream, nor one without options.recover).
  static Result<std::unique_ptr<ExtendStream>> open(Tpm& tpm, StrategyKind kind, const StreamOptions& options,
                                                    const TpmInfo* info = nullptr);
  ~ExtendStream();

  // Extends the PCR with `digest` through the strategy. Last::kYes: no
  // other extend follows (finish() does next), so a preventing strategy's
  // session ends with this extend: it is sent without continueSession, the
  // TPM flushes the session when the extend succeeds (its authenticated
  // response says so, and the ledger lets go of the handle), and finish()
  // sends no FlushContext for it. A resident or saved-context stream's last
  // extend then costs what its steady state does, and no command follows.
  // A failed last extend is recovered (or not) as any other; the checkpoint
  // and plain strategies ignore it.
  Status extend(ByteView digest, Last last = Last::kNo);
  // checkpoint: audited read and compare now (a no-op for other strategies).
  Status checkpoint();
  // Ends the stream: a final checkpoint (checkpoint strategy), sessions flushed.
  Status finish();
  // StreamOptions::read_back, in place of finish() (which it does): an
  // audited read of the PCR, which must equal expected() (the authenticated
  // opening value extended by every digest the stream applied); a different
  // value is kIntegrity, naming both.
  Result<Bytes> read_back();

  StrategyKind kind() const { return kind_; }
  const StreamStats& stats() const { return stats_; }
  // The PCR value the stream expects (after every extend it applied).
  const Bytes& expected() const { return expected_; }
  const CheckpointMismatch* mismatch() const { return mismatch_ ? &*mismatch_ : nullptr; }
  SessionFactory* factory() { return factory_.get(); }

 private:
  ExtendStream(Tpm& tpm, StrategyKind kind, StreamOptions options) : tpm_(&tpm), kind_(kind), options_(options) {}

  // Runs `use` with the audit session (started if needed; kept by
  // checkpoint, and by the others while hold_audit_ is set).
  Status with_audit(const std::function<Status(const Auth&)>& use);
  // An audit-authenticated read of the stream's PCR.
  Result<Bytes> audited_read();
  // The same, through the session the first extend will use.
  Result<Bytes> read_with_first_session();
  // Flushes `session` (a failed attempt's, which extend_once() left to it)
  // and proves through audited listings that it is no longer in the TPM,
  // flushing it again while it is.
  Status retire(uint32_t session);
  // Makes audit_session_ a session whose handle, as named, is not in `slot`
  // (starting one before the session in `slot` is flushed).
  Status start_audit_apart_from(uint32_t slot);
  // Whether an audited listing shows a session in `slot`.
  Result<bool> slot_listed(uint32_t slot);
  // Did `digest` land on top of expected_? Fails closed if the PCR is neither.
  Result<bool> landed(ByteView digest);
  // A session-start failure: accept a reset when allowed, else propagate.
  Status handle_reset(const Error& error);
  // One attempt; `session` is set to the handle of the session it used.
  Status extend_once(ByteView digest, Last last, uint32_t* session);
  // After a failed attempt: retire its session, then learn whether it landed.
  enum class Recovery { kLanded, kRetry, kReset };
  Result<Recovery> recover(const Error& failure, uint32_t session, ByteView digest);
  void release_audit();

  Tpm* tpm_;
  StrategyKind kind_;
  StreamOptions options_;
  std::unique_ptr<SessionFactory> factory_;
  std::unique_ptr<SessionLifecycle> lifecycle_;
  std::unique_ptr<HmacSession> audit_session_;  // checkpoint: kept loaded between checkpoints
  bool hold_audit_ = false;                     // keep it through one failure's checks
  Bytes expected_;
  bool start_known_ = false;  // expected_ holds an authenticated value
  uint64_t since_good_ = 0;
  std::optional<CheckpointMismatch> mismatch_;
  StreamStats stats_;
};

}  // namespace tpmsec

#endif  // TPMSEC_STRATEGY_H_
