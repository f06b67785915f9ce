#include "support/fault_injection.h"

#include <fmt/format.h>

#include "tpmsec/constants.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

constexpr size_t kHeaderSize = 10;

// Applies the flips that fall inside `data`; returns how many did.
size_t apply_flips(Bytes& data, const std::vector<ByteFlip>& flips) {
  size_t applied = 0;
  for (const ByteFlip& f : flips) {
    if (f.position >= data.size()) continue;
    data[f.position] ^= f.mask;
    ++applied;
  }
  return applied;
}

}  // namespace

bool Fault::is_pass() const {
  return command_flips.empty() && execute && !fail_transmission && !forged_response && response_flips.empty() &&
         !truncate_response_to && append_to_response.empty();
}

Fault Fault::flip_command(size_t position, uint8_t mask) {
  Fault f;
  f.command_flips.push_back({position, mask});
  return f;
}

Fault Fault::flip_response(size_t position, uint8_t mask) {
  Fault f;
  f.response_flips.push_back({position, mask});
  return f;
}

Fault Fault::truncate_response(size_t size) {
  Fault f;
  f.truncate_response_to = size;
  return f;
}

Fault Fault::append_response(Bytes extra) {
  Fault f;
  f.append_to_response = std::move(extra);
  return f;
}

Fault Fault::forge_error(uint32_t response_code, bool executed) {
  Fault f;
  f.execute = executed;
  f.forged_response = error_response(response_code);
  return f;
}

Fault Fault::fail(bool executed) {
  Fault f;
  f.execute = executed;
  f.fail_transmission = true;
  return f;
}

Bytes error_response(uint32_t response_code) {
  Writer w;
  w.u16(st::kNoSessions);
  w.u32(static_cast<uint32_t>(kHeaderSize));
  w.u32(response_code);
  return w.data();  // three fixed fields: an unlimited Writer cannot fail on them
}

std::optional<uint32_t> FaultInjectingTransport::last_tpm_response_code() const {
  if (!last_tpm_response_ || last_tpm_response_->size() < kHeaderSize) return std::nullopt;
  return load_be32(last_tpm_response_->data() + 6);
}

Result<Bytes> FaultInjectingTransport::transmit(ByteView command) {
  size_t index = counters_.commands++;
  last_tpm_response_.reset();
  Fault fault = hook_ ? hook_(index, testing::command_code_of(command), command) : Fault{};
  if (fault.is_pass()) {
    ++counters_.executed;
    auto response = inner_->transmit(command);
    if (response.ok()) last_tpm_response_ = *response;
    return response;
  }
  if (!fault.execute && !fault.forged_response && !fault.fail_transmission) {
    return usage_error(fmt::format("fault for command {} neither executes, forges a response nor fails", index));
  }
  ++counters_.faulted;

  Bytes sent(command.begin(), command.end());
  counters_.command_flips += apply_flips(sent, fault.command_flips);

  Bytes response;
  if (fault.execute) {
    ++counters_.executed;
    TPMSEC_ASSIGN_OR_RETURN(response, inner_->transmit(sent));
    last_tpm_response_ = response;
  }
  if (fault.fail_transmission) {
    ++counters_.failed;
    return runtime_error(fmt::format("injected transmission failure (command {}, {})", index,
                                     fault.execute ? "after the TPM executed it" : "not sent"));
  }
  if (fault.forged_response) {
    ++counters_.forged;
    response = *fault.forged_response;
  }
  counters_.response_flips += apply_flips(response, fault.response_flips);
  if (fault.truncate_response_to && *fault.truncate_response_to < response.size()) {
    response.resize(*fault.truncate_response_to);
    ++counters_.truncated;
  }
  if (!fault.append_to_response.empty()) {
    response.insert(response.end(), fault.append_to_response.begin(), fault.append_to_response.end());
    ++counters_.appended;
  }
  return response;
}

}  // namespace tpmsec
