// Protecting another program's TPM commands: a caller's marshalled command
// frame in, the frame to send out; the TPM's response in, exactly the
// response the caller would have seen without the wrapper out (or an error).
// What the tpm2-tss TCTI (src/tcti) and serve's protected server drive for
// every command of programs that know nothing of tpmsec. Per command the
// wrapper's one salted or bound HMAC session goes in with audit (in place of
// the caller's first password, else in a free slot), the first parameter is
// encrypted both ways where the caller's sessions allow it, every Name comes
// from an authenticated answer, and the response's HMAC is verified before a
// byte is returned; what passes unchanged, how session slots are shared and
// each rule's source: docs/tcti.md ("What the wrapper does to a command").
// Owns its session (flushed only if it created it: handle_ledger.h) and its
// name cache. Errors: an unauthenticated, garbled or lost response is an
// error (kIntegrity / kParse / kRuntime) and retires the session; the next
// command starts a new one; a command is never applied twice. Not
// thread-safe: one command at a time, as a TCTI context.
#ifndef TPMSEC_WRAP_H_
#define TPMSEC_WRAP_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/bytes.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/result.h"
#include "tpmsec/session_cache.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/transport.h"

namespace tpmsec {

struct AuthEntry;      // tpmsec/command_frame.h
struct CommandAreas;   // tpmsec/command_frame.h
struct ResponseAreas;  // tpmsec/response_frame.h

// What the wrapper did with the commands of one command code.
struct WrapCounts {
  uint64_t wrapped = 0;             // the wrapper's session was on it
  uint64_t encrypted = 0;           // ... and it carried parameter encryption
  uint64_t passed_through = 0;      // sent as the caller gave it, because (one of these five):
  uint64_t passed_no_session = 0;   //   the command takes no session (TPMA_CC, its table entry)
  uint64_t passed_unknown = 0;      //   a command code the table does not know
  uint64_t passed_unreadable = 0;   //   a frame the codec cannot read (the TPM refuses it)
  uint64_t passed_no_slot = 0;      //   no place beside the caller's sessions (plan_slot: slots full, an
                                    //   authorization left out, the caller's own audit session)
  uint64_t passed_own_handles = 0;  //   a listing of its own handles the resource manager below answers
  uint64_t passwords_replaced = 0;  // a password went out as an HMAC authorization
  uint64_t passwords_left = 0;      // password slots left in clear (only one slot can be the wrapper's)
  uint64_t refused = 0;             // not sent: strict mode (set_strict()) refused it
  uint64_t secrets_left = 0;        // sent with a secret in clear (last_clear() said why)
};

// Why the last command went out with a secret in clear (empty `what`: it
// did not). `what` names the secret (wrap/caller_frame.h, secret_in_clear);
// `why` says what stopped the wrapper; `callers_session` is set when that
// was a session of the caller's own the wrapper cannot re-sign (its HMAC
// key holds an authValue the frame does not show, as tpm2-tools' -p with
// its own HMAC session), the case only the program can fix.
struct ClearNote {
  std::string what;
  std::string why;
  bool callers_session = false;
};

class CommandWrapper {
 public:
  // Sessions come from `factory` (which must outlive the wrapper); the
  // wrapper's own commands (StartAuthSession, name reads, flushes) go to
  // factory.tpm(), on the same transport the wrapped frames go to.
  explicit CommandWrapper(SessionFactory& factory);
  ~CommandWrapper();  // flushes the session
  CommandWrapper(const CommandWrapper&) = delete;
  CommandWrapper& operator=(const CommandWrapper&) = delete;

  // The frame to send for the caller's `command`. May send commands of its
  // own first (a new session, an audited name read). A frame it cannot parse
  // is an error (kUsage): nothing is sent for it.
  Result<Bytes> wrap(ByteView command);
  // The caller's response to the frame wrap() last returned. Call exactly
  // once per wrap(), or response_lost() instead.
  Result<Bytes> unwrap(ByteView response);
  // The response to the last frame never came: the session is retired.
  void response_lost();

  // wrap(), transmit on `transport`, unwrap(); resends once on a new session
  // when the TPM's error named the old one and the command is retry_safe.
  Result<Bytes> exchange(Transport& transport, ByteView command);

