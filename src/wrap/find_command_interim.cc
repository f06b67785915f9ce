// INTERIM (see find_command_interim.h): the typed commands' kInfo and the
// few more the TCTI's tests drive through tpm2-tools.
#include "wrap/find_command_interim.h"

#include "tpmsec/commands.h"

namespace tpmsec {
namespace {

// code, name, handles, auths, response handles, command TPM2B, response TPM2B, retry_safe
constexpr CommandInfo kInterimExtra[] = {
    {0x137, "NV_Write", 2, 1, 0, true, false},
    {0x129, "HierarchyChangeAuth", 1, 1, 0, true, false},
    {0x13B, "NV_ChangeAuth", 1, 1, 0, true, false},
    {0x191, "CreateLoaded", 1, 1, 1, true, true},
    {0x167, "LoadExternal", 0, 0, 1, true, true},
    {0x15D, "Sign", 1, 1, 0, true, false},
    {0x177, "VerifySignature", 1, 0, 0, true, false},
    {0x158, "Quote", 1, 1, 0, true, true},
    {0x150, "ObjectChangeAuth", 2, 1, 0, true, true},
    {0x13C, "PCR_Event", 1, 1, 0, true, false},
};

}  // namespace

const CommandInfo* find_command(uint32_t code) {
  for (const CommandInfo& c : cmd::kAllCommands) {
    if (c.code == code) return &c;
  }
  for (const CommandInfo& c : kInterimExtra) {
    if (c.code == code) return &c;
  }
  return nullptr;
}

}  // namespace tpmsec
