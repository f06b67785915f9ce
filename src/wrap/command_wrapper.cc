// CommandWrapper (wrap.h): its own session's life, exchange() and the
// counts. wrap() and unwrap() are wrap_command.cc and unwrap_response.cc;
// the list of its files is wrap/wrap_state.h.
#include <fmt/format.h>

#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/tpm.h"
#include "tpmsec/wrap.h"
#include "wrap/wrap_state.h"

namespace tpmsec {
namespace wrapping {

std::optional<size_t> session_gone(uint32_t code) {
  constexpr uint32_t kReferenceS0 = 0x918, kReferenceS6 = 0x91E;
  if (code >= kReferenceS0 && code <= kReferenceS6) return code - kReferenceS0;
  if (!(code & 0x080) || (code & 0x040) || !(code & 0x800)) return std::nullopt;
  uint32_t base = rc_base(code);
  if (base != rc::kHandle && base != rc::kValue) return std::nullopt;
  uint32_t number = (code >> 8) & 0x7;
  if (number == 0) return std::nullopt;
  return number - 1;
}

}  // namespace wrapping

CommandWrapper::CommandWrapper(SessionFactory& factory)
    : factory_(&factory), caller_nonce_(std::make_unique<CallerNonce>()) {}

CommandWrapper::~CommandWrapper() { retire_session(/*may_exist=*/true); }

uint32_t CommandWrapper::session_handle() const { return session_ ? session_->handle() : 0; }

Status CommandWrapper::ensure_session() {
  TPMSEC_RETURN_IF_ERROR(load_session());
  if (session_ && session_->usable()) return ok_status();
  retire_session(/*may_exist=*/true);
  // Each command sets the attributes it carries. The check that the TPM
  // uses the cipher asked for waits for the first command that carries
  // parameter encryption (ensure_cipher_checked): a program that never
  // sends a secret (tpm2_pcrextend) does not pay for it.
  auto start = [&] {
    return factory_->start(attr::kContinueSession | attr::kAudit, SessionFactory::CipherCheck::kDeferred);
  };
  auto started = start();
  if (!started.ok() && started.error().tpm_rc() == rc::kSessionMemory) {
    TPMSEC_RETURN_IF_ERROR(make_room());
    started = start();
  }
  TPMSEC_ASSIGN_OR_RETURN(session_, std::move(started));
  cipher_checked_ = false;
  ++sessions_started_;
  return ok_status();
}

Status CommandWrapper::ensure_cipher_checked() {
  if (cipher_checked_) return ok_status();
  if (Status st = factory_->check_cipher(*session_); !st.ok()) {
    // Altered on the bus, or lost: no parameter is encrypted under it.
    retire_session(/*may_exist=*/true);
    return st;
  }
  cipher_checked_ = true;
  return ok_status();
}

void CommandWrapper::use_factory(SessionFactory& factory, bool session_may_exist) {
  retire_session(session_may_exist);
  factory_ = &factory;
}

void CommandWrapper::retire_session(bool may_exist) {
  saved_.reset();
  if (!session_) return;
  if (may_exist) {
    // Only this wrapper's own handle; gone already counts as flushed.
    (void)session_->flush();
  } else {
    session_->abandon();
  }
  session_.reset();
}

Error CommandWrapper::strict_refusal(const CommandInfo& info, std::string_view why) {
  ++counts_[info.code].refused;
  return unsupported_error(fmt::format("strict: {} refused, not sent: {} would cross the bus in clear", info.name, why))
      .with_reason(ErrorReason::kSecretInClear);
}

Result<Bytes> CommandWrapper::unwrap(ByteView response) {
  if (!pending_) return usage_error("a response without a command");
  auto out = unwrap_checked(response);
  pending_.reset();
  restore_room();
  return out;
}

void CommandWrapper::response_lost() {
  if (pending_ && !pending_->passed_through) retire_session(/*may_exist=*/true);
  pending_.reset();
  restore_room();
}

Result<Bytes> CommandWrapper::exchange(Transport& transport, ByteView command) {
  ++commands_;
  for (int attempt = 0;; ++attempt) {
    session_lost_ = false;
    auto wrapped = wrap(command);
    if (!wrapped.ok()) {
      restore_room();
      // Refused with the TPM's own error about one of its handles: the
      // caller's answer, nothing of its command sent (refusal_for_name).
      if (wrapped.error().kind() == ErrorKind::kTpm) return error_frame(wrapped.error().tpm_rc());
      return wrapped.error();
    }
    Bytes frame = std::move(*wrapped);
    const CommandInfo* info = pending_ ? pending_->info : nullptr;
    bool passed = pending_ && pending_->passed_through;
    auto response = transport.transmit(frame);
    if (!response.ok()) {
      response_lost();
      return response.error();
    }
    TPMSEC_ASSIGN_OR_RETURN(Bytes out, unwrap(*response));
    // The TPM refused the command for the wrapper's session alone, before
    // running it (Part 1 §18.6); the code is not authenticated, so only a
    // command that changes nothing is sent again.
    if (session_lost_ && attempt == 0 && info && info->retry_safe) continue;
    // No slot for a caller's new or reloaded session while the wrapper's
    // holds one (session_room.cc): once more after making room.
    HeaderRead answer = read_frame_header(out, out.size());
    if (attempt == 0 && info && (info->code == cc::kStartAuthSession || info->code == cc::kContextLoad) &&
        answer.check != FrameCheck::kIncomplete && answer.header.code == rc::kSessionMemory) {
      if (passed && session_ && !saved_) {
        save_session_for_room();
        continue;
      }
      if (!passed) {
        need_room_ = true;
        continue;
      }
    }
    return out;
  }
}

std::string CommandWrapper::counts_report() const {
  std::string out;
  for (const auto& [code, c] : counts_) {
    const CommandInfo* info = find_command(code);
    out += fmt::format("{} 0x{:08x} wrapped={} encrypted={} passed={} passwords={} clear-passwords={}{}{}\n",
                       info ? info->name : std::string_view("unknown"), code, c.wrapped, c.encrypted, c.passed_through,
                       c.passwords_replaced, c.passwords_left,
                       c.refused ? fmt::format(" refused={}", c.refused) : std::string(),
                       c.secrets_left ? fmt::format(" clear-secrets={}", c.secrets_left) : std::string());
  }
  return out;
}

}  // namespace tpmsec