  // The session's last command: the caller's `command`-th exchange() (from
  // 1), when it is wrapped, goes out without continueSession, so the TPM
  // ends the session with it and no FlushContext is needed at the end (a
  // one-shot program's one command then costs what `tpmsec pcr extend`
  // costs). A front end says so when that was the last command wrapped the
  // last time the program ran (ProtectedTpm::commands_last_run()). Only a
  // guess: a later command that needs a session gets a new one (one
  // StartAuthSession more), kept to the end; none ends while the wrapper
  // juggles session slots (session_room.cc), nor when the TPM refuses that
  // command (it keeps the session, flushed at the end).
  void end_session_with(uint64_t command) { end_with_ = command; }
  // Forgets the Names of transient objects (a server above per-client handle
  // spaces, whose clients' virtual handles name different objects): the next
  // command naming one reads its Name again through the session.
  void forget_object_names();
  // A caller's session that no longer exists under `handle` (flushed, ended,
  // dropped with its client: a resource manager below says so): what the
  // wrapper kept of it goes, so that a later session under the same handle
  // starts from nothing. Only a session's owner may name it in a frame
  // (the manager's admission, asked before wrap()): nothing another caller
  // sends reaches this state.
  void caller_session_ended(uint32_t handle);
  // The server re-resolved its anchor (a TPM reset: a new null key, a
  // salt key checked again): the wrapper's own session is retired (flushed
  // through the old factory where it may still exist; forgotten, never
  // flushed, when `session_may_exist` is false: a reset took it, and its
  // handle may be another's by now) and the next one comes from `factory`
  // (which must outlive the wrapper). What it keeps of callers' sessions
  // and of Names stays, so no client's protection is lost to a fault
  // another caused.
  void use_factory(SessionFactory& factory, bool session_may_exist = true);
  // The same Names taken out (forgotten here) and put back: a server keeps
  // each client's apart (its virtual handles name its own objects), so that
  // a Name the session authenticated is not read again, from whatever the
  // TPM holds under the handle by then, because another client came between.
  std::map<uint32_t, Bytes> take_object_names();
  void put_object_names(std::map<uint32_t, Bytes> names);
  // The caller's commands given to exchange() so far (a resend not counted).
  uint64_t commands() const { return commands_; }
  // Which of them (from 1) was the last the wrapper's session went on; 0
  // when none.
  uint64_t last_wrapped_command() const { return last_wrapped_; }

  // Strict mode: a command whose secret would cross the bus in clear (a
  // password left in a password entry or in a PolicyPassword session's HMAC
  // field, or a secret first parameter no session encrypts:
  // wrap/caller_frame.h, secret_in_clear) is refused
  // before a byte of it is sent: wrap() and exchange() return kUnsupported
  // with ErrorReason::kSecretInClear naming the command. Off by default:
  // such a command then goes out as described above, counted.
  void set_strict(bool strict) { strict_ = strict; }

  // The caller's re-signable sessions (above) are kept in `cache` (which
  // must outlive the wrapper) beyond this process: a session a program
  // started in one process (tpm2_startauthsession) is re-signed, and its
  // commands' parameters encrypted, in the next one that loads it. What is
  // kept is what crossed the bus (its handle, authHash, last nonceTPM); a
  // kept nonce that is stale only fails the caller's HMAC check, and the
  // command is then audited, not re-signed.
  void keep_caller_sessions_in(SessionCache* cache) { kept_sessions_ = cache; }

  // Why the command last given to wrap() or exchange() went out with a
  // secret in clear; empty `what` when it did not (or was refused).
  const ClearNote& last_clear() const { return last_clear_; }

  // Per command code, since construction.
  const std::map<uint32_t, WrapCounts>& counts() const { return counts_; }
  // counts() as text, one line per command code:
  //   "PCR_Extend 0x00000182 wrapped=3 encrypted=0 passed=0 passwords=3 clear-passwords=0"
  std::string counts_report() const;
  // The session's handle, 0 while none is started (tests).
  uint32_t session_handle() const;
  // Sessions started so far (tests: re-establishment).
  uint64_t sessions_started() const { return sessions_started_; }
  // Times the TPM answered that the wrapper's own session is not there (a
  // TPM reset took it; an interposer flushed it): a server resolves its
  // anchor again then. A caller cannot cause it (it cannot name that session).
  uint64_t sessions_lost() const { return sessions_lost_; }

 private:
  // src/wrap/wrap_state.h.
  struct Pending;
  struct Outgoing;
  Status ensure_session();
  Status ensure_cipher_checked();
  // Session slots (above; src/wrap/session_room.cc).
  Status load_session();
  Status make_room();
  void restore_room();
  void save_session_for_room();
  void retire_session(bool may_exist);
  Error strict_refusal(const CommandInfo& info, std::string_view why);

