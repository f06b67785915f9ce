// The protect path's one entry. A front end (the tpmsec CLI, the tpm2-tss TCTI, a program of its own)
// describes what it wants (which TPM, how its sessions' keys are trusted, which strategy or policy,
// whether to keep what earlier runs learnt) in a ProtectRequest and gets back an open TPM whose protection
// is resolved: the trust anchor, the session factory, the strategy for extends and how its sessions run on
// this chip. Everything that decides lives here, in one order; a TPM string with protection items becomes
// a request with tpm_config.h; what `tpmsec provision` keeps is provision.h.
//
//   ProtectRequest r;
//   r.tpm = "device:/dev/tpmrm0";
//   auto tpm = ProtectedTpm::open(r);            // the kernel's null_name pin, automatically
//   auto stream = (*tpm)->extend_stream({.pcr = 16});
//   (*stream)->extend(digest); (*stream)->finish();
//
// Ownership: open() owns the transport it opened or was given (an in-process TPM, a measured one, is handed
// in already open by the caller that links it) and the Tpm it sends with: the one way in for every front end.
// Not thread-safe: one thread per ProtectedTpm. Errors come back as values; a front end only words them
// (Error::reason() says which advice fits). Links the core, host, bus transports and policy, nothing of
// measurement, emulation or libtpms.
// Why and the order: docs/architecture.md, "The protect path".
#ifndef TPMSEC_PROTECT_H_
#define TPMSEC_PROTECT_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "tpmsec/hmac_session.h"
#include "tpmsec/host_state.h"
#include "tpmsec/policy/policy.h"
#include "tpmsec/result.h"
#include "tpmsec/session_cache.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/strategy.h"
#include "tpmsec/tpm.h"
#include "tpmsec/tpm_info.h"
#include "tpmsec/transport.h"

