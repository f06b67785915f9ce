// The command table: every TPM 2.0 command of TPM 2.0 Part 3, once, with the
// attributes anyone needs to frame it (command.h, CommandInfo). It is the one
// place a command code is named and described: the typed definitions of
// commands.h take their kInfo from here (command_info<CODE>()), tracing names
// commands by it, and a front end that adds a session to a command it does
// not otherwise know (a TCTI) looks it up with find_command().
//
// Sources, per entry:
//   code, name            Part 2 §6.5.2 (TPM_CC); the name is Part 3's, less "TPM2_";
//   handle_count,         Part 3, the command's handle area ("Type: TPMI_..."
//   response_handle_count   rows before the parameters; a response handle is
//                           TPMA_CC.rHandle);
//   auth_count            Part 3's "Auth Index:" annotations of those handles
//                           (an "@" handle; TCG reference code: HANDLE_1_USER,
//                           HANDLE_1_ADMIN, HANDLE_1_DUP, HANDLE_2_USER);
//   command_param_tpm2b,  Part 3: the first command / response parameter is a
//   response_param_tpm2b    sized buffer (Part 1 §21 "Session-based
//                           encryption"; reference code DECRYPT_2 / ENCRYPT_2);
//   no_sessions           Part 3: the only tag allowed is TPM_ST_NO_SESSIONS
//                           (reference code NO_SESSIONS);
//   writes_nv, extensive, Part 2 §8.9 (TPMA_CC.nv, .extensive, .flushed) as
//   flushes_handles         the reference implementation reports them;
//   retry_safe            tpmsec's own judgement: reads and pure computations
//                           only (no commit counter, no policy digest, no audit
//                           digest, no signing that may consume an ECDAA commit);
//   creates_handle        every command with a response handle creates (or,
//                           ContextLoad, reloads) what it names.
// Cross-checked against libtpms (github.com/stefanberger/libtpms,
// src/tpm2/CommandAttributeData.h; on master
// src/tpm2/TPMCmd/tpm/include/private/CommandAttributeData.h), and, for the
// commands it implements, against what the embedded libtpms reports in
// TPM_CAP_COMMANDS (tests/command_table_test.cc).
#ifndef TPMSEC_COMMAND_TABLE_H_
#define TPMSEC_COMMAND_TABLE_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "tpmsec/command.h"

