// Tpm: the command pipeline. One function, execute(), turns a command's
// handles, parameters and sessions into bytes on the wire and a response
// back into authenticated parameters (Part 1 §18-19); run<C>() wraps it for
// the declarative definitions of commands.h.
#ifndef TPMSEC_TPM_H_
#define TPMSEC_TPM_H_

#include <array>
#include <initializer_list>
#include <span>
#include <vector>

#include "tpmsec/command.h"
#include "tpmsec/commands.h"
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

// An error for a TPM response code: kind kTpm, "TPM error TPM_RC_X (...) from CMD".
Error tpm_error(uint32_t code, std::string_view command);

class Tpm {
 public:
  explicit Tpm(Transport& transport) : transport_(&transport) {}

  // Sends one command. `auths` lists the sessions: the first info.auth_count
  // authorize the handles in order; any after them are audit or encryption
  // sessions. Retries TPM_RC_RETRY/YIELDED/TESTING with back-off, but only
  // for commands marked retry_safe (see command.h).
  Result<RawResponse> execute(const CommandInfo& info, std::span<const NamedHandle* const> handles,
                              Bytes parameters, std::span<const Auth> auths);

  template <class C>
  Result<typename C::Response> run(const C& command, std::span<const Auth> auths = {}) {
    Writer params;
    marshal_all(params, command.params());
    auto handles = std::apply([](const auto&... h) { return std::array<const NamedHandle*, sizeof...(h)>{&h...}; },
                              command.handles());
    static_assert(handles.size() == C::kInfo.handle_count, "handles() disagrees with kInfo");
    TPMSEC_ASSIGN_OR_RETURN(RawResponse raw, execute(C::kInfo, handles, params.take(), auths));
    typename C::Response response;
    auto response_handles = response.handles();
    static_assert(std::tuple_size_v<decltype(response_handles)> == C::kInfo.response_handle_count);
    size_t i = 0;
    std::apply([&](auto&... h) { ((h = raw.handles[i++]), ...); }, response_handles);
    Reader r(raw.parameters);
    unmarshal_all(r, response.params());
    r.expect_end(C::kInfo.name);
    if (!r.ok()) {
      // The TPM created what the handle names; nobody else can flush it.
      flush_created(raw.handles);
      return r.status().error().with_context(std::string(C::kInfo.name) + " response");
    }
    return response;
  }
  template <class C>
  Result<typename C::Response> run(const C& command, std::initializer_list<Auth> auths) {
    return run(command, std::span<const Auth>(auths.begin(), auths.size()));
  }

  Transport& transport() { return *transport_; }

 private:
  // Flushes transient objects and sessions a response created but the caller
  // never received (the response failed to parse).
  void flush_created(const std::vector<uint32_t>& handles);
  Result<RawResponse> execute_once(const CommandInfo& info, std::span<const NamedHandle* const> handles,
                                   const Bytes& parameters, std::span<const Auth> auths);

  Transport* transport_;
};

}  // namespace tpmsec

#endif  // TPMSEC_TPM_H_
