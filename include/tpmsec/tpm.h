// Tpm: the command pipeline. One function, execute(), turns a command's
// handles, parameters and sessions into bytes on the wire and a response
// back into authenticated parameters (Part 1 §18-19); run<C>() wraps it for
// the declarative definitions of commands.h and keeps the handle ledger
// (handle_ledger.h): which transient objects and sessions this Tpm created
// and may flush.
#ifndef TPMSEC_TPM_H_
#define TPMSEC_TPM_H_

#include <array>
#include <functional>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <vector>

#include "tpmsec/command.h"
#include "tpmsec/commands.h"
#include "tpmsec/handle_ledger.h"
#include "tpmsec/response_code.h"
#include "tpmsec/session.h"
#include "tpmsec/structures.h"
#include "tpmsec/transport.h"

namespace tpmsec {

// A response whose sessions verified: handles and (decrypted) parameters.
struct RawResponse {
  std::vector<uint32_t> handles;
  Bytes parameters;
};

// The data bytes of the TPM2B at the start of a parameter area (what
// parameter encryption covers, Part 1 §21), bounded by the area; kParse when
// the area is shorter than its size says.
Result<MutableByteView> first_parameter_data(MutableByteView params, std::string_view what);

// An error for a TPM response code: kind kTpm, "TPM error TPM_RC_X (...) from CMD".
Error tpm_error(uint32_t code, std::string_view command);

// TPM_RC_HANDLE or TPM_RC_VALUE from a FlushContext: the TPM does not have
// the handle (already gone: it counts as flushed).
bool handle_gone(const Error& e);

class Tpm {
 public:
  explicit Tpm(Transport& transport) : transport_(&transport) {}

  // Sends one command. `auths` lists the sessions: the first info.auth_count
  // authorize the handles in order; any after them are audit or encryption
  // sessions. Retries TPM_RC_RETRY/YIELDED/TESTING with back-off, but only
  // for commands marked retry_safe (see command.h). Response handles are
  // returned as they came: only run<C>() adopts them into the ledger.
  Result<RawResponse> execute(const CommandInfo& info, std::span<const NamedHandle* const> handles, Bytes parameters,
                              std::span<const Auth> auths);

  // A creating command (CommandInfo::creates_handle) first takes the baseline
  // if it is due; its response handle is adopted only once the whole
  // response parsed and passed the ledger's checks. When it fails, it may
  // still have run and left a handle nobody received: it sweeps (no extra
  // command on success). A FlushContext that succeeded ends the ledger's
  // ownership of its handle.
  template <class C>
  Result<typename C::Response> run(const C& command, std::span<const Auth> auths = {}) {
    static_assert(!C::kInfo.creates_handle || C::kInfo.response_handle_count == 1);
    HeldNotice notice(*this);  // on every path out
    Writer params;
    marshal_all(params, command.params());
    // A parameter that does not fit fails the command before anything is sent.
    if (!params.ok()) return params.status().error().with_context(std::string(C::kInfo.name) + " parameters");
    auto handles = std::apply([](const auto&... h) { return std::array<const NamedHandle*, sizeof...(h)>{&h...}; },
                              command.handles());
    static_assert(handles.size() == C::kInfo.handle_count, "handles() disagrees with kInfo");
    if constexpr (C::kInfo.creates_handle) TPMSEC_RETURN_IF_ERROR(before_creating());
    auto executed = execute(C::kInfo, handles, *params.finish(), auths);
    if (!executed.ok()) return after_failure(C::kInfo, created_by(command), executed.error());
    RawResponse raw = std::move(*executed);
    typename C::Response response;
    auto response_handles = response.handles();
    static_assert(std::tuple_size_v<decltype(response_handles)> == C::kInfo.response_handle_count);
    size_t i = 0;
    std::apply([&](auto&... h) { ((h = raw.handles[i++]), ...); }, response_handles);
    Reader r(raw.parameters);
    unmarshal_all(r, response.params());
    r.expect_end(C::kInfo.name);
    if (!r.ok()) {
      return after_failure(C::kInfo, created_by(command),
                           r.status().error().with_context(std::string(C::kInfo.name) + " response"));
    }
    if constexpr (C::kInfo.creates_handle) {
      Status adopted = ledger_.adopt(C::kInfo.name, command.created(), raw.handles[0]);
      if (!adopted.ok()) return after_failure(C::kInfo, command.created(), adopted.error());
    }
    if constexpr (std::is_same_v<C, cmd::FlushContext>) ledger_.forget(command.flush_handle);
    if constexpr (std::is_same_v<C, cmd::ContextSave>) ledger_.note_saved(command.save_handle.handle, true);
    if constexpr (std::is_same_v<C, cmd::ContextLoad>) {
      if (uint32_t session = command.created().reloads) ledger_.note_saved(session, false);
    }
    return response;
  }
  template <class C>
  Result<typename C::Response> run(const C& command, std::initializer_list<Auth> auths) {
    return run(command, std::span<const Auth>(auths.begin(), auths.size()));
  }

