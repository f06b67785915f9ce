// CommandWrapper's session slots (wrap.h, "Session slots"): room for the
// wrapper's session on a TPM whose three loaded-session slots the caller
// fills, by context-saving sessions between commands as the kernel's
// resource manager does for /dev/tpmrm0 (linux drivers/char/tpm/tpm2-space.c,
// tpm2_save_space / tpm2_load_space). A session keeps its handle while saved
// and is loaded back under it (Part 1 §30.2; Part 3 §28.2, §28.3).
#include <fmt/format.h>

#include <algorithm>

#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/response_code.h"
#include "tpmsec/tpm.h"
#include "tpmsec/wrap.h"

namespace tpmsec {
namespace {

bool no_session_memory(const Error& e) { return e.kind() == ErrorKind::kTpm && e.tpm_rc() == rc::kSessionMemory; }

}  // namespace

// The wrapper's session back from its saved context, after saving one of the
// caller's when the TPM has no slot free.
Status CommandWrapper::load_session() {
  if (!saved_ || !session_) return ok_status();
  Status loaded = session_->load(factory_->tpm(), *saved_);
  if (!loaded.ok() && no_session_memory(loaded.error())) {
    TPMSEC_RETURN_IF_ERROR(make_room());
    loaded = session_->load(factory_->tpm(), *saved_);
  }
  if (!loaded.ok()) {
    // Gone (a TPM reset, the caller flushed every saved session) or refused:
    // the next start makes a new one. FlushContext works on a saved session.
    retire_session(/*may_exist=*/true);
    if (loaded.error().kind() == ErrorKind::kTpm && !no_session_memory(loaded.error())) ++sessions_lost_;
    return loaded.error().kind() == ErrorKind::kTpm ? ok_status() : loaded;
  }
  saved_.reset();
  return ok_status();
}

// Saves one loaded session of the caller's that the command at hand does not
// use; restore_room() loads it back after the command.
Status CommandWrapper::make_room() {
  if (evicted_) return ok_status();
  Tpm& tpm = factory_->tpm();
  // Unauthenticated, as every listing before a session exists: a lie makes a
  // ContextSave fail (the command then fails closed), nothing more.
  TPMSEC_ASSIGN_OR_RETURN(std::vector<uint32_t> loaded, tpm.list_handles(ht::kFirstHmacSession));
  uint32_t ours = session_ && !saved_ ? session_->handle() : 0;
  for (uint32_t h : loaded) {
    if (h == ours || !callers_loaded_.count(h) || std::find(busy_.begin(), busy_.end(), h) != busy_.end()) continue;
    TPMSEC_ASSIGN_OR_RETURN(auto rsp, tpm.run(cmd::ContextSave{NamedHandle::of(h)}));
    evicted_ = std::move(rsp.context);
    return ok_status();
  }
  return runtime_error(
      "the TPM's session slots are full and none holds a session of this program the command does not "
      "use (tpm2_getcap handles-loaded-session lists them; tpm2_flushcontext -l flushes those left "
      "behind)");
}

// After the command: the wrapper's session saved and the caller's loaded back.
void CommandWrapper::restore_room() {
  need_room_ = false;
  if (!evicted_) return;
  if (session_ && !saved_) save_session_for_room();
  Context context = std::move(*evicted_);
  evicted_.reset();
  // Best effort: on failure the caller's next use of the handle is answered
  // by the TPM (TPM_RC_REFERENCE), as after any lost session.
  (void)factory_->tpm().run(cmd::ContextLoad{std::move(context)});
}

void CommandWrapper::save_session_for_room() {
  auto context = session_->save(factory_->tpm());
  if (context.ok()) {
    saved_ = std::move(*context);
  } else {
    retire_session(/*may_exist=*/true);
  }
}

}  // namespace tpmsec
