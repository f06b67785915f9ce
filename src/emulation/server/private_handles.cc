#include "emulation/server/private_handles.h"

#include <fmt/format.h>

#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/handle_ledger.h"
#include "tpmsec/response_code.h"
#include "tpmsec/tpm.h"
#include "tpmsec/wire.h"

namespace tpmsec::emulation {
namespace {
constexpr uint32_t kRHandle = 1u << 28;            // TPMA_CC rHandle (Part 2 §8.9)
constexpr uint32_t kCommandCodeBits = 0x2000FFFF;  // TPMA_CC commandIndex and V: the TPM_CC
}  // namespace

Status PrivateHandles::start() {
  Tpm tpm(chip_.unbilled());
  uint32_t property = 0;
  for (int page = 0; page < 8; ++page) {
    TPMSEC_ASSIGN_OR_RETURN(auto rsp, tpm.run(cmd::GetCapability{cap::kCommands, property, 256}));
    const auto& attributes = rsp.capability_data.commands;
    for (uint32_t a : attributes) {
      if (a & kRHandle) handle_creating_.insert(a & kCommandCodeBits);
    }
    if (!rsp.more_data || attributes.empty()) break;
    uint32_t next = (attributes.back() & kCommandCodeBits) + 1;
    if (next <= property) break;
    property = next;
  }
  if (handle_creating_.empty()) return runtime_error("emulate: the TPM lists no command that returns a handle");
  return ok_status();
}

Result<std::vector<uint32_t>> PrivateHandles::present(bool saved_sessions) {
  std::vector<uint32_t> out;
  if (!chip_.platform().powered()) return out;
  Tpm tpm(chip_.unbilled());
  for (uint32_t first : {ht::kFirstTransient, ht::kFirstLoadedSession, ht::kFirstSavedSession}) {
    if (first == ht::kFirstSavedSession && !saved_sessions) continue;
    TPMSEC_ASSIGN_OR_RETURN(auto listed, tpm.list_handles(first));
    out.insert(out.end(), listed.begin(), listed.end());
  }
  return out;
}

void PrivateHandles::connected(ClientId client) {
  Client& c = clients_[client];
  auto listed = present(true);
  if (!listed.ok()) {
    log_("private handles: cannot list the TPM's handles: " + listed.error().message());
    c.listing_failed = true;
    return;
  }
  for (uint32_t h : *listed) c.present_at_connect.insert(HandleLedger::slot(h));
  log_(fmt::format("client connected (private handles: {} present before it stay)", c.present_at_connect.size()));
}

void PrivateHandles::answered(ClientId client, ByteView command, ByteView response) {
  HeaderRead c = read_frame_header(command, kMaxCommandBytes);
  HeaderRead r = read_frame_header(response, response.size());
  if (c.check != FrameCheck::kOk || r.check != FrameCheck::kOk || r.header.code != rc::kSuccess ||
      response.size() < kFrameHeaderBytes + 4 || !handle_creating_.count(c.header.code)) {
    return;
  }
  owner_[HandleLedger::slot(load_be32(response.data() + kFrameHeaderBytes))] = client;
}

void PrivateHandles::closed(ClientId client, uint8_t locality) {
  auto it = clients_.find(client);
  if (it == clients_.end()) return;
  const Client c = std::move(it->second);
  clients_.erase(it);
  size_t flushed = 0;
  auto listed = c.listing_failed ? Result<std::vector<uint32_t>>(std::vector<uint32_t>{}) : present(false);
  if (!listed.ok()) log_("private handles: cannot list the TPM's handles: " + listed.error().message());
  for (uint32_t h : listed.ok() ? *listed : std::vector<uint32_t>{}) {
    const uint32_t slot = HandleLedger::slot(h);
    auto owned = owner_.find(slot);
    const bool its = owned != owner_.end() ? owned->second == client : !c.present_at_connect.count(slot);
    if (!its) continue;
    Writer w;
    w.u16(st::kNoSessions);
    w.u32(14);
    w.u32(cmd::FlushContext::kInfo.code);
    w.u32(h);
    auto command = w.finish();
    if (!command.ok()) continue;
    Bytes response = chip_.execute(*command, locality);
    HeaderRead r = read_frame_header(response, response.size());
    if (r.check == FrameCheck::kOk && r.header.code == rc::kSuccess) ++flushed;
  }
  for (auto o = owner_.begin(); o != owner_.end();) o = o->second == client ? owner_.erase(o) : std::next(o);
  log_(fmt::format("client closed (private handles: flushed {} it left)", flushed));
}

size_t PrivateHandles::entries() const {
  size_t n = owner_.size();
  for (const auto& [id, c] : clients_) n += 1 + c.present_at_connect.size();
  return n;
}

}  // namespace tpmsec::emulation