  // wrap()'s steps (src/wrap/wrap_command.cc).
  enum class PassedBecause { kNoSession, kUnknown, kUnreadable, kNoSlot, kOwnHandles };
  Result<Bytes> pass_through(ByteView command, std::unique_ptr<Pending> p, PassedBecause why);
  void note_caller_frame(Pending& p, const Outgoing& out);
  // Where the wrapper's session goes and what it encrypts; false when the
  // command must go out as the caller gave it.
  bool plan_protection(Pending& p, Outgoing& out);
  Result<Bytes> sign_frame(Pending& p, const Outgoing& out);
  void count_wrapped(Pending& p, const Outgoing& out);

  // unwrap()'s steps (src/wrap/unwrap_response.cc).
  Result<Bytes> unwrap_checked(ByteView response);
  Result<Bytes> unwrap_passed(const Pending& p, ByteView response, uint32_t code);
  Result<Bytes> unwrap_error(const Pending& p, ByteView response, uint32_t code);
  // The wrapper's entry verified, and the parameters decrypted.
  Result<SecretBytes> verify_response(const Pending& p, const ResponseAreas& areas);
  void hide_own_session(const Pending& p, SecretBytes& parameters);
  void note_response_handles(const Pending& p, ByteView response);
  // Names of object contexts the caller saved (context_names.cc).
  void note_context_command(Pending& p, uint32_t code, const std::vector<uint32_t>& handles, ByteView parameters);
  void note_saved_context(const Pending& p, ByteView response);
  void name_loaded_context(const Pending& p, uint32_t handle);

  // The name cache (src/wrap/name_cache.cc).
  Result<Bytes> name_of(uint32_t handle);
  // The Names of a command's handles, or the refusal that stops it.
  Result<std::vector<NamedHandle>> names_of(const std::vector<uint32_t>& handles, const CommandInfo& info);
  Error refusal_for_name(const Error& e, size_t index, uint32_t handle, const CommandInfo& info);
  // The cached Names a command makes stale (EvictControl, NV undefines and
  // writes; wrap.h above), forgotten before it goes out.
  void forget_names_changed_by(uint32_t code, const std::vector<uint32_t>& handles, ByteView params);
  // After a TPM Reset or Restart (Startup: the NV locks are cleared), a Clear
  // or a ChangePPS / ChangeEPS.
  void forget_nv_and_persistent_names();
  // The Name an authenticated response establishes.
  void note_names_in_response(const Pending& p, const ResponseAreas& areas, ByteView parameters);

  // The caller's re-signable sessions (above; src/wrap/caller_sessions.cc).
  class CallerNonce;
  // Whether the caller's entry for `handle` verifies; an error only when the
  // kept record of it may not be trusted (host_state.h).
  Result<bool> caller_entry_verifies(uint32_t handle, uint8_t attributes, ByteView nonce, ByteView raw,
                                     const AuthorizeInput& in);
  // Tracked here, or kept by an earlier process (keep_caller_sessions_in);
  // null when neither; an error when the kept record may not be trusted.
  Result<HmacSession*> caller_session(uint32_t handle);
  void track_caller_session(uint32_t handle, uint16_t auth_hash, ByteView nonce_tpm);
  void keep_caller_session(uint32_t handle);
  void forget_caller_session(uint32_t handle);
  Result<Bytes> resign_caller_entry(uint32_t handle, ByteView nonce, const AuthorizeInput& in);
  // The caller's sessions in the frame that the wrapper can re-sign.
  Status track_caller_entries(Pending& p, Outgoing& out);
  // Their entries re-signed over the parameters as sent (per slot; empty:
  // the caller's entry as it is).
  Result<std::vector<Bytes>> resign_caller_entries(Pending& p, const Outgoing& out, ByteView parameters);
  // The TPM's entries for them checked, and re-signed over the response the
  // caller gets (per slot; empty: the TPM's entry as it is).
  Result<std::vector<Bytes>> check_caller_responses(const Pending& p, const ResponseAreas& areas, ByteView parameters);
  // A caller's unsalted, unbound session this response started.
  void note_started_session(const Pending& p, const ResponseAreas& areas, ByteView parameters);
  // A policy command naming one of the caller's sessions: one that binds the
  // command's parameters as sent (a cpHash or pHash) ends its re-signing;
  // PolicyAuthValue and PolicyRestart noted for its response key.
  void note_policy_command(Pending& p, ByteView command);
  // Whether a caller's session's HMACs include the authorized entity's
  // authValue: always for an HMAC session; for a policy session only after
  // PolicyAuthValue (Part 3 PolicyAuthValue: isAuthValueNeeded; the reference
  // code's ComputeResponseHMAC, SessionProcess.c), when the wrapper saw its
  // whole policy.
  bool includes_auth_value(uint32_t handle) const;

