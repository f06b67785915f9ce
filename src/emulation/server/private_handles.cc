#include "emulation/server/private_handles.h"

#include <fmt/format.h>

#include <algorithm>

#include "tpmsec/command_frame.h"
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
  if (c.check != FrameCheck::kOk || !succeeded(response)) return;
  // A session the server saved, flushed by its client (FlushContext takes a
  // saved session as it is).
  if (c.header.code == cmd::FlushContext::kInfo.code && command.size() >= kFrameHeaderBytes + 4) {
    auto s = saved_.find(load_be32(command.data() + kFrameHeaderBytes));
    if (s != saved_.end() && s->second.owner == client) saved_.erase(s);
  }
  if (response.size() < kFrameHeaderBytes + 4 || !handle_creating_.count(c.header.code)) return;
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
    if (succeeded(send(cmd::FlushContext::kInfo.code, be32(h), locality))) ++flushed;
  }
  // Its sessions the server saved for another client's: flushed as saved.
  for (auto s = saved_.begin(); s != saved_.end();) {
    if (s->second.owner != client) {
      ++s;
      continue;
    }
    if (succeeded(send(cmd::FlushContext::kInfo.code, be32(s->first), locality))) ++flushed;
    s = saved_.erase(s);
  }
  for (auto o = owner_.begin(); o != owner_.end();) o = o->second == client ? owner_.erase(o) : std::next(o);
  log_(fmt::format("client closed (private handles: flushed {} it left)", flushed));
}

Bytes PrivateHandles::send(uint32_t code, ByteView parameters, uint8_t locality) {
  Writer w(kMaxCommandBytes, "command");
  w.u16(st::kNoSessions);
  auto size = w.begin_total_size32("commandSize");
  w.u32(code);
  w.bytes(parameters, "parameters");
  w.end_size(size);
  auto command = w.finish();
  if (!command.ok()) return error_frame(rc::kFailure);
  return chip_.execute(*command, locality);
}

void PrivateHandles::before(ClientId client, ByteView command, uint8_t locality) {
  auto areas = read_command_areas(command, kMaxCommandBytes);
  if (!areas.ok()) return;
  // The sessions the command names (handle area, session entries), and
  // whether it makes one loaded (StartAuthSession, a session's ContextLoad).
  std::set<uint32_t> named;
  for (uint32_t h : areas->handles) {
    if (ht::is_session(h)) named.insert(h);
  }
  for (const AuthEntry& e : areas->sessions) {
    if (ht::is_session(e.handle)) named.insert(e.handle);
  }
  bool makes_one = areas->info->code == cmd::StartAuthSession::kInfo.code;
  if (areas->info->code == cmd::ContextLoad::kInfo.code && areas->parameters.size() >= 12) {
    makes_one = ht::is_session(load_be32(areas->parameters.data() + 8));  // TPMS_CONTEXT: sequence, savedHandle
  }
  std::vector<uint32_t> back;
  for (uint32_t h : named) {
    auto s = saved_.find(h);
    if (s != saved_.end() && s->second.owner == client) back.push_back(h);
  }
  size_t wanted = back.size() + (makes_one ? 1 : 0);
  if (wanted == 0 || !chip_.platform().powered()) return;

  Tpm tpm(chip_.unbilled());
  auto loaded = tpm.list_handles(ht::kFirstLoadedSession);
  if (!loaded.ok()) return;
  size_t limit = chip_.profile().slots.max_loaded_sessions ? chip_.profile().slots.max_loaded_sessions : 3;
  size_t in_use = loaded->size();
  for (uint32_t h : *loaded) {
    if (in_use + wanted <= limit) break;
    auto o = owner_.find(HandleLedger::slot(h));
    if (o == owner_.end() || o->second == client || named.count(h)) continue;
    Bytes response = send(cmd::ContextSave::kInfo.code, be32(h), locality);
    if (!succeeded(response)) continue;
    saved_[h] = Saved{o->second, Bytes(response.begin() + kFrameHeaderBytes, response.end())};
    --in_use;
    log_(fmt::format("private handles: session 0x{:08x} of another client saved to make room", h));
  }
  for (uint32_t h : back) {
    Bytes response = send(cmd::ContextLoad::kInfo.code, saved_[h].context, locality);
    // Loaded back under its handle; a context the TPM refuses (a reset
    // since) is gone, as the kernel's would be.
    saved_.erase(h);
    if (!succeeded(response)) log_(fmt::format("private handles: session 0x{:08x} could not be loaded back", h));
  }
}

size_t PrivateHandles::entries() const {
  size_t n = owner_.size() + saved_.size();
  for (const auto& [id, c] : clients_) n += 1 + c.present_at_connect.size();
  return n;
}

}  // namespace tpmsec::emulation