namespace tpmsec {

// How the key a session's secret is salted to (or the secret it is bound to)
// is trusted (docs/threat-model.md "Anchors"). Resolved in this order:
//   0. a tpmsec server (serve:, TpmKind::kServe): the server is the anchor.
//      It resolved its own anchor and puts its salted session on every
//      command; this process starts none (ProtectedTpm::served()). Its link
//      is a local Unix socket whose listener the transport checked is root
//      or the server's user (SO_PEERCRED, transports.h open_serve), as
//      trusted as /dev/tpmrm0. An anchor named here (null-name, ek-ca, tofu,
//      unsalted) or a salt is kUsage: it belongs to `tpmsec serve`;
//   1. an anchor named here (NullName, EkCa, Tofu), or Unsalted (Tofu on a
//      device: TPM whose kernel has a pin takes the pin: a pin beats a first
//      use);
//   2. Automatic, on a TPM that outlives the process: what `tpmsec provision`
//      kept for it — a bind secret (sessions bound, not salted), else a pinned
//      persistent salt key (of the kind `salt` asks for, if it asks);
//   3. Automatic, on a device: TPM: the kernel's null_name pin
//      (/sys/class/tpm/tpmN/null_name), when the kernel has one;
//   4. Automatic with ProtectRequest::standing (`tpmsec serve`, a process
//      that owns the TPM for months and must start with no configuration),
//      when 2 and 3 found nothing: the TPM's EK certificate chaining to a
//      root of the shipped bundle (data/ek-roots/), else a persistent salt
//      key pinned at first start (StandingAnchor below);
//   5. nothing: refused on a TPM behind a bus (ErrorReason::kNoTrustAnchor),
//      allowed in_process() (no bus, nobody to interpose).
namespace anchor {
struct Automatic {};
// The null key's pinned name: 68 hex digits, or a file in the kernel's format.
struct NullName {
  std::string value;
};
// The TPM's endorsement key, proven by its EK certificate chaining to a root
// CA of this bundle (a PEM file or a directory); pinned per TPM string on its
// first verified use, and tied to the kernel's pin on a device: TPM.
struct EkCa {
  std::string bundle;
};
// The null key seen first this boot, kept in the state directory.
struct Tofu {};
// No salt: authenticates, protects nothing against an interposer who saw the
// session start (measurement only). Says so through the notice.
struct Unsalted {};
}  // namespace anchor
using Anchor = std::variant<anchor::Automatic, anchor::NullName, anchor::EkCa, anchor::Tofu, anchor::Unsalted>;

// Step 4 of the order above, tried in this order:
//   b. the EK certificate (ECC first, then RSA) verified against the PEM
//      files (*.pem) of `ek_roots`, with intermediates taken only from
//      `ek_intermediates` (a directory the administrator filled, looked up
//      by the last path segment of the certificate's AIA caIssuers URLs; no
//      network). No certificate, or one that does not chain, goes on to c —
//      unless an EK was pinned for this TPM by an earlier start: then the
//      failure is the error (what held once is not traded for less);
//   c. the key at `salt_key_handle` (systemd-tpm2-setup's SRK where it is
//      there, adopted), else one made there (recorded as created, so that
//      forgetting the state evicts it and only it): trust on first start,
//      pinned in the state directory as `tpmsec provision --salt-key` pins,
//      so later starts take it at step 2 and check it is still the key at
//      that handle (kIntegrity when it was swapped or evicted).
struct StandingAnchor {
  std::string ek_roots;
  std::string ek_intermediates;
  uint32_t salt_key_handle = kDefaultSaltKeyHandle;
};

// One line the library wants a person to see (a warning, a first-use pin, the
// rule that decided). Without one, lines go to stderr prefixed "tpmsec: ".
using Notice = std::function<void(std::string_view line)>;

struct ProtectRequest {
  // A TPM string (transport.h), its protection items already split off
  // (tpm_config.h: request_of()); empty: the host's TPM (chosen_tpm()).
  std::string tpm;
  Anchor anchor;
  // Unset: ECC unless the TPM lacks P-256 (then RSA). ECC on a TPM without
  // P-256 is ErrorReason::kUnsupportedSalt.
  std::optional<SaltKind> salt;
  // Automatic may use what `tpmsec provision` kept. Off for what is about the
  // salt key itself (provisioning it, printing the null key).
  bool use_provisioned = true;
  // The strategy for extends: set, the operator's; unset, the policy decides
  // under its floor (policy.h).
  std::optional<StrategyKind> strategy;
  // The policy file; empty: $TPMSEC_POLICY, else the shipped one.
  std::string policy;
  // Use and update what earlier processes kept for this TPM (session_cache.h):
  // its capabilities, its null key. Only for a TPM that outlives the process.
  bool keep = false;
  // Notices also say which policy rule decided and the facts it rests on.
  bool verbose = false;
  Notice notice;
  // For a front end whose process may be killed while its handles are
  // loaded (the TCTI): before anything is sent, flush what such a front
  // end's dead processes left on this TPM, and record what this one holds
  // while the ProtectedTpm lives (held_handles.h). open() only; a TPM in
  // process keeps no record, one with private_handles() only drops stale
  // ones. A failure is a notice, never an error.
  bool track_handles = false;
  // Step 4 of the anchor order (StandingAnchor): for `tpmsec serve`.
  std::optional<StandingAnchor> standing;
  // Where pins, kept state and provisioned secrets are read and kept, and
  // how the host is asked for its boot id, the kernel's pin and the files
  // the request names (host_state.h). None: the state directory
  // (FileHostState, file_host_state.h: $TPMSEC_STATE_DIR, ...).
  std::shared_ptr<HostState> host;
};

// The strategy for extends on this TPM and how its sessions run there.
struct ExtendPlan {
  StrategyKind strategy = StrategyKind::kPerCommand;
  SessionTuning tuning;
};

class AuditedPcrReads;

// What a front end that opened the transport itself knows of the TPM behind
// it (ProtectedTpm::open(request, transport, options)).
struct ProtectOptions {
  // The facts the policy is matched against when the TPM plays another chip
  // (the CLI's --emulate: the profile's identity and figures, each with its
  // origin). Unset: the TPM's own identity as read (facts_of(), policy.h).
  std::optional<TpmFacts> facts;
};

// Properties of the TPM timed elsewhere (a `tpmsec bench --json` result), for
// policy rules that test them: unauthenticated, whatever bus they ran on.
struct MeasuredFacts {
  std::map<std::string, double> properties;
  std::string source;  // "bench result r.json"
};

// The policy decision for this TPM with everything it rests on
// (ProtectedTpm::policy_view(), what `tpmsec policy show` prints).
struct PolicyView {
  Policy policy;
  TpmFacts facts;
  PolicyDecision decision;  // its rule and verdicts point into `policy`
};

// An open TPM with its protection resolved. Owns the transport it opened (or
// was handed) and every TPM handle it creates.
class ProtectedTpm {
 public:
  // Opens request.tpm (device:, swtpm:, mssim:; an embedded: TPM string is
  // kUsage here: open it with the caller's transport) and resolves the anchor.
  static Result<std::unique_ptr<ProtectedTpm>> open(const ProtectRequest& request);
  // The same over a transport the caller opened (open_transport(): any
  // kind, in-process too, or a decorator over one such as the CLI's measured
  // stack, which a front end keeps a pointer to and reads afterwards).
  static Result<std::unique_ptr<ProtectedTpm>> open(const ProtectRequest& request, std::unique_ptr<Transport> transport,
                                                    ProtectOptions options = {});
  ~ProtectedTpm();
  ProtectedTpm(const ProtectedTpm&) = delete;
  ProtectedTpm& operator=(const ProtectedTpm&) = delete;