  // PolicyPassword (src/wrap/policy_password.cc). A caller's policy session
  // the wrapper saw start and tracks: its PolicyPassword goes out as
  // PolicyAuthValue (both extend policyDigest with TPM_CC_PolicyAuthValue,
  // Part 3 TPM2_PolicyAuthValue, TPM2_PolicyPassword), and every command
  // the caller sends with the password in its HMAC field goes out with the
  // HMAC that password keys; the caller gets the TPM's answer with an empty
  // HMAC, as a PolicyPassword session's (the reference code's
  // ComputeResponseHMAC, SessionProcess.c). Another policy session's
  // password crosses in clear (counted; strict refuses it).
  enum class PolicyPasswordMode : uint8_t {
    kResigned,  // the TPM holds PolicyAuthValue: the wrapper re-signs
    kInClear,   // the TPM holds PolicyPassword: the password crosses in clear
    kLost,      // re-signed, but the wrapper lost the session's nonces
  };
  // `command` (a PolicyPassword) as PolicyAuthValue; empty when it goes out
  // as it is.
  Bytes policy_password_as_auth_value(ByteView command);
  // A PolicyPassword, PolicyAuthValue or PolicyRestart: its session's mode
  // once the TPM accepted it; a policy session that authorized a command
  // leaves the mode (its policy starts again).
  void note_policy_password(Pending& p, ByteView command, bool as_auth_value);
  void apply_policy_password(const Pending& p);
  // The caller's entry in `slot` when its session is in PolicyPassword mode
  // (true: handled here); an error when it cannot be sent (kLost).
  Result<bool> track_policy_password(Pending& p, const Outgoing& out, size_t slot);
  // The caller's response entry for a re-signed PolicyPassword slot.
  Result<Bytes> policy_password_response(const AuthEntry& tpm_entry) const;
  // The password of a slot whose PolicyPassword the wrapper re-signs; null
  // for any other slot.
  const SecretBytes* policy_password_of(const Pending& p, size_t slot) const;
  // A frame going out as the caller gave it: refused when it names a
  // re-signed PolicyPassword session (the TPM would count an authorization
  // failure), or under strict one whose password would cross in clear.
  Status check_passed_policy_passwords(Pending& p, const CommandAreas& areas);
  // last_clear() for a command going out.
  void note_clear(const Pending& p, const Outgoing* out, std::string what);

  SessionFactory* factory_;
  std::unique_ptr<CallerNonce> caller_nonce_;
  std::map<uint32_t, std::unique_ptr<HmacSession>> caller_sessions_;
  // The caller's policy sessions started through this wrapper: whether
  // PolicyAuthValue put the authValue in their HMACs.
  std::map<uint32_t, bool> policy_auth_value_;
  std::map<uint32_t, PolicyPasswordMode> policy_passwords_;
  ClearNote last_clear_;
  SessionCache* kept_sessions_ = nullptr;
  std::unique_ptr<HmacSession> session_;
  std::map<uint32_t, Bytes> names_;  // authenticated Names of objects and NV indices
  // The authenticated Name of the object a context the caller saved holds,
  // by the context's SHA-256 (oldest first, bounded).
  std::map<Bytes, Bytes> context_names_;
  std::deque<Bytes> context_order_;
  std::unique_ptr<Pending> pending_;
  std::map<uint32_t, WrapCounts> counts_;
  uint64_t sessions_started_ = 0;
  uint64_t sessions_lost_ = 0;
  bool cipher_checked_ = false;  // the session's cipher was proven (SessionFactory::check_cipher)
  bool session_lost_ = false;    // the last response's error named the session as gone
  // Session slots: the wrapper's session while saved; a caller's session
  // saved for the current command only; the sessions that command uses.
  std::optional<Context> saved_;
  std::optional<Context> evicted_;
  std::vector<uint32_t> busy_;
  // Sessions the caller started or loaded through this wrapper (the only
  // ones it saves to make room: never another client's).
  std::set<uint32_t> callers_loaded_;
  bool need_room_ = false;  // the last try was refused TPM_RC_SESSION_MEMORY
  bool strict_ = false;
  uint64_t commands_ = 0;
  uint64_t last_wrapped_ = 0;
  std::optional<uint64_t> end_with_;
};

}  // namespace tpmsec

#endif  // TPMSEC_WRAP_H_
