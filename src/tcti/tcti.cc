// libtss2-tcti-tpmsec.so.0: a tpm2-tss TCTI (tss2_tcti.h, TCTI v2) that
// sends every command of an unchanged program (tpm2-tools, systemd,
// tpm2-openssl) through a CommandWrapper (tpmsec/wrap.h), on a TPM opened
// and anchored by the protect path. This file only parses and calls the
// library: the C ABI, the context's states, the error codes, one stderr
// line for a refused response. No exception crosses it.
//
// The ABI as tpm2-tss's own TCTIs implement it (tpm2-software/tpm2-tss,
// src/tss2-tcti/tcti-common.c, tcti-swtpm.c): init() with a NULL context
// returns the context's size; transmit() then receive() alternate (else
// TSS2_TCTI_RC_BAD_SEQUENCE); receive() with a NULL buffer returns the
// response's size; finalize() releases everything.
#include <tss2/tss2_tcti.h>

#include <fmt/format.h>

#include <errno.h>  // program_invocation_name
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <utility>

#include "tcti/open_protected.h"
#include "tcti/tcti_config.h"
#include "tpmsec/command_table.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/host/files.h"
#include "tpmsec/wrap.h"

namespace tpmsec::tcti {
namespace {

constexpr uint64_t kMagic = 0x7470'6d73'6563'7463ULL;  // "tpmsectc"

// What a context holds beyond the common part tpm2-tss reads.
struct State {
  ProtectedSessions tpm;
  // Destroyed first: flushes its session. Null when the TPM is a tpmsec
  // server (serve:), which wraps every command itself: frames pass through.
  std::unique_ptr<CommandWrapper> wrapper;
  std::map<uint32_t, uint64_t> passed;  // frames passed through to a server, per command code
  std::string log;
  std::optional<uint64_t> last_run;  // the program's last wrapped command the last time
  pid_t pid = 0;                     // the process that initialized it
  bool awaiting_receive = false;
  Bytes response;
  TSS2_RC error = TSS2_RC_SUCCESS;
};

struct Context {
  TSS2_TCTI_CONTEXT_COMMON_V2 common;
  State* state;
};

void say(std::string_view line) {
  std::fprintf(stderr, "tpmsec TCTI: %.*s\n", static_cast<int>(line.size()), line.data());
}

// What a person can do about a library error of this reason, in the
// configuration's items (the CLI words the same reasons as its flags).
std::string_view advice_for(ErrorReason reason) {
  switch (reason) {
    case ErrorReason::kUnsupportedSalt:
      return ": append salt=rsa";
    case ErrorReason::kNoEkCertificate:
      return ": anchor it with null-name=HEX|FILE or tofu instead of ek-ca=";
    default:
      return "";
  }
}

State* state_of(TSS2_TCTI_CONTEXT* ctx) {
  auto* c = reinterpret_cast<Context*>(ctx);
  if (!c || c->common.v1.magic != kMagic || !c->state) return nullptr;
  return c->state;
}

TSS2_RC rc_for(const Error& e) {
  if (e.reason() == ErrorReason::kSecretInClear) return TSS2_TCTI_RC_NOT_PERMITTED;
  switch (e.kind()) {
    case ErrorKind::kUsage:
      return TSS2_TCTI_RC_BAD_VALUE;
    case ErrorKind::kRuntime:
      return TSS2_TCTI_RC_IO_ERROR;
    case ErrorKind::kParse:
    case ErrorKind::kIntegrity:
      return TSS2_TCTI_RC_MALFORMED_RESPONSE;
    case ErrorKind::kUnsupported:
      return TSS2_TCTI_RC_NOT_SUPPORTED;
    case ErrorKind::kTpm:
      break;
  }
  return TSS2_TCTI_RC_GENERAL_FAILURE;
}

TSS2_RC transmit(TSS2_TCTI_CONTEXT* ctx, size_t size, const uint8_t* command) noexcept try {
  State* s = state_of(ctx);
  if (!s) return TSS2_TCTI_RC_BAD_CONTEXT;
  if (!command) return TSS2_TCTI_RC_BAD_REFERENCE;
  if (s->awaiting_receive) return TSS2_TCTI_RC_BAD_SEQUENCE;
  Result<Bytes> out = runtime_error("no exchange");
  if (s->wrapper) {
    out = s->wrapper->exchange(s->tpm.tpm->transport(), ByteView(command, size));
    // Here, not at finalize: programs finalize from exit handlers, after
    // OpenSSL has cleaned up.
    s->tpm.tpm->keep_if_changed(s->tpm.factory.get());
  } else {
    // The command code, for log=: a frame too short for one is the
    // server's to refuse.
    HeaderRead h = read_frame_header(ByteView(command, size), size);
    if (h.check != FrameCheck::kIncomplete) ++s->passed[h.header.code];
    out = s->tpm.tpm->transport().transmit(ByteView(command, size));
  }
  if (!out.ok() && out.error().kind() == ErrorKind::kUsage) return TSS2_TCTI_RC_BAD_VALUE;  // not a command frame
  s->awaiting_receive = true;
  if (out.ok()) {
    s->response = std::move(*out);
    s->error = TSS2_RC_SUCCESS;
  } else {
    // Refused, never returned: the caller gets a TCTI error, a person the reason.
    if (out.error().reason() == ErrorReason::kSecretInClear) {
      say(out.error().message());  // nothing was sent
    } else {
      say(fmt::format("response refused: {}{}", out.error().message(), advice_for(out.error().reason())));
    }
    s->response.clear();
    s->error = rc_for(out.error());
  }
  return TSS2_RC_SUCCESS;
} catch (...) {
  return TSS2_TCTI_RC_GENERAL_FAILURE;
}

TSS2_RC receive(TSS2_TCTI_CONTEXT* ctx, size_t* size, uint8_t* response, int32_t timeout) noexcept try {
  (void)timeout;  // the exchange completed in transmit(): nothing to wait for
  State* s = state_of(ctx);
  if (!s) return TSS2_TCTI_RC_BAD_CONTEXT;
  if (!size) return TSS2_TCTI_RC_BAD_REFERENCE;
  if (!s->awaiting_receive) return TSS2_TCTI_RC_BAD_SEQUENCE;
  if (s->error != TSS2_RC_SUCCESS) {
    s->awaiting_receive = false;
    return s->error;
  }
  if (!response) {
    *size = s->response.size();
    return TSS2_RC_SUCCESS;
  }
  if (*size < s->response.size()) {
    *size = s->response.size();
    return TSS2_TCTI_RC_INSUFFICIENT_BUFFER;
  }
  std::memcpy(response, s->response.data(), s->response.size());
  *size = s->response.size();
  s->response.clear();
  s->awaiting_receive = false;
  return TSS2_RC_SUCCESS;
} catch (...) {
  return TSS2_TCTI_RC_GENERAL_FAILURE;
}

// One block per program run, appended: a log of every program that used the
// TCTI with it (docs/tcti.md, "log=").
void write_log(const State& s) {
  if (s.log.empty()) return;
  std::string report;
  if (s.wrapper) {
    report = s.wrapper->counts_report();
  } else {
    // Through a tpmsec server: every frame unchanged, its session the server's.
    for (const auto& [code, n] : s.passed) {
      const CommandInfo* info = find_command(code);
      report += fmt::format("{} 0x{:08x} passed={} (to the tpmsec server, unchanged)\n",
                            info ? info->name : std::string_view("unknown"), code, n);
    }
  }
  Status st = files::append_output(s.log, fmt::format("# {} pid {}\n{}", program_invocation_name, ::getpid(), report));
  if (!st.ok()) say(fmt::format("log={}: {}", s.log, st.error().message()));
}

// The contexts initialized and not finalized yet. systemd frees a TCTI
// context without Tss2_Tcti_Finalize and then dlcloses the library
// (systemd/systemd, src/shared/tpm2-util.c, tpm2_context_free()): on a TPM
// without a resource manager the session would stay loaded, one slot of
// three per run. The library's destructor ends what is left (below). On
// the heap, so no other static object's destructor can run after it; freed
// by that destructor once every context is ended (a dlclose unmaps the
// pointer to it: kept, it would be a leak of every process that unloads
// the library). Null after that: a late finalize finds nothing to end.
struct Live {
  std::mutex mutex;
  std::set<State*> states;
};
Live*& live_registry() {
  static Live* registry = new Live;
  return registry;
}

// Finalizes one context's state (no byte of the caller's context is read:
// it may be freed already).
void end(State* s) noexcept {
  try {
    {
      Live* live = live_registry();
      if (!live) return;  // the library's destructor ended it
      std::lock_guard<std::mutex> lock(live->mutex);
      if (live->states.erase(s) == 0) return;
    }
    write_log(*s);
    // The next run of this program ends its session with the command that
    // was the last wrapped this time (wrap.h, end_session_with()).
    if (s->wrapper) {
      uint64_t last = s->wrapper->last_wrapped_command();
      if (last != s->last_run.value_or(0)) s->tpm.tpm->commands_kept(last);
    }
    // The wrapper flushes its session before the factory and the TPM go.
    s->wrapper.reset();
    delete s;
  } catch (...) {
  }
}

void finalize(TSS2_TCTI_CONTEXT* ctx) noexcept {
  State* s = state_of(ctx);
  if (!s) return;
  reinterpret_cast<Context*>(ctx)->state = nullptr;
  reinterpret_cast<Context*>(ctx)->common.v1.magic = 0;
  end(s);
}

// At dlclose or exit: what a program never finalized. Only in the process
// that initialized it: a child that exits after a fork shares the parent's
// connection and must not flush the parent's session.
__attribute__((destructor)) void end_unfinalized() {
  for (;;) {
    State* s = nullptr;
    {
      Live* live = live_registry();
      if (!live) return;
      std::lock_guard<std::mutex> lock(live->mutex);
      if (live->states.empty()) break;
      s = *live->states.begin();
      if (s->pid != ::getpid()) {
        live->states.erase(s);  // the parent's: left to it
        continue;
      }
    }
    end(s);
  }
  delete std::exchange(live_registry(), nullptr);
}

TSS2_RC cancel(TSS2_TCTI_CONTEXT*) noexcept { return TSS2_TCTI_RC_NOT_IMPLEMENTED; }

TSS2_RC get_poll_handles(TSS2_TCTI_CONTEXT* ctx, TSS2_TCTI_POLL_HANDLE* handles, size_t* count) noexcept {
  (void)handles;
  if (!state_of(ctx)) return TSS2_TCTI_RC_BAD_CONTEXT;
  if (!count) return TSS2_TCTI_RC_BAD_REFERENCE;
  *count = 0;  // a response is ready as soon as transmit() returns
  return TSS2_RC_SUCCESS;
}

TSS2_RC set_locality(TSS2_TCTI_CONTEXT* ctx, uint8_t locality) noexcept {
  if (!state_of(ctx)) return TSS2_TCTI_RC_BAD_CONTEXT;
  return locality == 0 ? TSS2_RC_SUCCESS : TSS2_TCTI_RC_NOT_IMPLEMENTED;
}

TSS2_RC make_sticky(TSS2_TCTI_CONTEXT*, TPM2_HANDLE*, uint8_t) noexcept { return TSS2_TCTI_RC_NOT_IMPLEMENTED; }

TSS2_RC init(TSS2_TCTI_CONTEXT* ctx, size_t* size, const char* config) noexcept try {
  if (!size) return TSS2_TCTI_RC_BAD_VALUE;
  if (!ctx) {
    *size = sizeof(Context);
    return TSS2_RC_SUCCESS;
  }
  if (*size < sizeof(Context)) return TSS2_TCTI_RC_INSUFFICIENT_BUFFER;
  auto parsed = parse_tcti_config(config ? config : "");
  if (!parsed.ok()) {
    say(parsed.error().message());
    return TSS2_TCTI_RC_BAD_VALUE;
  }
  parsed->request.notice = say;
  auto opened = open_protected(parsed->request);
  if (!opened.ok()) {
    const Error& e = opened.error();
    if (e.reason() == ErrorReason::kNoTrustAnchor) {
      say(
          fmt::format("no trust anchor for the salt key of {}: an interposer on the bus could answer with its own "
                      "key and forge every response. Append null-name=HEX|FILE, ek-ca=PATH or tofu (tpmsec:{},"
                      "null-name=/sys/class/tpm/tpm0/null_name)",
                      parsed->request.tpm.empty() ? "the host's TPM" : parsed->request.tpm, parsed->request.tpm));
    } else {
      say(fmt::format("{}{}", e.message(), advice_for(e.reason())));
    }
    return e.kind() == ErrorKind::kRuntime ? TSS2_TCTI_RC_IO_ERROR : TSS2_TCTI_RC_BAD_VALUE;
  }
  auto state = std::make_unique<State>();
  state->tpm = std::move(*opened);
  state->log = parsed->log;
  state->pid = ::getpid();
  if (state->tpm.factory) {
    state->wrapper = std::make_unique<CommandWrapper>(*state->tpm.factory);
    state->wrapper->set_strict(parsed->strict);
    // A session a program started in its previous process (tpm2-tools keeps
    // them in files) is re-signed here too.
    state->wrapper->keep_caller_sessions_in(state->tpm.tpm->session_cache());
    // A program whose N-th command was the last wrapped the last time likely
    // runs the same way again: its session ends with the N-th, saving the
    // FlushContext at finalize.
    auto last_run = state->tpm.tpm->commands_last_run();
    if (!last_run.ok()) {
      say(last_run.error().message());
      return rc_for(last_run.error());
    }
    state->last_run = *last_run;
    if (state->last_run) state->wrapper->end_session_with(*state->last_run);
  }

  auto* c = reinterpret_cast<Context*>(ctx);
  std::memset(c, 0, sizeof(Context));
  c->common.v1.magic = kMagic;
  c->common.v1.version = 2;
  c->common.v1.transmit = transmit;
  c->common.v1.receive = receive;
  c->common.v1.finalize = finalize;
  c->common.v1.cancel = cancel;
  c->common.v1.getPollHandles = get_poll_handles;
  c->common.v1.setLocality = set_locality;
  c->common.makeSticky = make_sticky;
  {
    Live* live = live_registry();
    std::lock_guard<std::mutex> lock(live->mutex);
    live->states.insert(state.get());
  }
  c->state = state.release();
  return TSS2_RC_SUCCESS;
} catch (const std::bad_alloc&) {
  return TSS2_TCTI_RC_MEMORY;
} catch (...) {
  return TSS2_TCTI_RC_GENERAL_FAILURE;
}

const TSS2_TCTI_INFO kInfo = {
    2,
    "tpmsec",
    "tpmsec: every command in a salted, audited HMAC session with parameter encryption",
    kTctiOptionsHelp,
    init,
};

}  // namespace
}  // namespace tpmsec::tcti

extern "C" __attribute__((visibility("default"))) const TSS2_TCTI_INFO* Tss2_Tcti_Info(void) {
  return &tpmsec::tcti::kInfo;
}
