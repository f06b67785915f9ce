// CommandWrapper's private state shared by the files that make it up
// (wrap.h): what wrap() leaves for unwrap() (Pending), the caller's frame
// while wrap() works on it (Outgoing), and the caller's nonce its re-signed
// sessions use (CallerNonce).
//   command_wrapper.cc   the wrapper's session, exchange(), counts
//   wrap_command.cc      wrap(): the caller's frame to the frame sent
//   unwrap_response.cc   unwrap(): the TPM's response to the caller's
//   name_cache.cc        authenticated Names of objects and NV indices
//   caller_sessions.cc   the caller's sessions the wrapper re-signs
//   session_room.cc      session slots
//   caller_frame.cc      what is decided from the caller's frame alone
//   policy_password.cc   PolicyPassword sessions re-signed
#ifndef TPMSEC_SRC_WRAP_WRAP_STATE_H_
#define TPMSEC_SRC_WRAP_WRAP_STATE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "tpmsec/bytes.h"
#include "tpmsec/command_frame.h"
#include "tpmsec/crypto.h"
#include "tpmsec/session.h"
#include "tpmsec/wrap.h"
#include "wrap/caller_frame.h"

namespace tpmsec {

// What unwrap() needs of the command wrap() sent.
struct CommandWrapper::Pending {
  uint32_t code = 0;
  const CommandInfo* info = nullptr;
  bool passed_through = true;
  bool caller_sessions = false;  // the caller's tag was TPM_ST_SESSIONS
  bool caller_hmac = false;      // ... and it holds an HMAC or policy session of the caller's
  size_t sent_sessions = 0;      // entries in the frame sent
  size_t our_slot = 0;
  bool replaced_password = false;
  uint8_t password_attributes = 0;  // of the caller's replaced password entry
  bool encrypts_response = false;
  SecretBytes auth_value;
  std::optional<SecretBytes> new_auth_value;
  std::vector<uint32_t> handles;
  uint32_t flushed = 0;  // FlushContext's flushHandle
  // ContextSave of a transient object; ContextLoad's context, hashed
  // (context_names.cc).
  uint32_t saved_object = 0;
  Bytes loaded_context;
  // A session of the caller's encrypts the response's first parameter: it
  // reaches the wrapper as the caller's ciphertext (a Load's Name, a
  // StartAuthSession's nonceTPM). A Load's Name is then the one of the
  // inPublic the wrapper's session covered in the command.
  bool caller_encrypts_response = false;
  Bytes loaded_name;
  // The caller's sessions sent without continueSession: the TPM ends them
  // when the command succeeds (Part 1 §19.6.4), and may reuse their handles.
  std::vector<uint32_t> ending;
  // The caller's re-signable sessions in this command: slot and handle.
  std::vector<std::pair<size_t, uint32_t>> caller_tracked;
  bool resigned = false;
  // A StartAuthSession for an unsalted, unbound HMAC session: its authHash.
  uint16_t unsalted_session_hash = 0;
  // A policy command on a caller's session that decides whether the
  // session's HMACs include an authValue (PolicyAuthValue sets it,
  // PolicyRestart clears it): applied when the TPM accepted it.
  uint32_t policy_session = 0;
  bool policy_auth_value = false;
  // PolicyPassword (policy_password.cc): a PolicyPassword, PolicyAuthValue
  // or PolicyRestart's session and the mode it leaves (none: no longer in
  // PolicyPassword mode), applied when the TPM accepted it; the slots whose
  // password the wrapper turns into an HMAC, with that password; the
  // caller's PolicyPassword entries going out in clear.
  uint32_t password_session = 0;
  std::optional<PolicyPasswordMode> password_mode;
  std::vector<std::pair<size_t, SecretBytes>> policy_passwords;
  size_t clear_policy_passwords = 0;
  // The caller's policy sessions in the session area that continue: their
  // policy starts again when the command succeeds.
  std::vector<uint32_t> policy_sessions_used;
};

// The caller's frame while wrap() turns it into the frame sent.
struct CommandWrapper::Outgoing {
  Outgoing(const CommandInfo& command, CommandAreas areas, wrapping::SlotPlan slot_plan)
      : info(command), frame(std::move(areas)), plan(slot_plan) {}
  Outgoing(const Outgoing&) = delete;
  Outgoing& operator=(const Outgoing&) = delete;

  const CommandInfo& info;
  CommandAreas frame;
  wrapping::SlotPlan plan;
  std::vector<NamedHandle> named;               // the handles with their Names
  std::vector<const NamedHandle*> handle_ptrs;  // into `named`
  bool caller_hmac = false;                     // a caller's session the wrapper cannot re-sign covers the parameters
  bool authorizes = false;                      // the wrapper's session authorizes a handle (a replaced password)
  bool decrypt = false;                         // the wrapper's session encrypts the first command parameter

  void set_names(std::vector<NamedHandle> names) {
    named = std::move(names);
    handle_ptrs.clear();
    for (const NamedHandle& h : named) handle_ptrs.push_back(&h);
  }
  // What a session in `slot` signs over these parameters.
  AuthorizeInput input_for(size_t slot, ByteView parameters, ByteView auth_value) const {
    AuthorizeInput in;
    in.info = &info;
    in.handles = handle_ptrs;
    in.parameters = parameters;
    in.entity = slot < info.auth_count ? &named[slot] : nullptr;
    in.auth_value = auth_value;
    return in;
  }
};

// Gives a caller's session object the caller's own nonceCaller, so that
// HmacSession computes the caller's HMAC as the caller did.
class CommandWrapper::CallerNonce final : public crypto::RandomSource {
 public:
  void set(ByteView nonce) { nonce_.assign(nonce.begin(), nonce.end()); }
  Status fill(MutableByteView out) override {
    if (out.size() != nonce_.size()) return usage_error("the caller's nonce is not the size of nonceTPM");
    std::copy(nonce_.begin(), nonce_.end(), out.begin());
    return ok_status();
  }

 private:
  Bytes nonce_;
};

namespace wrapping {

// The session (0-based) a response code names as gone: TPM_RC_REFERENCE_Sn,
// or TPM_RC_HANDLE / TPM_RC_VALUE with its session bit (Part 2 §6.6.3).
std::optional<size_t> session_gone(uint32_t code);

}  // namespace wrapping
}  // namespace tpmsec

#endif  // TPMSEC_SRC_WRAP_WRAP_STATE_H_
