// --private-handles: each client's handles as /dev/tpmrm0 keeps them (Linux
// drivers/char/tpm/tpm2-space.c). The kernel gives each client a space of
// its own: a transient object a client's command created is context-saved
// and flushed from the TPM after every command (tpm2_save_space) and only
// its saved blob is dropped when the client closes; a session a response
// named (tpm2_map_response_header: the command's TPMA_CC rHandle, a session
// handle) is flushed with FlushContext when the client closes
// (tpm2_del_space -> tpm2_flush_sessions), unless the kernel forgot it
// earlier because its own ContextSave found it not loaded (the client
// flushed or saved it, or the TPM ended it). So when a data connection
// closes, the transient objects and loaded sessions it created and still
// present are flushed; a session the client saved itself stays, as on Linux.
//
// "Created by it": named by a successful response to one of its commands
// with rHandle (read from the TPM's TPM_CAP_COMMANDS at start, as the
// kernel's tpm2_get_cc_attrs_tbl does; the last client a response named a
// slot to owns it), or absent from the listing taken when it connected and
// named to no other open client. Handles present then and not re-created
// stay. Several clients share the one TPM's handle numbers (no handle
// virtualization): what one client created is never flushed for another.
// The listings go to libtpms directly: they stand for the kernel's own
// bookkeeping, which sends no TPM command, and are neither billed nor
// logged. The FlushContexts are billed and logged as any command: a tpmrm
// sends them (for a transient object it sends one after each command; one
// per object at the close is the lower bound). The kernel's per-command
// ContextLoad/ContextSave of a client's objects and sessions is modelled only
// where a client would otherwise see another's sessions: the TPM's loaded-
// session slots (three) are each space's own on Linux, so when a client's
// command needs a slot that another client's loaded session holds (it starts
// or loads a session, or names one of its own the server saved), that
// session is context-saved first, and loaded back under its handle before
// its own client's next command that names it (before()). Those
// ContextSave/ContextLoad commands are billed and logged; with one client at
// a time, or clients that leave each other room, nothing changes.
#ifndef TPMSEC_SRC_EMULATION_SERVER_PRIVATE_HANDLES_H_
#define TPMSEC_SRC_EMULATION_SERVER_PRIVATE_HANDLES_H_

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "emulation/server/emulated_chip.h"
#include "tpmsec/bytes.h"

namespace tpmsec::emulation {

using ClientId = uint64_t;

class PrivateHandles {
 public:
  PrivateHandles(EmulatedChip& chip, EmulatedChip::Log log) : chip_(chip), log_(std::move(log)) {}

  // The commands whose response carries a handle, from the TPM's own list.
  Status start();
  void connected(ClientId client);
  // Before each of the client's commands (as commands at `locality`).
  void before(ClientId client, ByteView command, uint8_t locality);
  // After each of the client's commands.
  void answered(ClientId client, ByteView command, ByteView response);
  // Flushes what the client left (as commands at `locality`).
  void closed(ClientId client, uint8_t locality);

  // Entries kept: owned slots and clients' listings (none once all closed).
  size_t entries() const;

 private:
  // Transient objects and loaded sessions (and saved sessions when asked)
  // libtpms holds now, by HandleLedger::slot; listed directly, not billed.
  Result<std::vector<uint32_t>> present(bool saved_sessions);

  EmulatedChip& chip_;
  EmulatedChip::Log log_;
  std::set<uint32_t> handle_creating_;  // TPM_CCs with rHandle
  std::map<uint32_t, ClientId> owner_;  // slot -> the client a response named it to
  struct Client {
    std::set<uint32_t> present_at_connect;  // slots
    bool listing_failed = false;
  };
  std::map<ClientId, Client> clients_;
  // Sessions saved to make room for another client's: handle -> its owner
  // and its context (a TPMS_CONTEXT as ContextSave answered it).
  struct Saved {
    ClientId owner = 0;
    Bytes context;
  };
  std::map<uint32_t, Saved> saved_;
  // Sends `command` (NO_SESSIONS) at `locality`, billed; its response.
  Bytes send(uint32_t code, ByteView parameters, uint8_t locality);
};

}  // namespace tpmsec::emulation

#endif  // TPMSEC_SRC_EMULATION_SERVER_PRIVATE_HANDLES_H_