namespace tpmsec {

// In ascending code order (command_table.cc checks it at compile time). Codes
// 0x123, 0x15A, 0x15F, 0x166 and 0x175 are unassigned. 0x19B..0x1A1 are
// later than Library 1.59 (the reference code's rev 180 and after; libtpms
// master has them); vendor commands (TPMA_CC.V) are not Part 3's and are not
// here.
inline constexpr CommandInfo kCommandTable[] = {
    {.code = 0x11F, .name = "NV_UndefineSpaceSpecial", .handle_count = 2, .auth_count = 2, .writes_nv = true},
    {.code = 0x120, .name = "EvictControl", .handle_count = 2, .auth_count = 1, .writes_nv = true},
    {.code = 0x121, .name = "HierarchyControl", .handle_count = 1, .auth_count = 1, .writes_nv = true,
     .extensive = true},
    {.code = 0x122, .name = "NV_UndefineSpace", .handle_count = 2, .auth_count = 1, .writes_nv = true},
    {.code = 0x124, .name = "ChangeEPS", .handle_count = 1, .auth_count = 1, .writes_nv = true, .extensive = true},
    {.code = 0x125, .name = "ChangePPS", .handle_count = 1, .auth_count = 1, .writes_nv = true, .extensive = true},
    {.code = 0x126, .name = "Clear", .handle_count = 1, .auth_count = 1, .writes_nv = true, .extensive = true},
    {.code = 0x127, .name = "ClearControl", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x128, .name = "ClockSet", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x129, .name = "HierarchyChangeAuth", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x12A, .name = "NV_DefineSpace", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x12B, .name = "PCR_Allocate", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x12C, .name = "PCR_SetAuthPolicy", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x12D, .name = "PP_Commands", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x12E, .name = "SetPrimaryPolicy", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x12F, .name = "FieldUpgradeStart", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true},
    {.code = 0x130, .name = "ClockRateAdjust", .handle_count = 1, .auth_count = 1},
    {.code = 0x131, .name = "CreatePrimary", .handle_count = 1, .auth_count = 1, .response_handle_count = 1,
     .command_param_tpm2b = true, .response_param_tpm2b = true, .creates_handle = true},
    {.code = 0x132, .name = "NV_GlobalWriteLock", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x133, .name = "GetCommandAuditDigest", .handle_count = 2, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .writes_nv = true},
    {.code = 0x134, .name = "NV_Increment", .handle_count = 2, .auth_count = 1, .writes_nv = true},
    {.code = 0x135, .name = "NV_SetBits", .handle_count = 2, .auth_count = 1, .writes_nv = true},
    {.code = 0x136, .name = "NV_Extend", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x137, .name = "NV_Write", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x138, .name = "NV_WriteLock", .handle_count = 2, .auth_count = 1, .writes_nv = true},
    {.code = 0x139, .name = "DictionaryAttackLockReset", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x13A, .name = "DictionaryAttackParameters", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x13B, .name = "NV_ChangeAuth", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x13C, .name = "PCR_Event", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x13D, .name = "PCR_Reset", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x13E, .name = "SequenceComplete", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .flushes_handles = true},
    {.code = 0x13F, .name = "SetAlgorithmSet", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x140, .name = "SetCommandCodeAuditStatus", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x141, .name = "FieldUpgradeData", .command_param_tpm2b = true, .writes_nv = true},
    {.code = 0x142, .name = "IncrementalSelfTest", .writes_nv = true},
    {.code = 0x143, .name = "SelfTest", .writes_nv = true},
    {.code = 0x144, .name = "Startup", .no_sessions = true, .writes_nv = true},
    {.code = 0x145, .name = "Shutdown", .writes_nv = true},
    {.code = 0x146, .name = "StirRandom", .command_param_tpm2b = true, .writes_nv = true},
    {.code = 0x147, .name = "ActivateCredential", .handle_count = 2, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x148, .name = "Certify", .handle_count = 2, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x149, .name = "PolicyNV", .handle_count = 3, .auth_count = 1, .command_param_tpm2b = true},
    {.code = 0x14A, .name = "CertifyCreation", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x14B, .name = "Duplicate", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x14C, .name = "GetTime", .handle_count = 2, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x14D, .name = "GetSessionAuditDigest", .handle_count = 3, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x14E, .name = "NV_Read", .handle_count = 2, .auth_count = 1, .response_param_tpm2b = true,
     .retry_safe = true},
    {.code = 0x14F, .name = "NV_ReadLock", .handle_count = 2, .auth_count = 1, .writes_nv = true},
    {.code = 0x150, .name = "ObjectChangeAuth", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x151, .name = "PolicySecret", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x152, .name = "Rewrap", .handle_count = 2, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x153, .name = "Create", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x154, .name = "ECDH_ZGen", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x155, .name = "HMAC", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x156, .name = "Import", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x157, .name = "Load", .handle_count = 1, .auth_count = 1, .response_handle_count = 1,
     .command_param_tpm2b = true, .response_param_tpm2b = true, .creates_handle = true},
    {.code = 0x158, .name = "Quote", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x159, .name = "RSA_Decrypt", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x15B, .name = "HMAC_Start", .handle_count = 1, .auth_count = 1, .response_handle_count = 1,
     .command_param_tpm2b = true, .creates_handle = true},
    {.code = 0x15C, .name = "SequenceUpdate", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true},
    {.code = 0x15D, .name = "Sign", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true},
    {.code = 0x15E, .name = "Unseal", .handle_count = 1, .auth_count = 1, .response_param_tpm2b = true,
     .retry_safe = true},
    {.code = 0x160, .name = "PolicySigned", .handle_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x161, .name = "ContextLoad", .response_handle_count = 1, .no_sessions = true, .creates_handle = true},
    {.code = 0x162, .name = "ContextSave", .handle_count = 1, .no_sessions = true},
    {.code = 0x163, .name = "ECDH_KeyGen", .handle_count = 1, .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x164, .name = "EncryptDecrypt", .handle_count = 1, .auth_count = 1, .response_param_tpm2b = true,
     .retry_safe = true},
    {.code = 0x165, .name = "FlushContext", .no_sessions = true},
    {.code = 0x167, .name = "LoadExternal", .response_handle_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .creates_handle = true},
    {.code = 0x168, .name = "MakeCredential", .handle_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x169, .name = "NV_ReadPublic", .handle_count = 1, .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x16A, .name = "PolicyAuthorize", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x16B, .name = "PolicyAuthValue", .handle_count = 1},
    {.code = 0x16C, .name = "PolicyCommandCode", .handle_count = 1},
    {.code = 0x16D, .name = "PolicyCounterTimer", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x16E, .name = "PolicyCpHash", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x16F, .name = "PolicyLocality", .handle_count = 1},
    {.code = 0x170, .name = "PolicyNameHash", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x171, .name = "PolicyOR", .handle_count = 1},
    {.code = 0x172, .name = "PolicyTicket", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x173, .name = "ReadPublic", .handle_count = 1, .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x174, .name = "RSA_Encrypt", .handle_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x176, .name = "StartAuthSession", .handle_count = 2, .response_handle_count = 1,
     .command_param_tpm2b = true, .response_param_tpm2b = true, .creates_handle = true},
    {.code = 0x177, .name = "VerifySignature", .handle_count = 1, .command_param_tpm2b = true, .retry_safe = true},
    {.code = 0x178, .name = "ECC_Parameters", .retry_safe = true},
    {.code = 0x179, .name = "FirmwareRead", .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x17A, .name = "GetCapability", .retry_safe = true},
    {.code = 0x17B, .name = "GetRandom", .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x17C, .name = "GetTestResult", .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x17D, .name = "Hash", .command_param_tpm2b = true, .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x17E, .name = "PCR_Read", .retry_safe = true},
    {.code = 0x17F, .name = "PolicyPCR", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x180, .name = "PolicyRestart", .handle_count = 1},
    {.code = 0x181, .name = "ReadClock", .retry_safe = true},
    {.code = 0x182, .name = "PCR_Extend", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x183, .name = "PCR_SetAuthValue", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true},
    {.code = 0x184, .name = "NV_Certify", .handle_count = 3, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x185, .name = "EventSequenceComplete", .handle_count = 2, .auth_count = 2, .command_param_tpm2b = true,
     .writes_nv = true, .flushes_handles = true},
    {.code = 0x186, .name = "HashSequenceStart", .response_handle_count = 1, .command_param_tpm2b = true,
     .creates_handle = true},
    {.code = 0x187, .name = "PolicyPhysicalPresence", .handle_count = 1},
    {.code = 0x188, .name = "PolicyDuplicationSelect", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x189, .name = "PolicyGetDigest", .handle_count = 1, .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x18A, .name = "TestParms", .retry_safe = true},
    {.code = 0x18B, .name = "Commit", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x18C, .name = "PolicyPassword", .handle_count = 1},
    {.code = 0x18D, .name = "ZGen_2Phase", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x18E, .name = "EC_Ephemeral", .response_param_tpm2b = true},
    {.code = 0x18F, .name = "PolicyNvWritten", .handle_count = 1},
    {.code = 0x190, .name = "PolicyTemplate", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x191, .name = "CreateLoaded", .handle_count = 1, .auth_count = 1, .response_handle_count = 1,
     .command_param_tpm2b = true, .response_param_tpm2b = true, .creates_handle = true},
    {.code = 0x192, .name = "PolicyAuthorizeNV", .handle_count = 3, .auth_count = 1},
    {.code = 0x193, .name = "EncryptDecrypt2", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x194, .name = "AC_GetCapability", .handle_count = 1, .retry_safe = true},
    {.code = 0x195, .name = "AC_Send", .handle_count = 3, .auth_count = 2, .command_param_tpm2b = true},
    {.code = 0x196, .name = "Policy_AC_SendSelect", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x197, .name = "CertifyX509", .handle_count = 2, .auth_count = 2, .command_param_tpm2b = true,
     .response_param_tpm2b = true},
    {.code = 0x198, .name = "ACT_SetTimeout", .handle_count = 1, .auth_count = 1},
    {.code = 0x199, .name = "ECC_Encrypt", .handle_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x19A, .name = "ECC_Decrypt", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x19B, .name = "PolicyCapability", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x19C, .name = "PolicyParameters", .handle_count = 1, .command_param_tpm2b = true},
    {.code = 0x19D, .name = "NV_DefineSpace2", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x19E, .name = "NV_ReadPublic2", .handle_count = 1, .response_param_tpm2b = true, .retry_safe = true},
    {.code = 0x19F, .name = "SetCapability", .handle_count = 1, .auth_count = 1, .command_param_tpm2b = true,
     .writes_nv = true},
    {.code = 0x1A0, .name = "ReadOnlyControl", .handle_count = 1, .auth_count = 1, .writes_nv = true},
    {.code = 0x1A1, .name = "PolicyTransportSPDM", .handle_count = 1, .command_param_tpm2b = true},
};

// Every command, in ascending code order.
std::span<const CommandInfo> all_commands();

// The command of this code, or nullptr (an unassigned or a vendor code).
// A code from a TPM's command is untrusted input: a caller that frames
// commands it does not know refuses a nullptr rather than guessing.
const CommandInfo* find_command(uint32_t code);

namespace detail {
constexpr const CommandInfo* find_in_table(uint32_t code) {
  for (const CommandInfo& c : kCommandTable) {
    if (c.code == code) return &c;
  }
  return nullptr;
}
}  // namespace detail

// A command's code by its Part 3 name ("FlushContext"), at compile time: code
// that handles a command specially names it, and a name that is not in the
// table does not compile (the throw is never reached at run time).
consteval uint32_t command_code(std::string_view name) {
  for (const CommandInfo& c : kCommandTable) {
    if (c.name == name) return c.code;
  }
  throw "not a TPM 2.0 command name (command_table.h)";
}

// A command's entry at compile time: what a typed definition's kInfo is.
// A code that is not in the table does not compile.
template <uint32_t Code>
constexpr const CommandInfo& command_info() {
  constexpr const CommandInfo* info = detail::find_in_table(Code);
  static_assert(info != nullptr, "not a TPM 2.0 command code (command_table.h)");
  return *info;
}

}  // namespace tpmsec

#endif  // TPMSEC_COMMAND_TABLE_H_