  Tpm& tpm() { return *tpm_; }
  const TpmInfo& info() const { return info_; }
  // The transport it was opened over: spec() is the TPM string's, a
  // decorator's too; a decorator's describe() may add to it (" emulating P").
  Transport& transport() { return *base_; }
  // The resolved anchor and salt, for sessions with `symmetric` parameter
  // encryption.
  ProtectionConfig protection(SymDef symmetric = SymDef::aes128_cfb()) const;
  // True when a trust anchor was resolved (or none is needed in_process(),
  // or the TPM is served()).
  bool anchored() const;
  // True when the TPM is a tpmsec server (serve:): the server puts its own
  // salted, anchored session on every command (anchor 0 above), so this
  // process starts none. factory() and audited_pcr_reads() are then kUsage,
  // plan_extends() is plain, and a front end sends its commands with no
  // session (or a password, which the server turns into an HMAC).
  bool served() const;

  // A session factory: its null key created (or kept one loaded) and held to
  // the anchor; kNoTrustAnchor on a bus with none.
  Result<std::unique_ptr<SessionFactory>> factory(SymDef symmetric = SymDef::aes128_cfb());
  // The same, its sessions run as `tuning` says (session_tuning()).
  Result<std::unique_ptr<SessionFactory>> factory(const SessionTuning& tuning, SymDef symmetric = SymDef::aes128_cfb());
  // How sessions run on this chip (the null key reloaded or recreated, ...):
  // the policy's tuning for the TPM's plain identity, with no TPM command —
  // a tuning never lowers protection, so it needs no audited read. The
  // defaults when the shipped policy cannot be read; an error when the
  // request's own policy file cannot.
  Result<SessionTuning> session_tuning();
  // A long-lived front end's sessions (the TCTI's, serve's): the factory on
  // the policy's tuning (session_tuning(), factory()), what it learnt kept
  // for the next process (keep()). One sequence, so the front ends cannot
  // drift apart.
  struct Sessions {
    SessionTuning tuning;
    std::unique_ptr<SessionFactory> factory;
  };
  Result<Sessions> open_sessions();
  // What the sessions' key rests on, for a person: "kernel null_name
  // (/sys/...)", "EK certificate (ECC P-256) chaining to CN=... of DIR",
  // "persistent salt key 0x81000001 ... pinned at first start" ...
  const std::string& anchor_description() const { return anchor_description_; }
  // The policy rule that decides for this TPM: "policy FILE rule 'NAME'
  // (line N)", or why there is none. No TPM command.
  std::string policy_rule();
  // Resolves the anchor again as open() did (the kernel's null_name read
  // afresh, a pinned salt key checked again): after a TPM reset. The
  // factories made before keep the old configuration.
  Status reanchor();

  // For work that opens no session: an anchor the request named is checked
  // anyway (one CreatePrimary of the null key), never ignored.
  Status check_named_anchor();

  // The strategy for extends (the request's, else the policy's decision on
  // this TPM, reading its identity through an audited session where a
  // decision would lower protection) and its tuning. Notices say what a weak
  // strategy gives up and which rule the floor overruled.
  Result<ExtendPlan> plan_extends();
  // An extend stream under `plan` (plan_extends()), with the resolved
  // protection and the plan's tuning in `options` (options.protection and
  // null_key_load are filled in here).
  Result<std::unique_ptr<ExtendStream>> extend_stream(const ExtendPlan& plan, StreamOptions options);

  // The policy's decision for this TPM, every rule's verdict and the facts
  // matched (`measured` added to them), decided as plan_extends() decides:
  // a named anchor (not Automatic, not Unsalted) has the identity read
  // through a session salted to it even where the decision would not need it.
  Result<std::unique_ptr<PolicyView>> policy_view(const MeasuredFacts* measured = nullptr);

  // PCR reads authenticated by one audit session salted (or bound) to the
  // anchor (`pcr read --protect audit`, `verify --tpm`): an interposer can
  // neither fake a value nor rewrite one unnoticed.
  Result<std::unique_ptr<AuditedPcrReads>> audited_pcr_reads();