  Transport& transport() { return *transport_; }
  const Transport& transport() const { return *transport_; }

  // --- The handle ledger (handle_ledger.h) ---
  const HandleLedger& ledger() const { return ledger_; }
  // A handle another client of this connection created or flushed (the
  // program a CommandWrapper serves, wrap.h): the ledger never flushes it.
  void note_foreign(uint32_t handle) { ledger_.add_foreign(handle); }
  void foreign_flushed(uint32_t handle) { ledger_.foreign_gone(handle); }
  // FlushContext of a handle this Tpm owns; a handle it does not own is not
  // its to flush, and nothing is sent. Ownership ends either way. When the
  // flush does not clearly succeed, a sweep follows: TPM_RC_HANDLE/VALUE
  // (already gone: a reset, or the response that named it was forged and the
  // real handle is elsewhere) counts as flushed; another error is returned.
  Status flush(uint32_t handle);
  // The TPM ended the handle itself, as an authenticated response said (a
  // session used without continueSession): ownership ends, nothing is sent.
  // Also for a handle the caller flushes itself later, with flush_forgotten().
  void forget(uint32_t handle) {
    ledger_.forget(handle);
    note_held();
  }
  // FlushContext of a handle this Tpm owned and forget() let go of before it
  // was flushed; as flush(), a sweep of its kind follows when the flush does
  // not clearly succeed, and TPM_RC_HANDLE/VALUE counts as flushed.
  Status flush_forgotten(uint32_t handle);
  // Flushes the strays when a sweep is pending (see handle_ledger.h); a no-op
  // otherwise. Failed creations and flushes run it themselves; call it to
  // retry one that could not complete (the TPM was unreachable).
  Status sweep();
  // The transient objects (0x80…), loaded sessions (0x02…) or saved sessions
  // (0x03…) the TPM lists, from GetCapability(TPM_CAP_HANDLES) with `auths`
  // (an audit session makes the listing authenticated). Only tracked handle
  // types are returned.
  Result<std::vector<uint32_t>> list_handles(uint32_t first, std::span<const Auth> auths = {});

  // --- What this Tpm holds, for whoever must know it outlives a crash ---
  // `watch` is called with ledger().held() whenever that changes: after a
  // command this Tpm sent created, flushed, saved or loaded back one of its
  // handles, after forget() and after sweep(); and now, if it holds any. Called from
  // within the command that changed it (the TCTI's records of its own
  // handles, held_handles.h). One watcher; an empty function removes it.
  using HeldWatch = std::function<void(const std::vector<HeldHandle>&)>;
  void watch_held(HeldWatch watch);

 private:
  // Tells the watcher when ledger().held() changed since it was last told.
  void note_held();
  struct HeldNotice {
    explicit HeldNotice(Tpm& tpm) : tpm(&tpm) {}
    ~HeldNotice() { tpm->note_held(); }
    HeldNotice(const HeldNotice&) = delete;
    HeldNotice& operator=(const HeldNotice&) = delete;
    Tpm* tpm;
  };

  // Before a creating command: a pending sweep, then the baseline once
  // (unless in_process() or private_handles()).
  Status before_creating();
  // A failure of `info`: unless it was refused before sending (kUsage), a
  // creating command may have left a handle of created.type nobody owns, so
  // it sweeps strays of that kind. Returns `error`.
  Error after_failure(const CommandInfo& info, const CreatedHandle& created, Error error);
  template <class C>
  static CreatedHandle created_by(const C& command) {
    if constexpr (C::kInfo.creates_handle) {
      return command.created();
    } else {
      return {};
    }
  }
  // The parts of a sweep; each removes from `job` what it finished.
  Status sweep_in_process(HandleLedger::Sweep& job);
  Status flush_unflushed(HandleLedger::Sweep& job);
  Status sweep_sessions(HandleLedger::Sweep& job);
  Status sweep_objects(HandleLedger::Sweep& job);
  Result<RawResponse> execute_once(const CommandInfo& info, std::span<const NamedHandle* const> handles,
                                   const Bytes& parameters, std::span<const Auth> auths);

  Transport* transport_;
  HandleLedger ledger_;
  HeldWatch watch_;
  std::vector<HeldHandle> last_held_;  // what the watcher was last told
};

}  // namespace tpmsec

#endif  // TPMSEC_TPM_H_