  // Keeps what `factory` learnt (its null key) for the next process, when
  // the request asked to keep; a failure is a notice, never an error.
  void keep(const SessionFactory* factory);
  // keep() again only when the factory's null key changed since (the TPM
  // refused the kept context and the key was recreated): cheap enough to
  // call after every command of a long-lived front end (the TCTI).
  void keep_if_changed(const SessionFactory* factory);
  // Forgets what was kept of this boot (after a forged identity).
  void forget_kept();
  // For a front end that protects another program's commands (the TCTI):
  // the command count it kept the last time the program this process runs
  // used this TPM in this boot (session_cache.h; the TCTI keeps which
  // command was the last its session went on), when the request keeps; none
  // when not known; kRuntime when the kept count may not be trusted
  // (host_state.h). commands_kept() keeps `count` for the next run, once
  // commands_last_run() has named the program; a failure is a notice.
  // Neither needs the TPM, and commands_kept() no OpenSSL: it may run from
  // an exit handler.
  Result<std::optional<uint64_t>> commands_last_run();
  void commands_kept(uint64_t count);
  // What is kept of this TPM between processes (request.keep); null when
  // nothing is (an in-process TPM). Lives as long as this ProtectedTpm.
  SessionCache* session_cache() { return cache_ ? &*cache_ : nullptr; }
  // Who this TPM is to what is kept of it (tpm_id.h), and where that is kept
  // (the request's host state): for the operations on what is kept
  // (provision.h).
  TpmId id() const;
  HostState& host() const { return *request_.host; }

 private:
  ProtectedTpm() = default;
  Status resolve(const ProtectRequest& request);
  // Step 4 and the checks of a standing anchor (standing_anchor.cc).
  Status stand();
  Status stand_on_ek_roots(bool* stood);
  Status stand_on_first_start_key();
  Status check_standing_salt_key();
  void describe_anchor();
  // ProtectRequest::track_handles.
  void track_handles();
  void say(std::string_view line) const;
  // protection(symmetric) as `tuning` runs its sessions.
  ProtectionConfig tuned(const SessionTuning& tuning, SymDef symmetric = SymDef::aes128_cfb()) const;

  std::unique_ptr<Transport> base_;
  std::unique_ptr<Tpm> tpm_;
  TpmInfo info_;
  TpmFacts facts_;
  ProtectRequest request_;
  std::optional<SessionCache> cache_;
  ProtectionConfig config_;        // resolved; symmetric set per use
  bool kept_changed_key_ = false;  // keep_if_changed() kept a recreated key
  std::string anchor_description_;
  bool standing_first_start_ = false;  // stand() pinned a salt key in this run
  std::string standing_ek_root_;       // stand() took the EK: what it rests on
  std::optional<ProgramId> program_;   // the running program, once commands_last_run() read it
};

// ProtectedTpm::audited_pcr_reads(): one audit session, continued across reads.
class AuditedPcrReads {
 public:
  // PCR_Read of one PCR, its response authenticated by the session.
  Result<Bytes> read(uint16_t bank, uint32_t index);

 private:
  friend class ProtectedTpm;
  AuditedPcrReads() = default;
  Tpm* tpm_ = nullptr;
  std::unique_ptr<SessionFactory> factory_;  // outlives the session it started
  std::unique_ptr<HmacSession> session_;
};

// The resolution ProtectedTpm makes (and tests of its order): the anchor of
// `request` for the TPM behind `transport` (the real one: its describe() keys
// the pins, its spec() says whether it is a device), as the configuration of
// sessions with `symmetric` parameter encryption.
Result<ProtectionConfig> resolve_protection(const ProtectRequest& request, const Transport& transport,
                                            const TpmInfo& info, SymDef symmetric = SymDef::aes128_cfb());

// What a process keeps for the TPM behind `base` (session_cache.h) in `host`
// (none: the state directory's), when `keep` and the TPM outlives the
// process and the host names its boot; else none.
std::optional<SessionCache> session_cache_for(const Transport& base, bool keep,
                                              std::shared_ptr<HostState> host = nullptr);

// The name of an anchor kind ("null-name", "ek-ca", "tofu", ...), for errors
// naming the item a server's client must not give.
std::string_view anchor_name(const Anchor& anchor);

// The host state `request` names, else the state directory's (FileHostState).
std::shared_ptr<HostState> host_state_of(const ProtectRequest& request);

// The policy a command follows: `path` (--policy) when given, else
// $TPMSEC_POLICY, else the shipped default (tpmsec/host/policy_path.h).
// operator_chosen is set for the first two.
Result<Policy> load_command_policy(const std::string& path);

}  // namespace tpmsec

#endif  // TPMSEC_PROTECT_H_
